"""Small-to-big conformal retrieval with LangChain: return parents vs return chunks (issue 13, part 1).

The bundled SQuAD subset is joined into 199 long documents (6 paragraphs, about 670 MiniLM
tokens, ``local/long_documents.py``) and indexed with LangChain's ``ParentDocumentRetriever``:
children of ``--chunk-size`` MiniLM tokens in Chroma (MiniLM, cosine), the documents in an
``InMemoryStore``. Every one of the 705 questions queries the children once (pool of
``--pool`` chunks, relevance scores); from that one pool come

* ``chunk``: the chunk-level pool, gold = the chunks that hold a reference answer
  (``map_gold_to_chunks``; every chunk of the document when none does);
* ``parent:max`` / ``parent:sum``: the parent-level pool (``ParentHost.candidates``, as
  ``ConformalRetriever`` builds it), gold = the document;
* ``ParentDocumentRetriever`` as shipped (parents of its top-4 chunks), for reference.

Then ``--trials`` seeded 50/50 splits: the split-conformal threshold (``relative`` family,
``conformal_quantile``) on one half, and on the other the coverage (chunk level: an
answer-bearing chunk is returned; parent level: the document is returned), the mean set size and the
mean context tokens (MiniLM tokens of what is returned, ``count_tokens``).

Writes ``benchmarks/results/langchain_parent_retrieval.json`` and ``.md``.

Usage::

    .venv/bin/python benchmarks/langchain_parent_retrieval.py [--alpha 0.1] [--trials 200] [--seed 0]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")

from conformal_rag_plugins.commands.tables import markdown_table
from conformal_rag_plugins.core.quantile import conformal_quantile
from conformal_rag_plugins.core.retrieval_scores import keep_mask, nonconformity
from conformal_rag_plugins.labelling.chunk_labels import map_gold_to_chunks
from conformal_rag_plugins.labelling.chunk_records import Chunk
from conformal_rag_plugins.langchain.host import fetch_pairs, pool_from_pairs
from conformal_rag_plugins.langchain.parent_retrieval import parent_examples, parent_host
from conformal_rag_plugins.local.langchain_parents import build_parent_document_retriever
from conformal_rag_plugins.local.long_documents import bundled_long_documents
from conformal_rag_plugins.local.tokens import count_tokens
from conformal_rag_plugins.retrieval.gold_matching import gold_positions

HERE = Path(__file__).resolve().parent
FAMILY = "relative"
PDR_DEFAULT_K = 4


@dataclass
class Level:
    """Per question: candidate scores (best first), gold positions, and tokens of every candidate."""

    scores: list[np.ndarray]
    gold: list[tuple[int, ...]]
    tokens: list[np.ndarray]


def collect(args: argparse.Namespace) -> tuple[dict[str, Level], dict[str, float]]:
    docs, questions = bundled_long_documents()
    pdr = build_parent_document_retriever(docs, chunk_size=args.chunk_size)
    got = pdr.vectorstore._collection.get(include=["documents", "metadatas"])
    chunks = [
        Chunk(i, t, parent_id=m["doc_id"])
        for i, t, m in zip(got["ids"], got["documents"], got["metadatas"], strict=True)
    ]
    chunk_tokens = {c.id: count_tokens(c.text) for c in chunks}
    parent_tokens = {d.id: count_tokens(d.text) for d in docs}
    chunk_qs, report = map_gold_to_chunks(questions, chunks)
    hosts = {"parent:max": parent_host(pdr), "parent:sum": parent_host(pdr, how="sum")}
    parent_qs = parent_examples(hosts["parent:max"], questions)
    levels = {k: Level([], [], []) for k in ("chunk", *hosts)}
    pdr_cov, pdr_tokens, pdr_size = [], [], []
    for cq, pq in zip(chunk_qs, parent_qs, strict=True):
        pool, found = pool_from_pairs(fetch_pairs(pdr.vectorstore, cq.question, args.pool))
        lv = levels["chunk"]
        lv.scores.append(pool.scores)
        lv.gold.append(gold_positions(cq, pool.ids, pool.texts))
        lv.tokens.append(np.array([chunk_tokens[i] for i in pool.ids], dtype=float))
        for name, host in hosts.items():
            cands = host.candidates(pool, found)[0].pool
            lv = levels[name]
            lv.scores.append(cands.scores)
            lv.gold.append(gold_positions(pq, cands.ids, cands.texts))
            lv.tokens.append(np.array([parent_tokens[i] for i in cands.ids], dtype=float))
        top = list(dict.fromkeys(d.metadata["doc_id"] for d in found[:PDR_DEFAULT_K]))
        pdr_cov.append(pq.gold_ids[0] in top)
        pdr_size.append(len(top))
        pdr_tokens.append(sum(parent_tokens[i] for i in top))
    stats = {
        "n_chunks": len(chunks),
        "mean_chunk_tokens": float(np.mean(list(chunk_tokens.values()))),
        "mean_parent_tokens": float(np.mean(list(parent_tokens.values()))),
        "chunks_per_parent": len(chunks) / len(docs),
        "gold_answer_in_chunk": report.n_answer_in_chunk,
        "gold_fallback": report.n_fallback,
        "pdr_default_coverage": float(np.mean(pdr_cov)),
        "pdr_default_set_size": float(np.mean(pdr_size)),
        "pdr_default_tokens": float(np.mean(pdr_tokens)),
    }
    return levels, stats


def trials(level: Level, alpha: float, n_trials: int, seed: int) -> dict[str, float]:
    n = len(level.scores)
    r = np.array([nonconformity(FAMILY, s, g) for s, g in zip(level.scores, level.gold, strict=True)])
    rng = np.random.default_rng(seed)
    n_cal = n // 2
    cov, size, tok = [], [], []
    for _ in range(n_trials):
        perm = rng.permutation(n)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            q = conformal_quantile(r[perm[:n_cal]], alpha)
        c, s, t = [], [], []
        for i in perm[n_cal:]:
            mask = keep_mask(FAMILY, level.scores[i], q, validate=False)
            c.append(any(mask[p] for p in level.gold[i]))
            s.append(int(mask.sum()))
            t.append(float(level.tokens[i][mask].sum()))
        cov.append(np.mean(c))
        size.append(np.mean(s))
        tok.append(np.mean(t))
    return {
        "mean_coverage": float(np.mean(cov)),
        "std_coverage": float(np.std(cov, ddof=1)),
        "mean_set_size": float(np.mean(size)),
        "mean_context_tokens": float(np.mean(tok)),
        "misses": int(sum(1 for g in level.gold if not g)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--alpha", type=float, nargs="+", default=[0.1])
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--pool", type=int, default=50)
    parser.add_argument("--chunk-size", type=int, default=96)
    parser.add_argument("--out", type=Path, default=HERE / "results" / "langchain_parent_retrieval")
    args = parser.parse_args()
    start = time.time()
    levels, stats = collect(args)
    rows = []
    for alpha in args.alpha:
        for name, level in levels.items():
            rows.append({"alpha": alpha, "returns": name} | trials(level, alpha, args.trials, args.seed))
    config = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}
    env = {"python": platform.python_version(), "seconds": round(time.time() - start, 1)}
    out = {"config": config, "environment": env, "corpus": stats, "rows": rows}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".json").write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")
    table = [
        {
            "alpha": r["alpha"],
            "returns": r["returns"],
            "coverage": f"{r['mean_coverage']:.3f}",
            "set size": f"{r['mean_set_size']:.2f}",
            "context tokens": f"{r['mean_context_tokens']:.0f}",
            "misses": r["misses"],
        }
        for r in rows
    ]
    table.append(
        {
            "alpha": "-",
            "returns": f"ParentDocumentRetriever (k={PDR_DEFAULT_K} chunks)",
            "coverage": f"{stats['pdr_default_coverage']:.3f}",
            "set size": f"{stats['pdr_default_set_size']:.2f}",
            "context tokens": f"{stats['pdr_default_tokens']:.0f}",
            "misses": "-",
        }
    )
    md = (
        "# Small-to-big conformal retrieval (LangChain)\n\n"
        f"199 long documents ({stats['mean_parent_tokens']:.0f} MiniLM tokens on average), "
        f"{stats['n_chunks']} chunks of at most {args.chunk_size} tokens ({stats['mean_chunk_tokens']:.0f} on "
        f"average) in a ParentDocumentRetriever (Chroma + MiniLM, InMemoryStore); 705 questions, pool of "
        f"{args.pool} chunks, {args.trials} seeded 50/50 splits, `{FAMILY}` family. Coverage: chunk level = an "
        "answer-bearing chunk is returned; parent level = the gold document is returned.\n\n"
        + markdown_table(table, list(table[0]))
        + "\n"
    )
    args.out.with_suffix(".md").write_text(md, encoding="utf-8")
    print(md)
    print(f"done in {env['seconds']} s")


if __name__ == "__main__":
    main()
