"""Collect real answer samples from the local Gemma 3 270M for answer-set calibration and tests.

For a seeded subset of the bundled SQuAD questions, the script retrieves the top chunks with the
default hybrid LlamaIndex host and samples ``M`` answers per (question, chunk) with the few-shot
completion prompt. The gold chunk is always sampled too, so the generator stage can be calibrated.
Samples go through the on-disk sample cache, so an interrupted run resumes.

Writes ``benchmarks/data/squad_gemma_samples.jsonl`` (CC BY-SA 4.0 questions and passages; the
answers are model outputs). One line per question::

    {"id", "question", "answers", "gold_ids", "pool": [{"id", "score"}...],
     "samples": {chunk_id: [answer, ...]}, "tokens": {chunk_id: [prompt, completion]}}

Usage::

    .venv/bin/python benchmarks/collect_samples.py --questions 240 --samples 8 --top 3
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from pathlib import Path

from conformal_rag_plugins.apps.hosts import build_host
from conformal_rag_plugins.apps.sample_rows import build_rows
from conformal_rag_plugins.calibration.examples import split_examples
from conformal_rag_plugins.generation import SampleCache
from conformal_rag_plugins.llamaindex.llm import local_llm
from conformal_rag_plugins.llamaindex.sampling import LlamaIndexSampler
from conformal_rag_plugins.local.chroma import chroma_client
from conformal_rag_plugins.local.corpus import bundled_corpus, bundled_questions
from conformal_rag_plugins.local.encoder import default_cache_dir

OUT = Path(__file__).resolve().parent / "data" / "squad_gemma_samples.jsonl"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=240)
    parser.add_argument("--samples", type=int, default=8)
    parser.add_argument("--top", type=int, default=3)
    parser.add_argument("--pool", type=int, default=10, help="pool scores stored per question")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    entries = list(bundled_corpus())
    texts = {e.id: e.text for e in entries}
    questions = split_examples(list(bundled_questions(True)), (1.0,), seed=0)[0][: args.questions]
    bundle = build_host("llamaindex", "hybrid", entries, pool_size=50, client=chroma_client())
    sampler = LlamaIndexSampler(
        local_llm(temperature=1.0),
        n_samples=args.samples,
        max_concurrency=1,
        cache=SampleCache(default_cache_dir() / "samples.sqlite"),
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    with args.out.open("w", encoding="utf-8") as fh:
        for start in range(0, len(questions), 10):
            for row in build_rows(
                questions[start : start + 10],
                bundle.fetch,
                texts,
                sampler.asample,
                top=args.top,
                pool=args.pool,
                progress=False,
            ):
                fh.write(json.dumps(row, ensure_ascii=False) + "\n")
            fh.flush()
            print(f"{start + 10}/{len(questions)} questions, {time.perf_counter() - t0:.0f}s", flush=True)


if __name__ == "__main__":
    main()
