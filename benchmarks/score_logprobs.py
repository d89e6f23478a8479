"""Add Gemma's own likelihood to cached answer samples (teacher forcing, no re-sampling).

For every (question, chunk) of a samples file written by ``collect_samples.py``, the local
Gemma 3 270M (Q4_K_M, llama-cpp-python) reads the few-shot completion prompt once and then
each sampled answer token by token; the answer's score is its mean token log-probability
given the prompt, which is what llama.cpp reports for a sampled completion (``logprobs``;
log-softmax of the raw logits, so temperature plays no part). The rows gain
``"logprobs": {chunk id: [one per sample]}``; an abstaining (empty) sample gets ``null``.

The scoring is :func:`conformal_rag_plugins.local.logprobs.continuation_logprob`, the function
``local_llm(logprobs=True)`` uses at sampling time in both frameworks, so the cached values are
what the live models report. The prompt is evaluated once per (question, chunk) (the few-shot
prefix stays in the KV cache); each answer token is one more decode.

Usage::

    .venv/bin/python benchmarks/score_logprobs.py  # rewrites benchmarks/data/squad_gemma_pool_samples.jsonl
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from conformal_rag_plugins.answer_sets.prompts import FEW_SHOT_TEMPLATE
from conformal_rag_plugins.local.corpus import bundled_corpus
from conformal_rag_plugins.local.llm import gemma_model_path
from conformal_rag_plugins.local.logprobs import continuation_logprob

SAMPLES = Path(__file__).resolve().parent / "data" / "squad_gemma_pool_samples.jsonl"


def score_answers(llama, prompt: str, answers: list[str]) -> dict[str, float | None]:
    """Mean token log-probability of each distinct answer (as the completion `` answer``) after ``prompt``."""
    return {a: continuation_logprob(llama, prompt, " " + a) if a else None for a in dict.fromkeys(answers)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=Path, default=SAMPLES)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    texts = {e.id: e.text for e in bundled_corpus()}
    rows = [json.loads(line) for line in args.samples.read_text(encoding="utf-8").splitlines() if line]
    partial = args.samples.with_suffix(".partial")  # one scored row per line, so an interrupted run resumes
    done = {}
    if partial.exists():
        done = {r["id"]: r["logprobs"] for r in map(json.loads, partial.read_text(encoding="utf-8").splitlines())}
    from llama_cpp import Llama

    llama = Llama(model_path=str(gemma_model_path()), n_ctx=2048, n_threads=args.threads, verbose=False)
    with partial.open("a", encoding="utf-8") as fh:
        for i, row in enumerate(rows):
            if row["id"] not in done:
                logprobs = {}
                for cid, answers in row["samples"].items():
                    prompt = FEW_SHOT_TEMPLATE.format(context=texts[cid], question=row["question"])
                    scored = score_answers(llama, prompt, answers)
                    logprobs[cid] = [scored[a] for a in answers]
                fh.write(json.dumps({"id": row["id"], "logprobs": logprobs}) + "\n")
                fh.flush()
                done[row["id"]] = logprobs
            row["logprobs"] = done[row["id"]]
            print(f"{i + 1}/{len(rows)}", flush=True)
    args.samples.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    partial.unlink()


if __name__ == "__main__":
    main()
