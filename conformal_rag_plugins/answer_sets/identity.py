"""What a generator threshold is tied to: the LLM, its sampling settings and the clustering embedding model.

Another LLM, temperature, stop sequence, prompt or embedder puts the scores on another scale, so
a calibration records a generator record (:func:`generator_record`) and every query compares it
with the live one (:func:`check_generator`). A record is JSON::

    {"llm": {"class": ..., "name": ..., "logprobs": ..., ...},
     "sampling": {"temperature": ..., "stop": [...], "n_samples": ..., "prompt": ..., "prompt_sha256": ...},
     "embedding": {"model": ..., "dim": ...} or null}
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ..core.errors import GeneratorMismatchError, UncheckedGeneratorWarning
from ..runtime.caller_warning import warn_at_caller

SAMPLING_ATTRS = (
    "temperature",
    "top_p",
    "top_k",
    "min_p",
    "typical_p",
    "max_tokens",
    "max_new_tokens",
    "max_completion_tokens",
    "repeat_penalty",
    "frequency_penalty",
    "presence_penalty",
    "stop",
    "stop_sequences",
    "n",
)
"""Attributes of an LLM client that change the distribution of its samples (read when set)."""

CALL_KWARG_ATTRS = ("generate_kwargs", "additional_kwargs", "model_kwargs")
"""Attributes holding keyword arguments an LLM client passes to every call."""

# Keys that never change the distribution of a sample (a seed only picks one draw of it).
_IGNORED = frozenset({"seed", "stream", "streaming", "verbose"})
_SECTIONS = ("llm", "sampling", "embedding")


def _json_value(value: Any) -> tuple[bool, Any]:
    """``(True, value)`` as JSON would store it, or ``(False, None)`` for what JSON cannot hold."""
    if value is None or isinstance(value, bool | int | str):
        return True, value
    if isinstance(value, float):
        return (True, value) if math.isfinite(value) else (False, None)
    if isinstance(value, list | tuple):
        items = [_json_value(v) for v in value]
        return (all(ok for ok, _ in items), [v for _, v in items])
    if isinstance(value, Mapping):
        out = {}
        for k, v in value.items():
            ok, got = _json_value(v)
            if ok and isinstance(k, str):
                out[k] = got
        return True, out
    return False, None


def json_settings(source: Any, attrs: Iterable[str] = SAMPLING_ATTRS, kwargs_attrs: Iterable[str] = ()) -> dict:
    """The JSON-storable sampling settings of an LLM client (object or mapping): set ``attrs``, then call kwargs.

    Values JSON cannot hold and keys that never change the distribution (``seed``, ``stream``) are
    left out; dict-valued ``kwargs_attrs`` are merged under their own keys.

    >>> from types import SimpleNamespace
    >>> llm = SimpleNamespace(temperature=1.0, stop=("\\n",), generate_kwargs={"top_k": 40, "seed": 3})
    >>> json_settings(llm, kwargs_attrs=["generate_kwargs"])
    {'temperature': 1.0, 'stop': ['\\n'], 'generate_kwargs': {'top_k': 40}}
    """

    def get(name: str) -> Any:
        if isinstance(source, Mapping):
            return source.get(name)
        try:
            return getattr(source, name, None)
        except Exception:  # a property of a client that is not set up
            return None

    out: dict[str, Any] = {}
    for name in attrs:
        value = get(name)
        ok, got = _json_value(value)
        if name not in _IGNORED and value is not None and ok:
            out[name] = got
    for name in kwargs_attrs:
        value = get(name)
        if isinstance(value, Mapping) and value:
            ok, got = _json_value({k: v for k, v in value.items() if k not in _IGNORED})
            if ok and got:
                out[name] = got
    return out


def prompt_digest(text: str) -> str:
    """SHA-256 of a prompt template's text (the record keeps the digest, not the prompt).

    >>> prompt_digest("Q: {question}")[:12]
    'd9748eab8f5b'
    """
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def embedding_identity(name: str | None, dim: int | None) -> dict[str, Any]:
    """The embedding part of a record: model name and dimension.

    >>> embedding_identity("all-MiniLM-L6-v2", 384)
    {'model': 'all-MiniLM-L6-v2', 'dim': 384}
    """
    return {"model": str(name) if name else "unknown", "dim": None if dim is None else int(dim)}


def uses_embedding(clustering: Mapping[str, Any]) -> bool:
    """Whether a clustering record clusters answers by embedding cosine (so the embedder is part of the record)."""
    return clustering.get("method", "rougeL") == "embedding"


def generator_record(
    sampler: Mapping[str, Any] | None, embedding: Mapping[str, Any] | None = None
) -> dict[str, Any] | None:
    """The record of one generator (``None`` when the sampler is not described), normalised as JSON stores it.

    >>> generator_record({"llm": {"class": "X", "name": "m"}, "sampling": {"stop": ("\\n",)}})
    {'llm': {'class': 'X', 'name': 'm'}, 'sampling': {'stop': ['\\n']}, 'embedding': None}
    """
    if sampler is None:
        return None
    record = {
        "llm": dict(sampler.get("llm") or {}),
        "sampling": dict(sampler.get("sampling") or {}),
        "embedding": None if embedding is None else dict(embedding),
    }
    return json.loads(json.dumps(_json_value(record)[1], allow_nan=False))


def live_generator(
    sampler: Mapping[str, Any] | None,
    clustering: Mapping[str, Any],
    embedding: Callable[[], Mapping[str, Any] | None] | None = None,
) -> dict[str, Any] | None:
    """The generator record for ``clustering``: ``embedding()`` is asked only when it clusters by embedding cosine.

    >>> live_generator({"llm": {"name": "m"}, "sampling": {}}, {"method": "rougeL"}, lambda: 1 / 0)["embedding"] is None
    True
    """
    described = embedding() if embedding is not None and uses_embedding(clustering) else None
    return generator_record(sampler, described)


def _differences(section: str, calibrated: Mapping[str, Any], live: Mapping[str, Any]) -> list[tuple[str, str]]:
    missing = object()
    out = []
    for key in sorted(set(calibrated) | set(live)):
        a, b = calibrated.get(key, missing), live.get(key, missing)
        if a != b:
            shown_a = "nothing" if a is missing else repr(a)
            shown_b = "nothing" if b is missing else repr(b)
            out.append((f"{section}.{key}", f"{section}.{key}: calibrated with {shown_a}, used with {shown_b}"))
    return out


def check_generator(
    recorded: Mapping[str, Any] | None,
    live: Mapping[str, Any] | None,
    clustering: Mapping[str, Any],
) -> bool:
    """Refuse a live generator that differs from the calibrated one; return whether the check was made.

    Compares ``llm``, ``sampling`` and (when clustering by embedding) ``embedding`` key by key;
    :class:`GeneratorMismatchError` names every differing field. Returns ``False`` with an
    :class:`~conformal_rag_plugins.core.errors.UncheckedGeneratorWarning` when either record is ``None``.

    >>> rec = {"llm": {"name": "gemma"}, "sampling": {"temperature": 1.0}, "embedding": None}
    >>> check_generator(rec, rec, {"method": "rougeL"})
    True
    >>> check_generator(rec, {**rec, "sampling": {"temperature": 0.7}}, {"method": "rougeL"})
    Traceback (most recent call last):
    ...
    conformal_rag_plugins.core.errors.GeneratorMismatchError: ... sampling.temperature: calibrated with 1.0, ...
    """
    sections = _SECTIONS if uses_embedding(clustering) else _SECTIONS[:2]
    if recorded is None or live is None:
        what = (
            "the calibration does not record them (saved by an older version, or calibrated without describing the LLM)"
            if recorded is None
            else "the caller did not describe the LLM in use"
        )
        warn_at_caller(
            f"The answer-set calibration's LLM, sampling settings and embedding model cannot be compared with the "
            f"ones in use: {what}. The generator threshold is used unchecked; re-calibrate to get the check.",
            UncheckedGeneratorWarning,
        )
        return False
    live = generator_record(live, live.get("embedding")) or {}
    unchecked = [s for s in sections if recorded.get(s) is None or live.get(s) is None]
    diffs = []
    for section in sections:
        if section not in unchecked:
            diffs += _differences(section, recorded[section], live[section])
    if diffs:
        raise GeneratorMismatchError(
            "This answer-set calibration was made with another generator, so its generator threshold does not "
            "transfer:\n  - "
            + "\n  - ".join(text for _, text in diffs)
            + "\nQuery with the calibrated LLM, prompt, sampling settings and embedding model, or re-run "
            "calibrate_answer_sets with the ones you query with.",
            tuple(name for name, _ in diffs),
        )
    if unchecked:
        warn_at_caller(
            f"The answer-set calibration's {' and '.join(unchecked)} cannot be compared with the one in use (not "
            "recorded on one side); it is used unchecked.",
            UncheckedGeneratorWarning,
        )
        return False
    return True
