"""Repeatability of question generation with the bundled local LLM: two runs from empty caches.

Each run is a new process (a new model, whose sampling seed starts where it always starts) that
does what the example notebooks do: the bundled articles as a folder of text files, chunked with
the framework's own splitter, ``--questions`` questions written by Gemma 3 270M at temperature 0.7
with ``max_concurrency=1`` and an empty LLM cache. The model's seed advances with every call, so
the runs agree only if the calls come in the same order; the table shows whether they did.

Writes ``benchmarks/results/repeatability.{json,md}``; each ``--label`` is kept as one part of the
file, so another checkout (``--root``, imported by the runs instead of this one) can be compared.

Usage::

    .venv/bin/python benchmarks/repeatability.py [--questions 8] [--runs 2] [--root DIR --label NAME]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from conformal_rag_plugins.commands.framework_registry import FRAMEWORKS

OUT = Path(__file__).resolve().parent / "results"


def _write_folder(folder: Path) -> None:
    """The notebooks' folder (`local.corpus.write_bundled_articles`), copied here for older `--root` checkouts."""
    from conformal_rag_plugins.local.corpus import bundled_corpus

    articles: dict[str, list[str]] = {}
    for passage in bundled_corpus():
        if passage.title:  # the distractor passages have no title
            articles.setdefault(passage.title, []).append(passage.text)
    for title, paragraphs in articles.items():
        (folder / f"{title}.txt").write_text("\n\n".join(paragraphs), encoding="utf-8")


def one_run(framework: str, n_questions: int, work: Path) -> dict[str, Any]:
    """One generation as the notebooks do it (in this process); questions, calls and seconds."""
    from conformal_rag_plugins.commands.framework_registry import get_framework
    from conformal_rag_plugins.datasets.text_folder import load_text_folder
    from conformal_rag_plugins.labelling.options import QuestionOptions

    adapter = get_framework(framework)
    writer = adapter.build_llm("local", temperature=0.7, max_tokens=96)
    folder = work / "docs"
    folder.mkdir()
    _write_folder(folder)
    chunks = adapter.chunk_entries(load_text_folder(folder), chunk_size=None, chunk_overlap=None)
    start = time.perf_counter()
    questions, report = adapter.generate_questions(
        chunks,
        writer,
        n_questions,
        seed=0,
        cache=work / "llm_cache.sqlite",
        options=QuestionOptions(max_concurrency=1, progress=False),
    )
    seconds = time.perf_counter() - start
    pairs = [[q.question, q.answers[0], q.gold_ids[0]] for q in questions]
    return {
        "n_generated": report.n_generated,
        "llm_calls": report.llm_calls,
        "cache_hits": report.cache_hits,
        "seconds": round(seconds, 1),
        "questions_sha256": hashlib.sha256(json.dumps(pairs).encode("utf-8")).hexdigest(),
        "questions": pairs,
    }


def _child(framework: str, n_questions: int, root: Path | None) -> dict[str, Any]:
    env = dict(os.environ)
    if root is not None:  # the runs import that checkout's package
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(root.resolve()), env.get("PYTHONPATH")) if p)
    with tempfile.TemporaryDirectory() as tmp:
        run = subprocess.run(
            [sys.executable, __file__, "--child", framework, "--questions", str(n_questions), "--work", tmp],
            capture_output=True,
            text=True,
            check=True,
            env=env,
        )
    return json.loads(run.stdout.strip().splitlines()[-1])


def _measure(n_questions: int, runs: int, root: Path | None) -> dict[str, Any]:
    frameworks = {f: [_child(f, n_questions, root) for _ in range(runs)] for f in FRAMEWORKS}
    return {
        "questions": n_questions,
        "runs": runs,
        "repeatable": all(
            len({(r["questions_sha256"], r["llm_calls"]) for r in got}) == 1 for got in frameworks.values()
        ),
        "frameworks": frameworks,
    }


def _markdown(result: dict[str, Any]) -> str:
    lines = [
        "# Repeatability of question generation with the local LLM",
        "",
        f"Gemma 3 270M (llama-cpp-python {result['llama_cpp_python']}, {result['machine']}) writes questions from the "
        "bundled articles chunked by each framework's splitter, as in the example notebooks (temperature 0.7, "
        "`max_concurrency=1`); each run is a new process with an empty LLM cache.",
        "",
        "| code | framework | run | generated | LLM calls | seconds | questions (SHA-256, first 12) | same as run 1 |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for label, part in result["parts"].items():
        for framework, runs in part["frameworks"].items():
            first = (runs[0]["questions_sha256"], runs[0]["llm_calls"])
            for i, r in enumerate(runs, 1):
                same = "-" if i == 1 else "yes" if (r["questions_sha256"], r["llm_calls"]) == first else "**no**"
                lines.append(
                    f"| {label} | {framework} | {i} | {r['n_generated']} of {part['questions']} | {r['llm_calls']} | "
                    f"{r['seconds']:.0f} | `{r['questions_sha256'][:12]}` | {same} |"
                )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=8)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--root", type=Path, default=None, help="another checkout to measure (default: this one)")
    parser.add_argument("--label", default="now", help="the name of this part of the results")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--child", choices=FRAMEWORKS, help=argparse.SUPPRESS)
    parser.add_argument("--work", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(one_run(args.child, args.questions, args.work)))
        return
    from conformal_rag_plugins.local.llm import llama_cpp_version

    path = args.out / "repeatability.json"
    result = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {"parts": {}}
    result["llama_cpp_python"] = llama_cpp_version()
    result["machine"] = f"{platform.machine()}, Python {platform.python_version()}"
    result["parts"][args.label] = _measure(args.questions, args.runs, args.root)
    args.out.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    (args.out / "repeatability.md").write_text(_markdown(result), encoding="utf-8")
    print(_markdown(result))


if __name__ == "__main__":
    main()
