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
Settings that change the answers but may be long or structured (a system prompt, a logit bias, a
response format: :data:`DIGESTED_KEYS`) are recorded as a digest (:func:`setting_digest`). A record
read from a file is reduced the same way (:func:`scrub_record`), so an older file's keys are dropped.
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
    "system_prompt",
    "system",
    "logit_bias",
    "response_format",
)
"""Attributes of an LLM client that change the distribution of its samples (read when set)."""

DIGESTED_KEYS = frozenset({"system_prompt", "system", "logit_bias", "response_format"})
"""Settings recorded as ``"sha256:<hex>"`` of their canonical JSON (:func:`setting_digest`), not as their value."""

_DIGEST_PREFIX = "sha256:"

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
        *DIGESTED_KEYS,
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
_SECTION_KEYS = {
    "llm": _LLM_KEYS | IDENTIFYING_KEYS,
    "sampling": _PROMPT_KEYS | IDENTIFYING_KEYS,
    "embedding": _EMBEDDING_KEYS,
}


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


def _is_digest(value: Any) -> bool:
    return isinstance(value, str) and value.startswith(_DIGEST_PREFIX) and len(value) == len(_DIGEST_PREFIX) + 64


def _canonical(value: Any) -> Any:
    """A JSON-ready stand-in for a setting: a pydantic class by its JSON schema, another class by its name."""
    if isinstance(value, type):
        schema = getattr(value, "model_json_schema", None)
        if callable(schema):
            try:
                return {"schema": _json_value(schema())[1]}
            except Exception:  # a class whose schema cannot be built: its name still tells classes apart
                pass
        return {"class": f"{value.__module__}.{value.__qualname__}"}
    if isinstance(value, Mapping):
        return {str(k): _canonical(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_canonical(v) for v in value]
    dump = getattr(value, "model_dump", None)
    if callable(dump) and not isinstance(value, str):
        try:
            return _canonical(dump())
        except Exception:  # a model that cannot dump itself: fall back to its class
            pass
    ok, got = _json_value(value)
    return got if ok else {"class": f"{type(value).__module__}.{type(value).__qualname__}"}


def setting_digest(value: Any) -> str | None:
    """``"sha256:<hex>"`` of a setting's canonical JSON (sorted keys); ``None`` when it is unset (None, empty).

    A record keeps the digest of a system prompt, a logit bias or a response format rather than the value:
    long values stay out of the file, and two generators that differ in them still compare unequal.

    >>> setting_digest("Always answer: Paris.")[:19]
    'sha256:5ca3da9a95d6'
    >>> setting_digest({"50256": -100}) == setting_digest({"50256": -100}), setting_digest({})
    (True, None)
    """
    if value is None or (isinstance(value, str | Mapping | list | tuple) and len(value) == 0):
        return None
    text = json.dumps(_canonical(value), sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return _DIGEST_PREFIX + hashlib.sha256(text.encode("utf-8")).hexdigest()


def _digested(value: Any) -> str | None:
    """A digest kept as it is (a record read back), anything else digested (:func:`setting_digest`)."""
    return value if _is_digest(value) else setting_digest(value)


def _with_digests(settings: Mapping[str, Any]) -> dict[str, Any]:
    """``settings`` with :data:`DIGESTED_KEYS` digested, also inside call-kwargs mappings (before JSON drops them)."""
    out: dict[str, Any] = {}
    for key, value in settings.items():
        if key in DIGESTED_KEYS:
            out[key] = _digested(value)
        elif key in CALL_KWARG_ATTRS and isinstance(value, Mapping):
            out[key] = _with_digests(value)
        else:
            out[key] = value
    return out


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
        elif key in keys and key in DIGESTED_KEYS:
            digest = _digested(value)
            if digest is not None:
                out[key] = digest
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
        if name in DIGESTED_KEYS:
            value = _digested(value)
        ok, got = _json_value(value)
        if name not in _IGNORED and value is not None and ok:
            out[name] = got
    out = _identifying(out)
    for name in kwargs_attrs:
        value = get(name)
        if isinstance(value, Mapping) and value:
            got = _identifying(_json_value(_with_digests(value))[1])
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
            "llm": _with_digests(sampler.get("llm") or {}),
            "sampling": _with_digests(sampler.get("sampling") or {}),
            "embedding": None if embedding is None else dict(embedding),
        }
    )[1]
    record = {
        "llm": _identifying(plain["llm"], _LLM_KEYS | IDENTIFYING_KEYS),
        "sampling": _identifying(plain["sampling"], _PROMPT_KEYS | IDENTIFYING_KEYS),
        "embedding": None if plain["embedding"] is None else _identifying(plain["embedding"], _EMBEDDING_KEYS),
    }
    return json.loads(json.dumps(record, allow_nan=False))


def scrub_record(record: Mapping[str, Any]) -> dict[str, Any]:
    """A saved generator record reduced to what identifies a generator, its shape kept (for files read back).

    Unlike :func:`generator_record` a section that is missing or ``None`` stays so (the comparison then says
    it could not check it); every other key -- an API key, a header, a token that a file written by an
    older version kept -- is dropped, so loading and saving again never writes it.

    >>> scrub_record({"llm": {"class": "X", "api_key": "sk-1"}, "sampling": {"extra_headers": {"a": "b"}, "n": 2}})
    {'llm': {'class': 'X'}, 'sampling': {'n': 2}}
    """
    out: dict[str, Any] = {}
    for section, keys in _SECTION_KEYS.items():
        if section not in record:
            continue
        value = record[section]
        kept = _identifying(_json_value(_with_digests(value))[1], keys) if isinstance(value, Mapping) else None
        out[section] = kept
    return json.loads(json.dumps(out, allow_nan=False))


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
