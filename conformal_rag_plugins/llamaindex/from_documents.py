"""``ConformalRetriever.from_documents``: the tuned hybrid on the user's own LlamaIndex ``Document``s in one call.

The documents become corpus entries (``Document.id_``, text, ``metadata["title"]``) and take the
command line's route (``frameworks.tuned_host_from_entries`` with this adapter's ``TUNED_HOST``):
chunked with ``SentenceSplitter`` in MiniLM tokens, embedded in Chroma, BM25 fused, and tuned and
calibrated as ``conformal-rag calibrate`` does, so both give the same threshold on the same
documents and questions.
"""

from __future__ import annotations

from collections.abc import Sequence

from llama_index.core.schema import BaseNode, MetadataMode

from ..core.errors import ConformalError
from ..datasets.examples import CorpusEntry


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
