"""The mean token log-probability of a completion under a llama.cpp model, by teacher forcing.

llama-cpp-python reports logprobs only with ``logits_all=True``, and then log-softmaxes every
position and sorts the whole vocabulary in Python for each token: with Gemma's 262k-token
vocabulary that costs seconds per sample. Scoring the text afterwards is cheap instead: the
prompt is already in the KV cache, so each completion token is one decode and one softmax.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

__all__ = ["continuation_logprob"]


def _last_logprobs(llama: Any) -> np.ndarray:
    logits = np.ctypeslib.as_array(llama._ctx.get_logits(), shape=(llama.n_vocab(),)).astype(np.float64)
    top = logits.max()
    return logits - (top + math.log(float(np.exp(logits - top).sum())))


def continuation_logprob(llama: Any, prompt: str, continuation: str) -> float | None:
    """Mean log-probability of the tokens of ``continuation`` after ``prompt`` (``None`` when it is empty).

    ``llama`` is a ``llama_cpp.Llama``. The longest prefix already in its KV cache (the
    few-shot examples, or the prompt of the completion just sampled) is reused. The value
    is a fixed function of (prompt, text), so calibration and query time score alike.

    Examples
    --------
    >>> from llama_cpp import Llama  # doctest: +SKIP
    >>> continuation_logprob(Llama(model_path=path), "Q: 2+2?\\nA:", " 4")  # doctest: +SKIP
    -0.05...
    """
    cont = llama.tokenize(continuation.encode("utf-8"), add_bos=False, special=False) if continuation.strip() else []
    if not cont:
        return None
    tokens = llama.tokenize(prompt.encode("utf-8"), add_bos=True, special=True)
    done = llama.input_ids[: llama.n_tokens].tolist()
    keep = 0
    while keep < min(len(done), len(tokens) - 1) and done[keep] == tokens[keep]:
        keep += 1
    llama.n_tokens = keep  # eval() drops the KV cache past n_tokens
    llama.eval(tokens[keep:])
    total = 0.0
    for k, tok in enumerate(cont):
        total += float(_last_logprobs(llama)[tok])
        if k + 1 < len(cont):
            llama.eval([tok])
    return total / len(cont)
