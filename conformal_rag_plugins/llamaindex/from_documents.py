"""``ConformalRetriever.from_documents``: the tuned hybrid on the user's own LlamaIndex ``Document``s in one call.

The documents become corpus entries (``Document.id_``, text, ``metadata["title"]``) and take the
command line's route (``frameworks.tuned_host_from_entries`` with this adapter's ``TUNED_HOST``):
chunked with ``SentenceSplitter`` in MiniLM tokens, embedded in Chroma, BM25 fused, and tuned and
calibrated as ``conformal-rag calibrate`` does, so both give the same threshold on the same
documents and questions.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from llama_index.core.schema import BaseNode, MetadataMode

from ..core.errors import ConformalError
from ..datasets.examples import CalibrationExample, CorpusEntry
from ..frameworks import tuned_host_from_entries
from ..retrieval.calibration import RetrievalCalibration
from ..retrieval.options import RetrievalOptions
from ..tuning.options import TuningOptions
from .tuned_host import TUNED_HOST


def entries_from_documents(documents: Sequence[BaseNode]) -> list[CorpusEntry]:
    """One corpus entry per ``Document`` (or node): its ``id_``, its text, its ``metadata["title"]``.

    Other metadata is not indexed (the chunks carry ``title`` and ``parent_id``, as the command line's).

    Examples
    --------
    >>> from llama_index.core import Document
    >>> entries_from_documents([Document(text="Rollo.", id_="normans", metadata={"title": "Normans"})])
    [CorpusEntry(id='normans', text='Rollo.', title='Normans')]
    """
    out = []
    for i, doc in enumerate(documents):
        if not isinstance(doc, BaseNode):
            raise ConformalError(f"documents[{i}] is a {type(doc).__name__}, not a LlamaIndex Document.")
        title = doc.metadata.get("title")
        out.append(
            CorpusEntry(doc.node_id, doc.get_content(metadata_mode=MetadataMode.NONE), str(title) if title else None)
        )
    return out


def tuned_host_of_documents(
    documents: Sequence[BaseNode],
    examples: Sequence[CalibrationExample] | None = None,
    *,
    confidence_level: float | None = None,
    calibration: RetrievalCalibration | None = None,
    options: RetrievalOptions | None = None,
    tuning: TuningOptions | None = None,
    pool_size: int = 50,
    chunk_size: int | None = None,
    chunk_overlap: int | None = None,
    persist_dir: str | Path | None = None,
    client: Any = None,
) -> tuple[Any, RetrievalCalibration]:
    """``(host, calibration)`` of the tuned hybrid on ``documents``, for ``ConformalRetriever.from_documents``."""
    return tuned_host_from_entries(
        TUNED_HOST,
        entries_from_documents(documents),
        examples,
        calibration=calibration,
        confidence_level=confidence_level,
        pool_size=pool_size,
        chunk_size=chunk_size,
        chunk_overlap=chunk_overlap,
        options=options,
        tuning=tuning,
        client=client,
        persist_dir=persist_dir,
    )
