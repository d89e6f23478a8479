"""Generate calibration questions from LangChain documents with a LangChain model (CONFLARE step 1).

``generate_calibration_questions`` and its async twin are
:class:`~conformal_rag_plugins.labelling.question_writer.QuestionWriter`'s; this module reads the
documents (:func:`chunks_from_documents`) and the model (:func:`~.llm_calls.llm_task`; a custom
prompt is an f-string template, literal braces doubled).

Examples
--------
>>> from langchain_core.language_models import FakeListLLM
>>> llm = FakeListLLM(responses=['{"question": "Who led the Normans?", "answer": "Rollo"}'])
>>> docs = [Document("The Normans were led by Rollo, a Viking chief.", id="d1")]
>>> examples, report = generate_calibration_questions(docs, llm, 1, cache=False)
>>> examples[0].question, examples[0].gold_ids
('Who led the Normans?', ('d1',))
"""

from __future__ import annotations

from collections.abc import Iterable

from langchain_core.documents import Document

from ..core.errors import ConformalError
from ..datasets.examples import CorpusEntry
from ..labelling.chunk_records import Chunk
from ..labelling.question_writer import QuestionWriter
from .host import doc_id, document_of
from .llm_calls import llm_task


def chunks_from_documents(items: Iterable[Document | CorpusEntry]) -> list[CorpusEntry]:
    """Documents as chunks (corpus entries kept as they are).

    The id is ``Document.id`` (or ``metadata["id"]``), as in the store; the parent (the document whose
    chunks are sampled together) is ``metadata["doc_id"]`` (set by ``local.recursive_splitter``), else
    ``metadata["parent_id"]``, else ``metadata["source"]``, else the document itself.

    >>> chunks_from_documents([Document("Rollo led the Normans.", id="d1", metadata={"source": "normans.txt"})])
    [Chunk(id='d1', text='Rollo led the Normans.', title=None, parent_id='normans.txt')]
    >>> chunks_from_documents([Document("Rollo.", id="n::chunk0", metadata={"doc_id": "n", "source": "n.txt"})])
    [Chunk(id='n::chunk0', text='Rollo.', title=None, parent_id='n')]
    """
    out: list[CorpusEntry] = []
    for item in items:
        if isinstance(item, CorpusEntry):
            out.append(item)
            continue
        if not isinstance(item, Document):
            raise ConformalError(f"Expected LangChain Documents or CorpusEntry objects, got {type(item).__name__}.")
        cid = doc_id(item)
        if not cid:
            raise ConformalError(
                "A Document has no id; the gold labels need the ids the vector store uses (set Document.id)."
            )
        parent = document_of(item.metadata) or item.metadata.get("source") or cid
        out.append(Chunk(str(cid), item.page_content, title=item.metadata.get("title"), parent_id=str(parent)))
    return out


_WRITER = QuestionWriter(read_llm=llm_task, read_chunks=chunks_from_documents)
generate_calibration_questions = _WRITER.generate_calibration_questions
agenerate_calibration_questions = _WRITER.agenerate_calibration_questions
