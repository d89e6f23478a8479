"""What a generator threshold is tied to: the LLM, its sampling settings and the clustering embedding model.

Another LLM, temperature, stop sequence, prompt or embedder puts the scores on another scale, so
a calibration records a generator record (:func:`generator_record`) and every query compares it
with the live one (:func:`check_generator`). A record is JSON::

    {"llm": {"class": ..., "name": ..., "logprobs": ..., ...},
     "sampling": {"temperature": ..., "stop": [...], "n_samples": ..., "prompt": ..., "prompt_sha256": ...},
     "embedding": {"model": ..., "dim": ...} or null}

Only what identifies a generator is recorded, by allow-list (:data:`IDENTIFYING_KEYS`): a client's
headers, API keys, base URL and tokens never reach a record, even when nested in call kwargs
(``additional_kwargs``, ``extra_body``, ``model_kwargs``) -- those keep only allow-listed scalars.
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

CALL_KWARG_ATTRS = ("generate_kwargs", "additional_kwargs", "model_kwargs", "extra_body")
"""Attributes (and nested keys) holding keyword arguments an LLM client passes to every call."""

IDENTIFYING_KEYS = frozenset(
    {
        *SAMPLING_ATTRS,
        "max_output_tokens",
        "num_predict",
        "repetition_penalty",
        "repeat_last_n",
        "mirostat",
        "mirostat_eta",
        "mirostat_tau",
        "tfs_z",
        "best_of",
        "logprobs",
        "top_logprobs",
        "reasoning_effort",
    }
)
"""The only sampling keys a generator record keeps (an allow-list: anything else, e.g. headers, is dropped)."""

_LLM_KEYS = frozenset(
    {"class", "name", "logprobs", "model", "model_name", "model_path", "file_sha256", "llama_cpp_python", "n_batch"}
)
_PROMPT_KEYS = frozenset({"n_samples", "prompt", "prompt_sha256"})
_EMBEDDING_KEYS = frozenset({"model", "dim"})

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


def _scalar(value: Any) -> bool:
    """Whether ``value`` is a JSON scalar or a list of them (what an identifying setting may hold)."""
    if isinstance(value, list):
        return all(v is None or isinstance(v, bool | int | float | str) for v in value)
    return value is None or isinstance(value, bool | int | float | str)


def _identifying(settings: Mapping[str, Any], keys: frozenset[str] = IDENTIFYING_KEYS) -> dict[str, Any]:
    """The allow-listed part of JSON-ready ``settings``: ``keys`` holding scalars (or lists of them), and the
    call-kwargs mappings of :data:`CALL_KWARG_ATTRS` reduced the same way (dropped when nothing is left).

    >>> _identifying({"temperature": 0.5, "api_key": "sk-x", "extra_body": {"top_k": 4, "Authorization": "x"}})
    {'temperature': 0.5, 'extra_body': {'top_k': 4}}
    """
    out: dict[str, Any] = {}
    for key, value in settings.items():
        if key in _IGNORED:
            continue
        if key in CALL_KWARG_ATTRS and isinstance(value, Mapping):
            kept = _identifying(value)
            if kept:
                out[key] = kept
        elif key in keys and _scalar(value):
            out[key] = value
    return out


def json_settings(source: Any, attrs: Iterable[str] = SAMPLING_ATTRS, kwargs_attrs: Iterable[str] = ()) -> dict:
    """The JSON-storable sampling settings of an LLM client (object or mapping): set ``attrs``, then call kwargs.

    Only :data:`IDENTIFYING_KEYS` are kept (so a client's headers and keys never reach a record);
    values JSON cannot hold and keys that never change the distribution (``seed``, ``stream``) are
    left out; dict-valued ``kwargs_attrs`` are merged under their own keys, keeping allow-listed scalars.

    >>> from types import SimpleNamespace
    >>> llm = SimpleNamespace(temperature=1.0, stop=("\\n",), generate_kwargs={"top_k": 40, "seed": 3})
    >>> json_settings(llm, kwargs_attrs=["generate_kwargs"])
    {'temperature': 1.0, 'stop': ['\\n'], 'generate_kwargs': {'top_k': 40}}
    >>> json_settings(SimpleNamespace(additional_kwargs={"extra_headers": {"Authorization": "Bearer x"}}),
    ...               kwargs_attrs=["additional_kwargs"])
    {}
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
    out = _identifying(out)
    for name in kwargs_attrs:
        value = get(name)
        if isinstance(value, Mapping) and value:
            got = _identifying(_json_value(value)[1])
            if got:
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

    Each section keeps only its allow-listed keys (what identifies the generator), so a record made
    from any description -- or read from a file written by an older version -- holds no header, key
    or token, and two records of one generator compare equal.

    >>> generator_record({"llm": {"class": "X", "name": "m"}, "sampling": {"stop": ("\\n",)}})
    {'llm': {'class': 'X', 'name': 'm'}, 'sampling': {'stop': ['\\n']}, 'embedding': None}
    >>> generator_record({"llm": {"class": "X", "api_key": "sk-1"}, "sampling": {"default_headers": {"a": "b"}}})
    {'llm': {'class': 'X'}, 'sampling': {}, 'embedding': None}
    """
    if sampler is None:
        return None
    plain = _json_value(
        {
            "llm": dict(sampler.get("llm") or {}),
            "sampling": dict(sampler.get("sampling") or {}),
            "embedding": None if embedding is None else dict(embedding),
        }
    )[1]
    record = {
        "llm": _identifying(plain["llm"], _LLM_KEYS | IDENTIFYING_KEYS),
        "sampling": _identifying(plain["sampling"], _PROMPT_KEYS | IDENTIFYING_KEYS),
        "embedding": None if plain["embedding"] is None else _identifying(plain["embedding"], _EMBEDDING_KEYS),
    }
    return json.loads(json.dumps(record, allow_nan=False))


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
) -> str:
    """Refuse a live generator that differs from the calibrated one; return why it was not checked (``""``: checked).

    Compares ``llm``, ``sampling`` and (when clustering by embedding) ``embedding`` key by key;
    :class:`GeneratorMismatchError` names every differing field. When either record (or one of its
    sections) is missing, the comparison cannot be made: an
    :class:`~conformal_rag_plugins.core.errors.UncheckedGeneratorWarning` is raised and the returned
    reason names the missing record, so that the answer set is reported as not guaranteed.

    >>> rec = {"llm": {"name": "gemma"}, "sampling": {"temperature": 1.0}, "embedding": None}
    >>> check_generator(rec, rec, {"method": "rougeL"})
    ''
    >>> check_generator(rec, {**rec, "sampling": {"temperature": 0.7}}, {"method": "rougeL"})
    Traceback (most recent call last):
    ...
    conformal_rag_plugins.core.errors.GeneratorMismatchError: ... sampling.temperature: calibrated with 1.0, ...
    """
    sections = _SECTIONS if uses_embedding(clustering) else _SECTIONS[:2]
    if recorded is None or live is None:
        what = (
            "the calibration has no generator record (saved by an older version, or calibrated without describing "
            "the LLM)"
            if recorded is None
            else "there is no generator record of the LLM in use (the caller did not describe the LLM)"
        )
        reason = (
            f"The generator was not checked: {what}, so the LLM, sampling settings and embedding model in use "
            "cannot be compared with the calibrated ones and the generator threshold may not apply. Re-calibrate "
            "(and query through a synthesizer that describes its LLM) to get the check."
        )
        warn_at_caller(
            f"The answer-set calibration's LLM, sampling settings and embedding model cannot be compared with the "
            f"ones in use: {what}. The generator threshold is used unchecked and answer sets are not guaranteed; "
            "re-calibrate to get the check.",
            UncheckedGeneratorWarning,
        )
        return reason
    # a section missing on either side cannot be compared (before the allow-list below fills it with {})
    unchecked = [s for s in sections if recorded.get(s) is None or live.get(s) is None]
    # both sides reduced to what identifies a generator (a record saved by an older version may hold more)
    recorded = generator_record(recorded, recorded.get("embedding")) or {}
    live = generator_record(live, live.get("embedding")) or {}
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
        missing = " and ".join(unchecked)
        warn_at_caller(
            f"The answer-set calibration's {missing} cannot be compared with the one in use (not "
            "recorded on one side); it is used unchecked and answer sets are not guaranteed.",
            UncheckedGeneratorWarning,
        )
        return (
            f"The generator was not checked: its {missing} record is missing on the calibrated or the live side, "
            "so the generator threshold may not apply."
        )
    return ""
