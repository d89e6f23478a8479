"""One sampled answer with its token counts."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

__all__ = ["Sample"]


@dataclass(frozen=True)
class Sample:
    """A sampled answer (first line, stripped), the tokens it cost, and its likelihood when known.

    ``logprob`` is the mean token log-probability of the completion as the model
    reported it (llama.cpp and OpenAI ``logprobs``), or ``None`` when the model does
    not report one.

    Examples
    --------
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
        """Inverse of :meth:`to_dict`."""
        return cls(
            str(data["text"]),
            int(data.get("prompt_tokens", 0)),
            int(data.get("completion_tokens", 0)),
            bool(data.get("failed", False)),
            None if data.get("logprob") is None else float(data["logprob"]),
        )
