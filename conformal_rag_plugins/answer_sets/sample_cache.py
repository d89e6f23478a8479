"""SQLite cache of sampled answers (JSON values, never pickle), so a crash or a re-run loses no paid work.

Keys hash (question, chunk text, model id, prompt template, temperature, n); concurrency and an
unreadable or unopenable file as in :mod:`conformal_rag_plugins.runtime.kv_cache` (a failing write
only logs a warning). A row is served only when it holds what its key promises: ``n`` samples, not
all of them failed (what :func:`~.concurrent_draws.draw_samples` stores), each a well-formed sample
(finite log-probability at most 0, whole token counts; :meth:`Sample.from_dict`), read as strict
JSON (no ``NaN``/``Infinity``, no overflowing number, no deep nesting); any other row is a miss.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Sequence

from ..runtime.kv_cache import SqliteStore
from ..runtime.strict_json import loads_finite
from .sample_record import Sample

logger = logging.getLogger("conformal_rag_plugins")


class SampleCache(SqliteStore):
    """Persistent ``key -> list[Sample]`` store in a SQLite file (folder created) or ``":memory:"``.

    >>> cache = SampleCache(":memory:")
    >>> key = SampleCache.key("q", "ctx", "model", "tmpl", 1.0, 2)
    >>> cache.put(key, [Sample("a"), Sample("b")])
    True
    >>> [s.text for s in cache.get(key)]
    ['a', 'b']
    """

    table = "samples"

    @staticmethod
    def key(question: str, context: str, model: str, template: str, temperature: float | None, n: int) -> str:
        """Content hash of everything that changes the samples."""
        payload = json.dumps([question, context, model, template, temperature, n], ensure_ascii=False)
        return hashlib.sha256(payload.encode("utf-8")).hexdigest()

    def get(self, key: str, n: int | None = None) -> list[Sample] | None:
        """Cached samples, or ``None``: also for a malformed row, one with no usable sample, or (given ``n``,
        the number the key was made with) one of another length. A bad row is logged and rewritten by the
        next :meth:`put`.

        >>> cache = SampleCache(":memory:")
        >>> cache.put("k", [Sample("a")]), cache.get("k", n=4), cache.put_text("k", "[]"), cache.get("k")
        (True, None, True, None)
        """
        text = self.get_text(key)
        if text is None:
            return None
        samples = self._parse(text)
        if samples is None:
            problem = "not a list of samples"
        elif n is not None and len(samples) != n:
            problem = f"{len(samples)} samples where its key promises {n}"
        elif not samples or all(s.failed for s in samples):
            problem = "without a usable sample"
        else:
            return samples
        logger.warning("Sample cache %s: the row under %s is %s; treated as a miss.", self.path, key[:16], problem)
        return None

    @staticmethod
    def _parse(text: str) -> list[Sample] | None:
        """The samples of a stored row, or ``None`` when it is not a JSON list of sample records."""
        try:
            rows = loads_finite(text)  # NaN, Infinity, 1e999 and deep nesting are refused, not read
            if not isinstance(rows, list) or not all(
                isinstance(r, dict) and isinstance(r.get("text"), str) for r in rows
            ):
                return None
            return [Sample.from_dict(r) for r in rows]
        except (ValueError, TypeError, KeyError, OverflowError, RecursionError):
            return None

    def put(self, key: str, samples: Sequence[Sample]) -> bool:
        """Store samples (committed at once); ``False`` with a logged warning when they could not be, never raises."""
        return self.put_text(key, json.dumps([s.to_dict() for s in samples], ensure_ascii=False))
