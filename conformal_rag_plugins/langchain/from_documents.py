"""``ConformalRetriever.from_documents``: the tuned hybrid on the user's own LangChain ``Document``s in one call.

The documents become corpus entries (``Document.id``, ``page_content``, ``metadata["title"]``) and
take the command line's route (``frameworks.tuned_host_from_entries`` with this adapter's
``tuned_host.TUNED_HOST``): chunked with
``RecursiveCharacterTextSplitter`` in MiniLM tokens, embedded in Chroma, BM25 fused, and tuned and
calibrated as ``conformal-rag calibrate --framework langchain`` does, so both give the same
threshold on the same documents and questions.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from langchain_core.documents import Document

from ..core.errors import ConformalError
from ..datasets.examples import CorpusEntry


def content_id(text: str) -> str:
    """The id a ``Document`` without one gets: derived from its text, so it is the same on every run.

    >>> content_id("Rollo.")
    'doc-da4f193a002fc8b8'
    """
    return "doc-" + hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def entries_from_documents(documents: Sequence[Document]) -> list[CorpusEntry]:
    """One corpus entry per ``Document``: its ``id`` (else :func:`content_id`), text and ``metadata["title"]``.

    Other metadata is not indexed (the chunks carry ``title`` and ``parent_id``, as the command line's).

    Examples
    --------
    >>> entries_from_documents([Document("Rollo.", id="normans", metadata={"title": "Normans"})])
    [CorpusEntry(id='normans', text='Rollo.', title='Normans')]
    """
    out = []
    for i, doc in enumerate(documents):
        if not isinstance(doc, Document):
            raise ConformalError(f"documents[{i}] is a {type(doc).__name__}, not a LangChain Document.")
        title = doc.metadata.get("title")
        doc_id = doc.id if doc.id else content_id(doc.page_content)
        out.append(CorpusEntry(str(doc_id), doc.page_content, str(title) if title else None))
    return out
