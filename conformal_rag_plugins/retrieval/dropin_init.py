"""Building a pydantic drop-in (a LangChain retriever or compressor): loose keywords refused, our errors unwrapped."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import ValidationError

from ..core.errors import ConformalError
from .serving import refuse_loose_options


def validated_init(init: Callable[..., None], data: dict[str, Any], what: str) -> None:
    """Build a pydantic drop-in: refuse loose :class:`ServingOptions` keywords, surface a validator's ConformalError."""
    refuse_loose_options(data, what)
    try:
        init(**data)
    except ValidationError as exc:
        raise_conformal_cause(exc)
        raise


def raise_conformal_cause(exc: ValidationError) -> None:
    """Raise the :class:`ConformalError` a drop-in's validator raised inside pydantic's ``ValidationError``.

    So a pydantic drop-in raises ours unwrapped, as a plain class does; returns when the error is
    pydantic's own (the caller re-raises it).
    """
    for err in exc.errors():
        cause = (err.get("ctx") or {}).get("error")
        if isinstance(cause, ConformalError):
            raise cause from None
