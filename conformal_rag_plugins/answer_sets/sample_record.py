"""One sampled answer with its token counts and likelihood, and reading logprobs off LLM responses."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

_LOGPROB_SLACK = 1e-6
"""How far above 0 a mean token log-probability read back may be (rounding in a server's report)."""


def _get(obj: Any, key: str) -> Any:
    if isinstance(obj, Mapping):
        return obj.get(key)
    return getattr(obj, key, None)


def _token_values(logprobs: Any) -> list[float] | None:
    """Token log-probabilities from one choice's ``logprobs`` in any of the usual shapes."""
    if logprobs is None:
        return None
    if isinstance(logprobs, list | tuple):  # OpenAI chat ``content``: one {"token", "logprob"} per token
        values = [_get(t, "logprob") for t in logprobs if not isinstance(t, list | tuple)]
        return [float(v) for v in values if v is not None] or None
    tokens = _get(logprobs, "token_logprobs")  # llama.cpp and OpenAI completions
    if tokens is not None:
        return [float(v) for v in tokens if v is not None] or None
    content = _get(logprobs, "content")  # OpenAI chat completions
    if content is not None:
        return _token_values(list(content))
    return None


def reports_logprobs(model: Any) -> bool:
    """Whether an LLM client is set up to report token logprobs (llama.cpp wrappers, OpenAI ``logprobs=True``).

    >>> from types import SimpleNamespace
    >>> reports_logprobs(SimpleNamespace(logprobs=True)), reports_logprobs(SimpleNamespace())
    (True, False)
    """
    kwargs = getattr(model, "generate_kwargs", None)
    return bool(
        getattr(model, "reports_logprobs", False)
        or getattr(model, "logprobs", None)
        or (kwargs.get("logprobs") if isinstance(kwargs, dict) else None)
    )


def mean_logprob(response: Any) -> float | None:
    """Mean token log-probability of a completion from llama.cpp/OpenAI completion or chat payloads (``None`` if none).

    >>> mean_logprob({"choices": [{"text": " 1889", "logprobs": {"token_logprobs": [-0.5, -0.1]}}]})
    -0.3
    >>> mean_logprob({"content": [{"token": "1889", "logprob": -0.2}]})
    -0.2
    >>> mean_logprob({"choices": [{"text": "x"}]}) is None
    True
    """
    if response is None:
        return None
    choices = _get(response, "choices")
    if choices:
        return mean_logprob(_get(choices[0], "logprobs"))
    values = _token_values(response)
    if not values:
        return None
    out = sum(values) / len(values)
    return out if math.isfinite(out) else None


@dataclass(frozen=True)
class Sample:
    """A sampled answer (first line, stripped), its token cost, and its mean token ``logprob`` (``None`` if unreported).

    >>> Sample.clean(" Rollo\\nQuestion: x", 10, 2).text
    'Rollo'
    """

    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    failed: bool = False
    logprob: float | None = None

    @classmethod
    def clean(
        cls, raw: str, prompt_tokens: int = 0, completion_tokens: int = 0, logprob: float | None = None
    ) -> Sample:
        """Keep the first non-empty line of a completion."""
        lines = [ln.strip() for ln in (raw or "").splitlines() if ln.strip()]
        return cls(lines[0] if lines else "", int(prompt_tokens or 0), int(completion_tokens or 0), logprob=logprob)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Sample:
        """Inverse of :meth:`to_dict`, refusing what :meth:`to_dict` never writes (a stored row read back).

        Raises
        ------
        ValueError
            ``text`` is not a string, a token count is not a whole number >= 0, ``failed`` is not a
            boolean, or ``logprob`` is not a finite number <= 0 (or ``None``).

        >>> Sample.from_dict({"text": "Rollo", "logprob": -0.2}).logprob
        -0.2
        >>> Sample.from_dict({"text": "Rollo", "logprob": float("nan")})
        Traceback (most recent call last):
        ...
        ValueError: a sample's logprob must be a finite number <= 0 or null, got nan
        """
        text, failed, logprob = data["text"], data.get("failed", False), data.get("logprob")
        if not isinstance(text, str):
            raise ValueError(f"a sample's text must be a string, got {type(text).__name__}")
        if not isinstance(failed, bool):
            raise ValueError(f"a sample's failed flag must be true or false, got {failed!r}")
        tokens = [data.get(name, 0) for name in ("prompt_tokens", "completion_tokens")]
        for name, count in zip(("prompt_tokens", "completion_tokens"), tokens, strict=True):
            if isinstance(count, bool) or not isinstance(count, int) or count < 0:
                raise ValueError(f"a sample's {name} must be a whole number >= 0, got {count!r}")
        if logprob is not None:
            good = isinstance(logprob, int | float) and not isinstance(logprob, bool)
            if not (good and math.isfinite(logprob) and logprob <= _LOGPROB_SLACK):
                raise ValueError(f"a sample's logprob must be a finite number <= 0 or null, got {logprob!r}")
            logprob = float(logprob)
        return cls(text, tokens[0], tokens[1], failed, logprob)
