"""Rebuild the host a calibration was made on and check it is the same.

A report is meaningful only on the very host of the threshold: framework, retriever, fusion, pool
and chunked corpus are read from the calibration, and the rebuilt fingerprint and collection
digest must equal the stored ones.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

from ..core.errors import CalibrationError, FingerprintMismatchError, UncheckedCorpusWarning
from ..labelling.chunk_records import Chunk
from ..retrieval.calibration import RetrievalCalibration
from ..retrieval.fingerprint import corpus_digest, same_corpus
from ..retrieval.parent_pools import PARENT_MARK
from ..tuning.tuned_calibration import FusionConfig, fusion_of
from . import hosts
from .framework_registry import FRAMEWORKS, get_framework
from .hosts import HostBundle
from .input_checks import check_pool_option

HostSpec = tuple[str, str, FusionConfig | None]


def host_spec(calibration: RetrievalCalibration) -> HostSpec:
    """``(framework, retriever kind, fusion)`` of the calibration's host; ``CalibrationError`` if not rebuildable.

    Examples
    --------
    >>> from conformal_rag_plugins import Fingerprint
    >>> fp = Fingerprint("langchain", "ScoredFusionRetriever[Chroma+BM25]", "cosine", "m", 384, "fusion:zscore",
    ...                  "hybrid(method=zscore,weight=0.5,k=50)")
    >>> cal = RetrievalCalibration(0.1, 0.1, "split", "relative", 50, 9, 0, (0.1,) * 9, fp)
    >>> host_spec(cal)
    ('langchain', 'hybrid', FusionConfig(method='zscore', weight=0.5))
    """
    check_pool_option("the calibration's pool_size", calibration.pool_size_)  # a store asked for 10**30 breaks
    fp = calibration.fingerprint_
    if PARENT_MARK + "parent:" in fp.retriever:
        raise CalibrationError(
            f"This calibration returns parent documents ({fp.retriever.rsplit(PARENT_MARK, 1)[1]}, small-to-big); "
            "the report rebuilds only chunk-level hosts from the corpus files. Measure it in Python with "
            "ConformalRetriever(..., parents=...) on held-out questions instead."
        )
    if calibration.selection_.get("rule") == "tuned-hybrid":
        return fp.framework, "hybrid", fusion_of(calibration)
    found = get_framework(fp.framework).rebuildable_host(fp) if fp.framework in FRAMEWORKS else None
    if found is not None:
        return fp.framework, *found
    raise CalibrationError(
        f"This calibration was made on a host conformal-rag cannot rebuild (framework {fp.framework!r}, store "
        f"{fp.store!r}, retriever {fp.retriever!r}); the report rebuilds only the Chroma dense, BM25 and hybrid hosts "
        "of 'conformal-rag calibrate'. Use calibration.plot_*() with observations from your own host instead."
    )


def rebuild_host(
    calibration: RetrievalCalibration, spec: HostSpec, chunks: Sequence[Chunk], *, client: Any = None
) -> HostBundle:
    """Index ``chunks`` and build the host of ``spec``.

    Raises ``FingerprintMismatchError`` when its fingerprint or collection (chunk ids) differs from the calibration's;
    warns :class:`UncheckedCorpusWarning` when the calibration records no collection to compare with.
    """
    stored = calibration.corpus_
    current = corpus_digest(c.id for c in chunks)
    if not stored:  # as a drop-in or `conformal-rag monitor` on this calibration would say
        warnings.warn(
            "The calibration records no collection (corpus: null: it was made from bare pools or on a host that "
            "could not list its ids, or the field was removed), so the corpus files are not checked against it: "
            "a report on another collection would go unnoticed. Re-calibrate on this host to record it.",
            UncheckedCorpusWarning,
            stacklevel=2,
        )
    elif not same_corpus(stored, current):
        raise FingerprintMismatchError(
            f"The corpus files give {current['size']} chunks (or other chunk ids) but the calibration was made on "
            f"{stored.get('size')}: pass the same --corpus files and --chunk-size/--chunk-overlap as to calibrate."
        )
    framework, kind, fusion = spec
    bundle = hosts.build_host(framework, kind, chunks, pool_size=calibration.pool_size_, client=client, fusion=fusion)
    calibration.fingerprint_.check_compatible(get_framework(framework).fingerprint_of(bundle.host))
    return bundle


def host_rows(calibration: RetrievalCalibration, spec: HostSpec) -> list[tuple[str, str]]:
    """The calibration's host as ``(name, value)`` rows of the report's host table.

    Examples
    --------
    >>> from conformal_rag_plugins import Fingerprint
    >>> fp = Fingerprint("langchain", "Chroma", "cosine", "all-MiniLM-L6-v2", 384, "1-distance", "dense")
    >>> cal = RetrievalCalibration(0.1, 0.1, "split", "relative", 50, 9, 0, (0.1,) * 9, fp)
    >>> dict(host_rows(cal, host_spec(cal)))["embedding model"]
    'all-MiniLM-L6-v2 (384 dimensions)'
    """
    fp = calibration.fingerprint_
    framework, kind, fusion = spec
    dim = f" ({fp.embedding_dim} dimensions)" if fp.embedding_dim else ""
    corpus = calibration.corpus_
    rows = [
        ("framework", framework),
        ("retriever", kind),
        ("fusion (method:dense weight)", fusion.key if fusion else "none"),
        ("pool size (candidates per query)", str(calibration.pool_size_)),
        ("store", fp.store),
        ("embedding model", f"{fp.embedding_model}{dim}"),
        ("distance", fp.distance),
        ("score scale", fp.score_scale),
        ("retriever as fingerprinted", fp.retriever),
        ("score family", calibration.score_family_),
    ]
    if corpus.get("size") is not None:
        rows.append(("chunks in the collection", str(corpus["size"])))
    return rows
