"""Add Gemma's own likelihood to cached answer samples (teacher forcing, no re-sampling).

For every (question, chunk) of a samples file written by ``collect_samples.py``, the local
Gemma 3 270M (Q4_K_M, llama-cpp-python) reads the few-shot completion prompt once and then
each sampled answer token by token; the answer's score is its mean token log-probability
given the prompt, which is what llama.cpp reports for a sampled completion (``logprobs``;
log-softmax of the raw logits, so temperature plays no part). The rows gain
``"logprobs": {chunk id: [one per sample]}``; an abstaining (empty) sample gets ``null``.

The prompt is evaluated once per (question, chunk) without ``logits_all``: the last
position's logits give the first answer token, and each later token is one more decode.

Usage::

    .venv/bin/python benchmarks/score_logprobs.py  # rewrites benchmarks/data/squad_gemma_pool_samples.jsonl
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import numpy as np

from conformal_rag_plugins.generation.prompts import FEW_SHOT_TEMPLATE
from conformal_rag_plugins.local.corpus import bundled_corpus
from conformal_rag_plugins.local.llm import gemma_model_path

SAMPLES = Path(__file__).resolve().parent / "data" / "squad_gemma_pool_samples.jsonl"


class TeacherForcing:
    """Mean token log-probability of continuations of one prompt under a llama.cpp model."""

    def __init__(self, n_threads: int = 2, n_ctx: int = 2048) -> None:
        from llama_cpp import Llama

        self.llm = Llama(model_path=str(gemma_model_path()), n_ctx=n_ctx, n_threads=n_threads, verbose=False)
        self.n_vocab = self.llm.n_vocab()

    def _logits(self) -> np.ndarray:
        out = np.ctypeslib.as_array(self.llm._ctx.get_logits(), shape=(self.n_vocab,)).astype(np.float64)
        return out - (out.max() + math.log(np.exp(out - out.max()).sum()))

    def score(self, prompt: str, answers: list[str]) -> dict[str, float | None]:
        llm = self.llm
        tokens = llm.tokenize(prompt.encode("utf-8"), add_bos=True, special=False)
        done = llm.input_ids[: llm.n_tokens].tolist()
        keep = 0  # reuse the KV cache of the shared prefix (the few-shot examples)
        while keep < min(len(done), len(tokens) - 1) and done[keep] == tokens[keep]:
            keep += 1
        llm.n_tokens = keep
        llm.eval(tokens[keep:])
        base, first = llm.n_tokens, self._logits()
        out: dict[str, float | None] = {}
        for answer in dict.fromkeys(answers):
            ids = llm.tokenize((" " + answer).encode("utf-8"), add_bos=False, special=False) if answer else []
            if not ids:
                out[answer] = None
                continue
            llm.n_tokens = base  # eval() drops the KV cache past n_tokens
            logp, logits = [], first
            for k, tok in enumerate(ids):
                logp.append(float(logits[tok]))
                if k + 1 < len(ids):
                    llm.eval([tok])
                    logits = self._logits()
            out[answer] = float(np.mean(logp))
        return out


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
    tf = TeacherForcing(n_threads=args.threads)
    with partial.open("a", encoding="utf-8") as fh:
        for i, row in enumerate(rows):
            if row["id"] not in done:
                logprobs = {}
                for cid, answers in row["samples"].items():
                    prompt = FEW_SHOT_TEMPLATE.format(context=texts[cid], question=row["question"])
                    scored = tf.score(prompt, answers)
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
