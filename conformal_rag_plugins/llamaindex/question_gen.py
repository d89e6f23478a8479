"""Generate calibration questions from LlamaIndex nodes with a LlamaIndex LLM (CONFLARE step 1).

``generate_calibration_questions`` and its async twin are
:class:`~conformal_rag_plugins.labelling.question_writer.QuestionWriter`'s; this module reads the
nodes (:func:`chunks_from_nodes`) and the LLM (:func:`~.llm_calls.llm_task`).

Examples
--------
>>> from llama_index.core.llms import MockLLM
>>> from llama_index.core.schema import TextNode
>>> nodes = [TextNode(id_="n1", text="The Normans were led by Rollo, a Viking chief.")]
>>> examples, report = generate_calibration_questions(nodes, MockLLM(), 1, cache=False)
>>> report.n_generated, report.rejected  # MockLLM echoes the prompt, so it repeats a worked example
(0, {'answer_not_in_chunk': 3})
"""

from __future__ import annotations

from collections.abc import Iterable

from llama_index.core.schema import BaseNode, MetadataMode, NodeWithScore

from ..core.errors import ConformalError
from ..datasets.examples import CorpusEntry
from ..labelling.chunk_records import Chunk
from ..labelling.question_writer import QuestionWriter
from .llm_calls import llm_task


def chunks_from_nodes(items: Iterable[BaseNode | NodeWithScore | CorpusEntry]) -> list[CorpusEntry]:
    """Nodes as chunks (corpus entries kept as they are).

    A node's document is its ``ref_doc_id``, else ``metadata["parent_id"]``, else the node itself.

    >>> from llama_index.core.schema import TextNode
    >>> chunks_from_nodes([TextNode(id_="n1", text="Rollo led the Normans.", metadata={"parent_id": "doc"})])
    [Chunk(id='n1', text='Rollo led the Normans.', title=None, parent_id='doc')]
    """
    out: list[CorpusEntry] = []
    for item in items:
        if isinstance(item, CorpusEntry):
            out.append(item)
            continue
        node = item.node if isinstance(item, NodeWithScore) else item
        if not isinstance(node, BaseNode):
            raise ConformalError(f"Expected LlamaIndex nodes or CorpusEntry objects, got {type(item).__name__}.")
        parent = node.ref_doc_id or node.metadata.get("parent_id") or node.node_id
        text = node.get_content(metadata_mode=MetadataMode.NONE)
        out.append(Chunk(node.node_id, text, title=node.metadata.get("title"), parent_id=str(parent)))
    return out


_WRITER = QuestionWriter(read_llm=llm_task, read_chunks=chunks_from_nodes)
generate_calibration_questions = _WRITER.generate_calibration_questions
agenerate_calibration_questions = _WRITER.agenerate_calibration_questions
