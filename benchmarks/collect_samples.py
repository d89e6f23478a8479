"""Collect real answer samples from the local Gemma 3 270M for answer-set calibration and tests.

For a seeded subset of the bundled SQuAD questions, the script retrieves the top-``pool`` chunks
with the dense MiniLM + Chroma host (LlamaIndex scale, exp(-distance)) and samples ``M`` answers
per (question, chunk) with the few-shot completion prompt, for **every** chunk of the pool, for the
LangChain dense host's top-``pool`` as well (the same ranking up to float noise), and for the gold
chunk that defines the retrieval score. Any retrieval set of either framework with that pool size
is then fully sampled, so set sizes are exact and a sample-replay LLM can drive the shipped
synthesizers. Samples go through the on-disk sample cache, so an interrupted run resumes.

Writes ``benchmarks/data/squad_gemma_pool_samples.jsonl`` (CC BY-SA 4.0 questions and passages; the
answers are model outputs). One line per question::

    {"id", "question", "answers", "gold_ids", "pool": [{"id", "score"}...],
     "samples": {chunk_id: [answer, ...]}, "tokens": {chunk_id: [prompt, completion]}}

Usage::

    .venv/bin/python benchmarks/collect_samples.py --questions 200 --samples 6 --pool 6
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from pathlib import Path

from conformal_rag_plugins.answer_sets.sample_cache import SampleCache
from conformal_rag_plugins.commands.answer_sample_rows import build_rows
from conformal_rag_plugins.commands.hosts import build_host
from conformal_rag_plugins.datasets.examples import split_examples
from conformal_rag_plugins.llamaindex.answer_sampler import LlamaIndexSampler
from conformal_rag_plugins.local.chroma import chroma_client
from conformal_rag_plugins.local.corpus import bundled_corpus, bundled_questions
from conformal_rag_plugins.local.encoder import default_cache_dir
from conformal_rag_plugins.local.llamaindex_models import local_llm

OUT = Path(__file__).resolve().parent / "data" / "squad_gemma_pool_samples.jsonl"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=200)
    parser.add_argument("--samples", type=int, default=6)
    parser.add_argument("--pool", type=int, default=6, help="pool chunks sampled (and scores stored) per question")
    parser.add_argument("--threads", type=int, default=2, help="llama.cpp threads")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    entries = list(bundled_corpus())
    texts = {e.id: e.text for e in entries}
    questions = split_examples(list(bundled_questions(True)), (1.0,), seed=0)[0][: args.questions]
    client = chroma_client()
    bundle = build_host("llamaindex", "dense", entries, pool_size=args.pool, client=client)
    other = build_host("langchain", "dense", entries, pool_size=args.pool, client=client)
    sampler = LlamaIndexSampler(
        local_llm(temperature=1.0, n_threads=args.threads),
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
                pool=args.pool,
                extra_ids=lambda ex: [c for c in other.fetch(ex.question).ids if c is not None],
                progress=False,
            ):
                fh.write(json.dumps(row, ensure_ascii=False) + "\n")
            fh.flush()
            print(f"{start + 10}/{len(questions)} questions, {time.perf_counter() - t0:.0f}s", flush=True)


if __name__ == "__main__":
    main()
