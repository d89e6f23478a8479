"""A compact record of a collection's chunk ids, to tell at query time whether a chunk is new.

Besides the whole-collection digest, the calibration stores a Bloom filter of the ids (~10 bits
an id, 7 hashes, at most 1 MiB): an id it lacks was certainly not calibrated on; a new id passes
unnoticed with a chance of about 1% per id (near 0 over a pool of 50 new ids).
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterable, Sequence
from typing import Any

_BITS_PER_ID = 10
_HASHES = 7
_MAX_BITS = 8 * 1024 * 1024


def _positions(item: str, bits: int, hashes: int) -> list[int]:
    digest = hashlib.sha256(item.encode("utf-8")).digest()
    h1, h2 = int.from_bytes(digest[:8], "little"), int.from_bytes(digest[8:16], "little") | 1
    return [(h1 + i * h2) % bits for i in range(hashes)]


def ids_filter(ids: Iterable[str]) -> dict[str, Any]:
    """A Bloom filter of ``ids``: ``{"bits", "hashes", "data"}`` (``data`` base64), JSON-ready.

    >>> f = ids_filter(["a", "b"])
    >>> unknown_ids(f, ["a", "b"]), f["bits"] % 8
    ([], 0)
    """
    keys = sorted({str(i) for i in ids})
    bits = min(_MAX_BITS, max(64, -(-len(keys) * _BITS_PER_ID // 8) * 8))
    table = bytearray(bits // 8)
    for key in keys:
        for p in _positions(key, bits, _HASHES):
            table[p >> 3] |= 1 << (p & 7)
    return {"bits": bits, "hashes": _HASHES, "data": base64.b64encode(bytes(table)).decode("ascii")}


def unknown_ids(record: dict[str, Any], ids: Sequence[str | None]) -> list[str]:
    """The ids of ``ids`` that were certainly not in the filtered collection (``None`` ids are skipped).

    >>> unknown_ids(ids_filter(["Normans#0"]), ["Normans#0", "new-chunk"])
    ['new-chunk']
    """
    bits, hashes = int(record["bits"]), int(record["hashes"])
    table = base64.b64decode(record["data"])
    return [
        str(i)
        for i in ids
        if i is not None and not all(table[p >> 3] >> (p & 7) & 1 for p in _positions(str(i), bits, hashes))
    ]


def corpus_record(ids: Iterable[str] | None) -> dict[str, Any]:
    """The ``corpus_`` a calibration stores: the digest and the Bloom filter of the ids (``{}`` when unknown).

    >>> sorted(corpus_record(["a"])), corpus_record(None)
    (['ids_filter', 'ids_sha256', 'size'], {})
    """
    from .fingerprint import corpus_digest

    if ids is None:
        return {}
    keys = [str(i) for i in ids]
    return corpus_digest(keys) | {"ids_filter": ids_filter(keys)}
