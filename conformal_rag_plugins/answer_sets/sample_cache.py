"""SQLite cache of sampled answers (JSON values, never pickle), so a crash or a re-run loses no paid work.

Keys hash (question, chunk text, model id, prompt template, temperature, n); concurrency as in
:mod:`conformal_rag_plugins.runtime.kv_cache` (a failing write only logs a warning).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence

from ..runtime.kv_cache import SqliteStore
from .sample_record import Sample


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

    def get(self, key: str) -> list[Sample] | None:
        """Cached samples, or ``None``."""
        text = self.get_text(key)
        return None if text is None else [Sample.from_dict(d) for d in json.loads(text)]

    def put(self, key: str, samples: Sequence[Sample]) -> bool:
        """Store samples (committed at once); ``False`` with a logged warning when they could not be, never raises."""
        return self.put_text(key, json.dumps([s.to_dict() for s in samples], ensure_ascii=False))
