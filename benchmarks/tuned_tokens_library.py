"""Library tuned default (issue 13, parts 2-3): unit and pool chosen by mean context tokens.

``calibrate_hybrid_retriever`` of both frameworks, on the real offline stack, in three settings:

* ``squad@50``: the bundled SQuAD subset (1179 passages), base pool 50 (pools 50/100/200 tried);
* ``squad@2``: the same with a forced base pool of 2 (pools 2/4/8 tried), which misses more
  than alpha of the questions;
* ``long+parents@50``: the 199 long documents cut into 96-token chunks, ``parents=`` the documents
  (chunk and parent level compete), pools 50/100/200.

Each is compared with the rule before this change (``before``: chunk level, base pool, smallest
mean set), run with the same machinery restricted to those candidates. For ``SEEDS`` random
calibration/held-out splits (``N_CAL`` calibration questions), the held-out questions are asked
through ``ConformalRetriever`` built from the returned host (with ``parents=`` when a parent unit is
chosen): coverage (gold among the returned units; gold = the chunks holding an answer at chunk
level, the document at parent level), mean set size and mean context tokens (MiniLM tokens of the
returned texts). alpha = 0.1.

Writes ``benchmarks/results/tuned_tokens_library.json`` and ``.md``.

Usage::

    .venv/bin/python benchmarks/tuned_tokens_library.py [--seeds 2]
"""

from __future__ import annotations

import argparse
import json
import platform
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from conformal_rag_plugins.commands.framework_registry import get_framework
from conformal_rag_plugins.commands.tables import markdown_table
from conformal_rag_plugins.labelling.chunk_labels import map_gold_to_chunks
from conformal_rag_plugins.labelling.chunk_records import Chunk
from conformal_rag_plugins.local.chroma import chroma_client
from conformal_rag_plugins.local.tokens import count_tokens
from conformal_rag_plugins.retrieval.options import RetrievalOptions
from conformal_rag_plugins.tuning.candidates import CandidateSearch, default_pool_sizes
from conformal_rag_plugins.tuning.fusion_config import DEFAULT_FUSION_GRID
from conformal_rag_plugins.tuning.options import TuningOptions
from conformal_rag_plugins.tuning.tuned_calibration import calibrate_tuned

OUT = Path(__file__).resolve().parent / "results"
NAME = "tuned_tokens_library"
ALPHA = 0.1
N_CAL = 300


def _li_setting(name: str, client: Any) -> dict[str, Any]:
    from llama_index.core.schema import MetadataMode

    from conformal_rag_plugins.commands.hosts import corpus_key
    from conformal_rag_plugins.llamaindex.parent_retrieval import chunk_parent_id
    from conformal_rag_plugins.local.corpus import bundled_corpus, bundled_questions
    from conformal_rag_plugins.local.llamaindex_parents import build_parent_stack
    from conformal_rag_plugins.local.llamaindex_stack import build_chroma_index
    from conformal_rag_plugins.local.long_documents import bundled_long_documents

    if name.startswith("squad"):
        entries = list(bundled_corpus())
        index, nodes = build_chroma_index(
            entries, client=client, collection_name=f"crp-llamaindex-{corpus_key(entries)}"
        )
        return {"index": index, "nodes": nodes, "questions": list(bundled_questions(True)), "parents": None}
    docs, questions = bundled_long_documents()
    stack = build_parent_stack(docs, layout="flat", client=client)
    records = [
        Chunk(n.node_id, n.get_content(metadata_mode=MetadataMode.NONE), parent_id=chunk_parent_id(n))
        for n in stack.chunks
    ]
    return {"index": stack.index, "nodes": stack.chunks, "questions": questions,
            "parents": stack.storage_context.docstore, "records": records}  # fmt: skip


def _lc_setting(name: str, client: Any) -> dict[str, Any]:
    from langchain_core.documents import Document

    from conformal_rag_plugins.commands.hosts import build_host
    from conformal_rag_plugins.local.corpus import bundled_corpus, bundled_questions
    from conformal_rag_plugins.local.langchain_parents import build_parent_document_retriever
    from conformal_rag_plugins.local.long_documents import bundled_long_documents

    if name.startswith("squad"):
        entries = list(bundled_corpus())
        store = build_host("langchain", "dense", entries, pool_size=50, client=client).host
        return {"index": store, "nodes": entries, "questions": list(bundled_questions(True)), "parents": None}
    docs, questions = bundled_long_documents()
    pdr = build_parent_document_retriever(docs, chunk_size=96, client=client)
    got = pdr.vectorstore.get(include=["documents", "metadatas"])
    chunks = [Document(id=i, page_content=t, metadata=m) for i, t, m in
              zip(got["ids"], got["documents"], got["metadatas"], strict=True)]  # fmt: skip
    records = [Chunk(d.id, d.page_content, parent_id=d.metadata["doc_id"]) for d in chunks]
    return {"index": pdr.vectorstore, "nodes": chunks, "questions": questions, "parents": pdr.docstore,
            "records": records}  # fmt: skip


#: Each framework's index, units and parents for a setting (its own parent pattern).
_SETTINGS = {"llamaindex": _li_setting, "langchain": _lc_setting}


def _before(framework: str, s: dict[str, Any], examples: list, pool: int) -> tuple[Any, Any]:
    """The rule before: chunk level, base pool, smallest mean set (same fan-out machinery)."""
    examples = map_gold_to_chunks(examples, s["records"])[0] if s["parents"] is not None else examples
    found = get_framework(framework).unit_candidates(s["index"], s["nodes"], examples, DEFAULT_FUSION_GRID, (pool,))
    tuned = calibrate_tuned(
        examples,
        {c: found.fetcher(c) for c in found.candidates},
        found.fingerprint,
        pool_size=pool,
        options=RetrievalOptions(progress=False),
        tuning=TuningOptions(objective="size"),
        search=CandidateSearch(fanout=found.fanout),
    )  # fmt: skip
    return found.host(tuned.candidate), tuned.calibration


def _held_out(framework: str, s: dict[str, Any], host: Any, cal: Any, held: list) -> dict[str, float]:
    parent = str(cal.selection_.get("unit", "chunk")).startswith("parent")
    if not parent and s["parents"] is not None:
        held = map_gold_to_chunks(held, s["records"])[0]
    extra = {"parents": s["parents"]} if parent else {}
    adapter = get_framework(framework)
    ask = adapter.ask(adapter.conformal_retriever("hybrid", host, cal, **extra))
    sets = [adapter.ids_and_texts(ask(ex.question)) for ex in held]
    cache: dict[str, int] = {}
    tokens = [sum(cache.setdefault(t, count_tokens(t)) for _, t in units) for units in sets]
    covered = [bool({i for i, _ in units} & set(ex.gold_ids)) for units, ex in zip(sets, held, strict=True)]
    return {"coverage": float(np.mean(covered)), "mean_size": float(np.mean([len(u) for u in sets])),
            "mean_tokens": float(np.mean(tokens))}  # fmt: skip


def _optimisation_view(sel: dict[str, Any]) -> dict[str, Any]:
    """On the optimisation split: the chosen candidate's and the fewest-units parent candidate's size and tokens."""
    tokens, sizes = sel.get("mean_tokens") or {}, sel.get("grid") or {}
    if not tokens:
        return {}
    chosen = f"{sel['candidate']}|{sel['chosen']}"
    out = {"opt_chosen_size": round(sizes[chosen], 3), "opt_chosen_tokens": round(tokens[chosen], 1)}
    parents = {k: v for k, v in sizes.items() if k.startswith("parent")}
    if parents:
        best = min(parents, key=parents.get)
        out |= {"opt_fewest_units": best, "opt_fewest_units_size": round(sizes[best], 3),
                "opt_fewest_units_tokens": round(tokens[best], 1),
                "opt_fewest_units_overall": min(sizes, key=sizes.get)}  # fmt: skip
    return out


def run(seeds: int) -> dict[str, Any]:
    client = chroma_client()
    rows = []
    t_all = time.perf_counter()
    for framework in ("llamaindex", "langchain"):
        adapter = get_framework(framework)
        for name, pool in (("squad@50", 50), ("squad@2", 2), ("long+parents@50", 50)):
            s = _SETTINGS[framework](name, client)
            for seed in range(seeds):
                perm = np.random.default_rng(1000 + seed).permutation(len(s["questions"]))
                cal_q = [s["questions"][i] for i in perm[:N_CAL]]
                held = [s["questions"][i] for i in perm[N_CAL:]]
                for rule in ("tokens", "before"):
                    t0 = time.perf_counter()
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        if rule == "tokens":
                            host, cal = adapter.calibrate_hybrid_retriever(
                                s["index"], s["nodes"], cal_q, pool_size=pool, parents=s["parents"],
                                options=RetrievalOptions(random_state=seed, progress=False),
                            )  # fmt: skip
                        else:
                            host, cal = _before(framework, s, cal_q, pool)
                        seconds = time.perf_counter() - t0
                        out = _held_out(framework, s, host, cal, held)
                    sel = cal.selection_
                    opt = _optimisation_view(sel)
                    rows.append({
                        "framework": framework, "setting": name, "seed": seed, "rule": rule,
                        "chosen": f"{sel.get('candidate', sel['fusion_method'])}|{sel['chosen']}",
                        "unit": sel.get("unit", "chunk"), "pool": cal.pool_size_,
                        "pools_tried": len(default_pool_sizes(pool)) if rule == "tokens" else 1,
                        "n_held_out": len(held), "calibrate_s": round(seconds, 2),
                        **{k: round(v, 4) for k, v in out.items()},
                        **opt,
                    })  # fmt: skip
                    print(rows[-1], flush=True)
    return {
        "benchmark": NAME, "alpha": ALPHA, "n_calibration_questions": N_CAL, "seeds": seeds, "rows": rows,
        "seconds": round(time.perf_counter() - t_all, 1), "python": platform.python_version(),
    }  # fmt: skip


def _summary(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    keys = sorted(
        {(r["framework"], r["setting"], r["rule"]) for r in rows}, key=lambda k: (k[0], k[1], k[2] != "before")
    )
    for fw, setting, rule in keys:
        rs = [r for r in rows if (r["framework"], r["setting"], r["rule"]) == (fw, setting, rule)]
        out.append({
            "framework": fw, "setting": setting, "rule": rule,
            "chosen (seed 0)": rs[0]["chosen"], "unit": rs[0]["unit"], "pool": "/".join(str(r["pool"]) for r in rs),
            "coverage": round(float(np.mean([r["coverage"] for r in rs])), 3),
            "mean size": round(float(np.mean([r["mean_size"] for r in rs])), 2),
            "mean tokens": round(float(np.mean([r["mean_tokens"] for r in rs])), 1),
            "calibrate s": round(float(np.mean([r["calibrate_s"] for r in rs])), 1),
        })  # fmt: skip
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=2)
    args = parser.parse_args()
    result = run(args.seeds)
    result["summary"] = _summary(result["rows"])
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / f"{NAME}.json").write_text(json.dumps(result, indent=2) + "\n")
    table = markdown_table(result["summary"], list(result["summary"][0]))
    header = (
        f"# {NAME}\n\nalpha={ALPHA}, {N_CAL} calibration questions (30% tune, 70% calibrate), held-out = "
        f"the rest; mean over {args.seeds} seeded splits; {result['seconds']} s in all.\n\n"
    )
    (OUT / f"{NAME}.md").write_text(header + table + "\n")
    print(table)


if __name__ == "__main__":
    main()
