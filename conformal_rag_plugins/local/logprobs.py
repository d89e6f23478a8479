"""The mean token log-probability of a completion under a llama.cpp model, by teacher forcing.

llama-cpp-python's own logprobs (``logits_all=True``) cost seconds per sample with Gemma's 262k
vocabulary; scoring afterwards is cheap. The score must be a fixed function of (prompt, text),
since calibrated thresholds are compared with query-time scores, but a KV-cache prefix left by
earlier calls moves it (up to 0.14 nats on Gemma 3 270M). So every score starts from one fixed
state: the prompt minus its last token, evaluated from an emptied cache, saved once per prompt
and restored before each text.
"""

from __future__ import annotations

import ctypes
import math
import threading
import weakref
from collections.abc import Sequence
from typing import Any

import numpy as np

# Per model: the prompt prefix whose fixed state is saved, the saved bytes, and their length.
_states: weakref.WeakKeyDictionary[Any, tuple[tuple[int, ...], Any, int]] = weakref.WeakKeyDictionary()
_locks: weakref.WeakKeyDictionary[Any, threading.RLock] = weakref.WeakKeyDictionary()
_locks_guard = threading.Lock()


def model_lock(llama: Any) -> threading.RLock:
    """The lock serialising calls on one (not thread-safe) llama.cpp model; hold it across completion and scoring."""
    with _locks_guard:
        lock = _locks.get(llama)
        if lock is None:
            lock = _locks[llama] = threading.RLock()
        return lock


def _last_logprobs(llama: Any) -> np.ndarray:
    logits = np.ctypeslib.as_array(llama._ctx.get_logits(), shape=(llama.n_vocab(),)).astype(np.float64)
    top = logits.max()
    return logits - (top + math.log(float(np.exp(logits - top).sum())))


def _restore_prefix(llama: Any, prefix: Sequence[int]) -> None:
    """Put ``prefix`` in the KV cache in its fixed state: evaluated from an empty cache, whatever came before."""
    import llama_cpp

    ctx = llama._ctx.ctx
    key = tuple(prefix)
    saved = _states.get(llama)
    if key and (saved is None or saved[0] != key):
        llama._ctx.kv_cache_clear()
        llama.n_tokens = 0
        llama.eval(list(key))
        size = int(llama_cpp.llama_state_seq_get_size(ctx, 0))
        buffer = (ctypes.c_uint8 * size)()
        written = int(llama_cpp.llama_state_seq_get_data(ctx, buffer, size, 0))
        saved = _states[llama] = (key, buffer, written)
    llama._ctx.kv_cache_clear()  # empties every cell: the restored prefix lands in the same cells each time
    llama.n_tokens = 0
    if not key:
        return
    assert saved is not None
    if int(llama_cpp.llama_state_seq_set_data(ctx, saved[1], saved[2], 0)) == 0:
        _states.pop(llama, None)
        raise RuntimeError("llama.cpp could not restore the saved prompt state")
    llama.input_ids[: len(key)] = key
    llama.n_tokens = len(key)


def continuation_logprob(llama: Any, prompt: str, continuation: str) -> float | None:
    """Mean log-probability of the tokens of ``continuation`` after ``prompt`` (``None`` when it is empty).

    Restores the saved prompt state (see the module), then evaluates the last prompt token and the
    text one token at a time: calibration and query time score alike, bit for bit.
    """
    cont = llama.tokenize(continuation.encode("utf-8"), add_bos=False, special=False) if continuation.strip() else []
    if not cont:
        return None
    tokens = llama.tokenize(prompt.encode("utf-8"), add_bos=True, special=True)
    with model_lock(llama):
        _restore_prefix(llama, tokens[:-1])
        llama.eval(tokens[-1:])
        total = 0.0
        for k, tok in enumerate(cont):
            total += float(_last_logprobs(llama)[tok])
            if k + 1 < len(cont):
                llama.eval([tok])
    return total / len(cont)
