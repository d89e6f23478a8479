"""Every progress bar the library draws: off with ``progress=False`` (``--quiet``) or ``TQDM_DISABLE=1``.

tqdm reads ``TQDM_DISABLE`` only for a ``disable`` it is not given, and the library always gives
one, so the variable is read here.

>>> import os
>>> saved = os.environ.pop("TQDM_DISABLE", None)
>>> os.environ["TQDM_DISABLE"] = "1"
>>> progress_enabled(True)
False
>>> del os.environ["TQDM_DISABLE"]
>>> progress_enabled(True), progress_enabled(False)
(True, False)
>>> if saved is not None:
...     os.environ["TQDM_DISABLE"] = saved
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

_OFF = ("", "0", "false", "no", "off")


def progress_enabled(requested: bool = True) -> bool:
    """Whether a progress bar is drawn: ``requested`` and ``$TQDM_DISABLE`` unset (or ``0``/``false``)."""
    return bool(requested) and os.environ.get("TQDM_DISABLE", "").strip().lower() in _OFF


def progress_bar(iterable: Iterable[Any] | None = None, *, enabled: bool = True, **kwargs: Any) -> Any:
    """``tqdm.auto.tqdm(iterable, **kwargs)``, disabled unless :func:`progress_enabled` (``enabled``)."""
    from tqdm.auto import tqdm

    return tqdm(iterable, disable=not progress_enabled(enabled), **kwargs)
