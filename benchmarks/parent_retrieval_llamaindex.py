"""Small-to-big benchmark (LlamaIndex): conformal sets of parents beside conformal sets of chunks.

The 199 long documents of the bundled SQuAD subset (6 paragraphs each) are cut into 96-token
chunks by LlamaIndex's ``SentenceSplitter`` (``SOURCE`` -> document), indexed in Chroma with
MiniLM (dense, pool 50), the documents kept in a docstore
(``local/llamaindex_parents.py``). Every question is asked once; its chunk pool gives:

* ``chunk``: the pool itself, gold = the chunks holding a reference answer
  (``calibration/chunk_labels.py``), what a chunk-level ``ConformalRetriever`` returns;
* ``parent:max`` / ``parent:sum``: the pool turned into parents by
  ``ParentLevel.candidates`` (what ``ConformalRetriever(..., parents=docstore)`` returns),
  gold = the question's document.

Then ``TRIALS`` random calibration/test halves compute the split-conformal threshold
(``core.quantile.conformal_quantile``, ``relative`` score) and, on the test half, coverage,
set size and context tokens (MiniLM tokens of the returned texts). ``doc_coverage`` is the share
of test questions whose gold document is among the returned units' documents (for chunks:
a returned chunk comes from the gold document), so the units compare on the same event.

Writes ``benchmarks/results/parent_retrieval_llamaindex.json`` and ``.md``.

Usage::

    .venv/bin/python benchmarks/parent_retrieval_llamaindex.py [--trials 200]
"""

from __future__ import annotations

import argparse
import json
import platform
import time
import warnings
from pathlib import Path

import numpy as np

from conformal_rag_plugins.commands.tables import markdown_table
from conformal_rag_plugins.core.quantile import conformal_quantile
from conformal_rag_plugins.core.retrieval_scores import candidate_nonconformity
from conformal_rag_plugins.labelling.chunk_labels import map_gold_to_chunks
from conformal_rag_plugins.labelling.chunk_records import Chunk
from conformal_rag_plugins.llamaindex.host import pool_from_nodes
from conformal_rag_plugins.llamaindex.parent_retrieval import chunk_parent_id, resolve_parent_level
from conformal_rag_plugins.local.chroma import chroma_client
from conformal_rag_plugins.local.llamaindex_parents import build_parent_stack
from conformal_rag_plugins.local.long_documents import bundled_long_documents
from conformal_rag_plugins.local.tokens import count_tokens
from conformal_rag_plugins.retrieval.gold_matching import gold_positions

OUT = Path(__file__).resolve().parent / "results"
NAME = "parent_retrieval_llamaindex"
ALPHAS = (0.05, 0.1, 0.2)
FAMILY = "relative"
POOL = 50
CHUNK_SIZE = 96
SEED = 13
UNITS = ("chunk", "parent:max", "parent:sum")


class Unit:
    """Per question: candidate nonconformity, gold mask, gold-document mask and token counts, best first."""

    def __init__(self) -> None:
        self.r: list[np.ndarray] = []
        self.gold: list[np.ndarray] = []
        self.doc: list[np.ndarray] = []
        self.tokens: list[np.ndarray] = []

    def add(self, scores, gold, doc, tokens) -> None:
        self.r.append(candidate_nonconformity(FAMILY, scores))
        self.gold.append(np.asarray(gold, dtype=bool))
        self.doc.append(np.asarray(doc, dtype=bool))
        self.tokens.append(np.asarray(tokens, dtype=float))

    def calibration_score(self, i: int) -> float:
        hits = self.r[i][self.gold[i]]
        return float(hits.min()) if hits.size else float("inf")


def collect() -> tuple[dict[str, Unit], dict]:
    docs, questions = bundled_long_documents()
    t0 = time.perf_counter()
    stack = build_parent_stack(docs, layout="flat", chunk_size=CHUNK_SIZE, client=chroma_client())
    seconds_index = time.perf_counter() - t0
    chunk_records = [Chunk(n.node_id, n.get_content(), parent_id=chunk_parent_id(n)) for n in stack.chunks]
    chunk_gold, report = map_gold_to_chunks(questions, chunk_records)
    tokens = {c.id: count_tokens(c.text) for c in chunk_records}
    parent_tokens = {pid: count_tokens(p.get_content()) for pid, p in stack.parents.items()}
    retriever = stack.index.as_retriever(similarity_top_k=POOL)
    levels = {how: resolve_parent_level(retriever, stack.storage_context.docstore, how) for how in ("max", "sum")}
    units = {u: Unit() for u in UNITS}
    t0 = time.perf_counter()
    for q, qc in zip(questions, chunk_gold, strict=True):
        nodes = retriever.retrieve(q.question)
        pool, _ = pool_from_nodes(nodes)
        gold = set(gold_positions(qc, pool.ids, pool.texts))
        docs_of = [c.split("::chunk")[0] for c in pool.ids]
        units["chunk"].add(
            pool.scores,
            [i in gold for i in range(len(pool.ids))],
            [d == q.gold_ids[0] for d in docs_of],
            [tokens[c] for c in pool.ids],
        )
        for how, level in levels.items():
            parents = level.candidates(nodes)[0].pool
            hit = [p == q.gold_ids[0] for p in parents.ids]
            units[f"parent:{how}"].add(parents.scores, hit, hit, [parent_tokens[p] for p in parents.ids])
    meta = {
        "n_documents": len(docs),
        "n_chunks": len(stack.chunks),
        "n_questions": len(questions),
        "mean_chunk_tokens": round(float(np.mean(list(tokens.values()))), 1),
        "mean_document_tokens": round(float(np.mean(list(parent_tokens.values()))), 1),
        "chunk_gold_answer_in_chunk": report.n_answer_in_chunk,
        "chunk_gold_fallback": report.n_fallback,
        "seconds_index": round(seconds_index, 1),
        "seconds_query": round(time.perf_counter() - t0, 1),
    }
    return units, meta


def trials(units: dict[str, Unit], n_trials: int) -> list[dict]:
    n = len(units["chunk"].r)
    rng = np.random.default_rng(SEED)
    splits = [rng.permutation(n) for _ in range(n_trials)]
    rows = []
    for alpha in ALPHAS:
        for name, unit in units.items():
            cal_scores = np.array([unit.calibration_score(i) for i in range(n)])
            cov, doc_cov, size, tok = [], [], [], []
            for perm in splits:
                cal, test = perm[: n // 2], perm[n // 2 :]
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    q = conformal_quantile(cal_scores[cal], alpha)
                kept = [unit.r[i] <= q for i in test]
                cov.append(np.mean([unit.gold[i][k].any() for i, k in zip(test, kept, strict=True)]))
                doc_cov.append(np.mean([unit.doc[i][k].any() for i, k in zip(test, kept, strict=True)]))
                size.append(np.mean([k.sum() for k in kept]))
                tok.append(np.mean([unit.tokens[i][k].sum() for i, k in zip(test, kept, strict=True)]))
            rows.append(
                {
                    "alpha": alpha,
                    "unit": name,
                    "mean_coverage": round(float(np.mean(cov)), 4),
                    "std_coverage": round(float(np.std(cov, ddof=1)), 4),
                    "doc_coverage": round(float(np.mean(doc_cov)), 4),
                    "mean_set_size": round(float(np.mean(size)), 3),
                    "mean_context_tokens": round(float(np.mean(tok)), 1),
                }
            )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=200)
    args = parser.parse_args()
    t0 = time.perf_counter()
    units, meta = collect()
    rows = trials(units, args.trials)
    report = {
        "trials": args.trials,
        "seed": SEED,
        "family": FAMILY,
        "pool_size": POOL,
        "chunk_size": CHUNK_SIZE,
        "calibration_fraction": 0.5,
        "stack": meta,
        "results": rows,
        "platform": platform.platform(),
        "seconds_total": round(time.perf_counter() - t0, 1),
    }
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / f"{NAME}.json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    md = [
        "# Small-to-big (LlamaIndex): parents scored from their chunks vs chunks",
        "",
        f"199 long documents cut into {CHUNK_SIZE}-token chunks (SentenceSplitter, SOURCE -> document), dense "
        f"Chroma + MiniLM, chunk pool {POOL}; {args.trials} random calibration/test halves, seed {SEED}, "
        f"score `{FAMILY}`. Chunk gold = chunks holding an answer; parent gold = the question's document. "
        "`doc_coverage`: the gold document is among the returned units' documents. Context tokens: MiniLM "
        "tokens of the returned texts (chunks or whole documents).",
        "",
        markdown_table([meta], list(meta)),
        "",
        markdown_table(rows, list(rows[0])),
        "",
    ]
    (OUT / f"{NAME}.md").write_text("\n".join(md), encoding="utf-8")
    print("\n".join(md))


if __name__ == "__main__":
    main()
