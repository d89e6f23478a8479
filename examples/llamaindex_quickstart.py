"""LlamaIndex quickstart: calibrate a hybrid retriever and drop it into a RetrieverQueryEngine.

Runs offline on the bundled SQuAD subset. ``python examples/llamaindex_quickstart.py``
"""

from __future__ import annotations

from llama_index.core import get_response_synthesizer
from llama_index.core.llms import MockLLM
from llama_index.core.query_engine import RetrieverQueryEngine

from conformal_rag_plugins import RetrievalCalibration, split_examples
from conformal_rag_plugins.labelling.chunk_labels import map_gold_to_chunks
from conformal_rag_plugins.llamaindex import ConformalRetriever, calibrate_retriever
from conformal_rag_plugins.llamaindex.text_splitting import chunk_entries
from conformal_rag_plugins.local.corpus import bundled_corpus, bundled_questions
from conformal_rag_plugins.local.llamaindex_stack import build_chroma_index, build_hybrid_retriever


def main() -> None:
    # 1. Your index: passages longer than MiniLM's 254-token window split first, Chroma (cosine) + MiniLM
    #    embeddings, and a BM25 + dense fusion retriever.
    chunks = chunk_entries(bundled_corpus())
    questions, _ = map_gold_to_chunks(bundled_questions(), chunks)  # gold: the chunk holding the answer
    index, nodes = build_chroma_index(chunks)
    host = build_hybrid_retriever(index, nodes, pool_size=50)

    # 2. Calibrate on labelled questions (gold = node ids) at 90% confidence.
    calibration_set, held_out = split_examples(questions, (0.5, 0.5), seed=0)
    calibration = calibrate_retriever(host, calibration_set, confidence_level=0.9)
    calibration.save("calibration.json")
    print(calibration.summary())

    # 3. Reload later (checked against the host's fingerprint) and use it as a drop-in retriever.
    retriever = ConformalRetriever(retriever=host, calibration=RetrievalCalibration.load("calibration.json"))
    engine = RetrieverQueryEngine(
        retriever=retriever, response_synthesizer=get_response_synthesizer(llm=MockLLM(max_tokens=8))
    )
    question = held_out[0]
    response = engine.query(question.question)
    print(question.question, "->", [n.node.node_id for n in response.source_nodes], "gold:", question.gold_ids)


if __name__ == "__main__":
    main()
