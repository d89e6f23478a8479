"""The tuned host in one Python call versus ``conformal-rag calibrate`` on the same data (issue 34, part 3).

A slice of the bundled long documents (``local/long_documents.py``: ``N_DOCS`` documents of about
670 MiniLM tokens drawn with ``SEED``, and the questions whose gold document is among them, labelled
with the *document* ids) is split with ``SEED`` into calibration questions and held-out ones. On the
calibration questions, for each framework:

* ``cli``: ``conformal-rag calibrate --corpus slice.jsonl --questions labelled.jsonl --framework F``
  run in-process; its host is rebuilt from the saved file on the chunks the command indexed;
* ``python``: ``ConformalRetriever.from_documents(documents, examples)`` with the framework's own
  ``Document``s (same ids, texts, titles), on a Chroma directory of its own;
* ``plain``: the framework's plain dense store over the same chunks (LlamaIndex
  ``VectorStoreIndex`` + ``as_retriever(similarity_top_k=50)``, LangChain ``InMemoryVectorStore``),
  calibrated with ``calibrate_retriever`` on the same questions (chunk-level gold), served by
  ``ConformalRetriever``.

Each is asked the held-out questions: coverage (a gold chunk, i.e. one holding a reference answer
of the gold document, is returned), mean units returned and mean context tokens (MiniLM word pieces
of the returned texts). Target 0.9.

Writes ``benchmarks/results/tuned_one_call.json`` and ``.md``. ``tests/tuning/test_tuned_calibration_one_call.py``
runs :func:`measure` and compares the rows.

Usage::

    .venv/bin/python benchmarks/tuned_one_call.py [--docs 50] [--seed 0]
"""

from __future__ import annotations

import argparse
import importlib
import json
import platform
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np

OUT = Path(__file__).resolve().parent / "results"
N_DOCS = 50
SEED = 0
HELD_OUT = 0.4
LEVEL = 0.9
POOL = 50
FRAMEWORKS = ("llamaindex", "langchain")


def slice_data(n_docs: int = N_DOCS, seed: int = SEED, held_out: float = HELD_OUT) -> tuple[list, list, list]:
    """``(documents, calibration questions, held-out questions)`` of a seeded slice of the long documents."""
    from conformal_rag_plugins.local.long_documents import bundled_long_documents

    docs, questions = bundled_long_documents()
    rng = np.random.default_rng(seed)
    keep = set(rng.choice(len(docs), size=n_docs, replace=False).tolist())
    chosen = [d for i, d in enumerate(docs) if i in keep]
    ids = {d.id for d in chosen}
    mine = [q for q in questions if set(q.gold_ids) <= ids]
    order = rng.permutation(len(mine))
    n_held = round(len(mine) * held_out)
    held = [mine[i] for i in sorted(order[:n_held])]
    cal = [mine[i] for i in sorted(order[n_held:])]
    return chosen, cal, held


def _llamaindex_documents(entries: list) -> list:
    from llama_index.core import Document

    return [Document(text=e.text, id_=e.id, metadata={"title": e.title}) for e in entries]


def _langchain_documents(entries: list) -> list:
    from langchain_core.documents import Document

    return [Document(e.text, id=e.id, metadata={"title": e.title}) for e in entries]


_DOCUMENTS = {"llamaindex": _llamaindex_documents, "langchain": _langchain_documents}


def framework_documents(framework: str, entries: list) -> list:
    """The framework's own ``Document``s of the corpus entries (same id, text and title)."""
    return _DOCUMENTS[framework](entries)


def run_cli(framework: str, entries: list, examples: list, workdir: Path) -> tuple[Any, Any]:
    """``conformal-rag calibrate`` in-process: ``(calibration, served retriever rebuilt on its chunks)``."""
    from conformal_rag_plugins.cli import main
    from conformal_rag_plugins.commands.calibration_inputs import load_chunks
    from conformal_rag_plugins.commands.framework_registry import get_framework
    from conformal_rag_plugins.datasets.examples import save_examples
    from conformal_rag_plugins.frameworks import collection_name
    from conformal_rag_plugins.local.chroma import chroma_client
    from conformal_rag_plugins.retrieval.calibration import RetrievalCalibration

    workdir.mkdir(parents=True, exist_ok=True)
    corpus, questions, out = workdir / "slice.jsonl", workdir / "labelled.jsonl", workdir / "calibration.json"
    with corpus.open("w", encoding="utf-8") as f:
        for e in entries:
            f.write(json.dumps({"id": e.id, "text": e.text, "title": e.title}, ensure_ascii=False) + "\n")
    save_examples(examples, questions)
    persist = workdir / "chroma"
    argv = ["calibrate", "--corpus", str(corpus), "--questions", str(questions), "--framework", framework,
            "--confidence-level", str(LEVEL), "--pool-size", str(POOL), "--persist-dir", str(persist),
            "--out", str(out), "--quiet"]  # fmt: skip
    if main(argv) != 0:
        raise RuntimeError(f"conformal-rag calibrate failed: {argv}")
    cal = RetrievalCalibration.load(out)
    adapter = get_framework(framework)
    chunks = load_chunks(framework, [str(corpus)], None)
    searchable, units = adapter.index_chunks(
        chunks, client=chroma_client(persist), collection_name=collection_name(framework, chunks)
    )
    host = adapter.hybrid_from_calibration(searchable, units, cal)
    return cal, adapter.conformal_retriever("hybrid", host, cal)


def run_python(framework: str, entries: list, examples: list, workdir: Path) -> Any:
    """``ConformalRetriever.from_documents`` on the framework's ``Document``s (a Chroma directory of its own)."""
    retriever_class = importlib.import_module(f"conformal_rag_plugins.{framework}").ConformalRetriever
    docs = framework_documents(framework, entries)
    return retriever_class.from_documents(
        docs, examples, confidence_level=LEVEL, pool_size=POOL, persist_dir=workdir / "python-chroma"
    )


def _plain_llamaindex(chunks: list, mapped: list, opts: Any) -> tuple[Any, Any]:
    from llama_index.core import VectorStoreIndex
    from llama_index.core.schema import TextNode

    from conformal_rag_plugins.llamaindex import ConformalRetriever, calibrate_retriever
    from conformal_rag_plugins.local.llamaindex_models import MiniLMEmbedding

    nodes = [TextNode(id_=c.id, text=c.text) for c in chunks]
    host = VectorStoreIndex(nodes, embed_model=MiniLMEmbedding()).as_retriever(similarity_top_k=POOL)
    cal = calibrate_retriever(host, mapped, confidence_level=LEVEL, options=opts)
    return cal, ConformalRetriever(cal, retriever=host)


def _plain_langchain(chunks: list, mapped: list, opts: Any) -> tuple[Any, Any]:
    from langchain_core.documents import Document
    from langchain_core.vectorstores import InMemoryVectorStore

    from conformal_rag_plugins.langchain import ConformalRetriever, calibrate_retriever
    from conformal_rag_plugins.local.langchain_models import MiniLMEmbeddings

    store = InMemoryVectorStore(MiniLMEmbeddings())
    store.add_documents([Document(c.text, id=c.id) for c in chunks], ids=[c.id for c in chunks])
    cal = calibrate_retriever(store, mapped, confidence_level=LEVEL, pool_size=POOL, options=opts)
    return cal, ConformalRetriever(vectorstore=store, calibration=cal)


_PLAIN = {"llamaindex": _plain_llamaindex, "langchain": _plain_langchain}


def run_plain(framework: str, entries: list, examples: list) -> tuple[Any, Any]:
    """The plain dense store over the same chunks + ``calibrate_retriever``: ``(calibration, retriever)``."""
    from conformal_rag_plugins.commands.framework_registry import get_framework
    from conformal_rag_plugins.labelling.chunk_labels import map_gold_to_chunks
    from conformal_rag_plugins.retrieval.options import RetrievalOptions

    chunks = get_framework(framework).chunk_entries(entries, chunk_size=None, chunk_overlap=None)
    mapped, _ = map_gold_to_chunks(examples, chunks)
    return _PLAIN[framework](chunks, mapped, RetrievalOptions(progress=False))


def held_out_row(framework: str, retriever: Any, held: list, entries: list) -> dict[str, float]:
    """Coverage, mean units and mean MiniLM tokens of ``retriever`` on the held-out questions."""
    from conformal_rag_plugins.commands.framework_registry import get_framework
    from conformal_rag_plugins.labelling.chunk_labels import map_gold_to_chunks
    from conformal_rag_plugins.local.tokens import count_tokens

    adapter = get_framework(framework)
    chunks = adapter.chunk_entries(entries, chunk_size=None, chunk_overlap=None)
    mapped, _ = map_gold_to_chunks(held, chunks)
    ask = adapter.ask(retriever)
    hits, units, tokens = [], [], []
    for ex in mapped:
        got = adapter.ids_and_texts(ask(ex.question))
        hits.append(bool(set(ex.gold_ids) & {i for i, _ in got}))
        units.append(len(got))
        tokens.append(sum(count_tokens(t) for _, t in got))
    return {
        "coverage": float(np.mean(hits)),
        "mean_units": float(np.mean(units)),
        "mean_tokens": float(np.mean(tokens)),
        "n_held_out": len(mapped),
    }


def _selection(cal: Any) -> dict[str, Any]:
    sel = cal.selection_
    keys = ("fusion_method", "dense_weight", "pool_size", "unit")
    return {k: sel.get(k) for k in keys} | {"score_family": cal.score_family_, "threshold": cal.threshold_,
                                           "n_calibration": cal.n_calibration_}  # fmt: skip


def measure(framework: str, workdir: Path, n_docs: int = N_DOCS, seed: int = SEED, plain: bool = True) -> dict:
    """The three rows of one framework (``cli``, ``python`` and, with ``plain``, ``plain``) and their calibrations."""
    entries, cal_q, held = slice_data(n_docs, seed)
    rows: dict[str, Any] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t0 = time.perf_counter()
        cli_cal, cli_retriever = run_cli(framework, entries, cal_q, workdir / f"{framework}-cli")
        rows["cli"] = held_out_row(framework, cli_retriever, held, entries) | _selection(cli_cal)
        rows["cli"]["seconds"] = round(time.perf_counter() - t0, 1)
        t0 = time.perf_counter()
        py = run_python(framework, entries, cal_q, workdir / f"{framework}-python")
        rows["python"] = held_out_row(framework, py, held, entries) | _selection(py.calibration)
        rows["python"]["seconds"] = round(time.perf_counter() - t0, 1)
        if plain:
            t0 = time.perf_counter()
            plain_cal, plain_retriever = run_plain(framework, entries, cal_q)
            rows["plain"] = held_out_row(framework, plain_retriever, held, entries) | _selection(plain_cal)
            rows["plain"]["seconds"] = round(time.perf_counter() - t0, 1)
    return {"framework": framework, "n_docs": len(entries), "n_calibration_questions": len(cal_q),
            "n_held_out": len(held), "rows": rows}  # fmt: skip


def _markdown(results: list[dict], meta: dict) -> str:
    from conformal_rag_plugins.commands.tables import markdown_table

    labels = {"cli": "`conformal-rag calibrate` (tuned hybrid)", "python": "`ConformalRetriever.from_documents`",
              "plain": "plain dense store + `calibrate_retriever`"}  # fmt: skip
    lines = [
        "# The tuned host in one Python call versus the command line",
        "",
        f"{meta['n_docs']} long documents of the bundled set (seed {meta['seed']}), their questions split "
        f"{1 - HELD_OUT:.0%} calibration / {HELD_OUT:.0%} held out; target {LEVEL}, pool {POOL}. "
        "Coverage, mean units and mean MiniLM tokens are on the held-out questions.",
        "",
        f"Command: `{meta['command']}`",
        "",
    ]
    for res in results:
        cols = ["path", "coverage", "mean units", "mean tokens", "threshold", "fusion", "pool", "score", "s"]
        body = []
        for key, row in res["rows"].items():
            fusion = f"{row['fusion_method']}:{row['dense_weight']:g}" if row.get("fusion_method") else "dense"
            values = [labels[key], f"{row['coverage']:.3f}", f"{row['mean_units']:.2f}", f"{row['mean_tokens']:.0f}",
                      f"{row['threshold']:.6g}", fusion, str(row.get("pool_size") or POOL), str(row["score_family"]),
                      f"{row['seconds']:.0f}"]  # fmt: skip
            body.append(dict(zip(cols, values, strict=True)))
        lines += [
            f"## {res['framework']} ({res['n_calibration_questions']} calibration, {res['n_held_out']} held out)",
            "",
            markdown_table(body, cols),
            "",
        ]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=N_DOCS)
    parser.add_argument("--seed", type=int, default=SEED)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        results = [measure(fw, Path(tmp), args.docs, args.seed) for fw in FRAMEWORKS]
    command = f".venv/bin/python benchmarks/tuned_one_call.py --docs {args.docs} --seed {args.seed}"
    meta = {"n_docs": args.docs, "seed": args.seed, "python": platform.python_version(), "command": command}
    OUT.mkdir(exist_ok=True)
    (OUT / "tuned_one_call.json").write_text(json.dumps({"meta": meta, "results": results}, indent=2) + "\n")
    (OUT / "tuned_one_call.md").write_text(_markdown(results, meta))
    print(_markdown(results, meta))


if __name__ == "__main__":
    main()
