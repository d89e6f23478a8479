"""LangChain quickstart: calibrate a Chroma store and use ConformalRetriever in an LCEL chain.

Runs offline on the bundled SQuAD subset. ``python examples/langchain_quickstart.py``
"""

from __future__ import annotations

from langchain_core.language_models import FakeListChatModel
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import RunnablePassthrough

from conformal_rag_plugins import split_examples
from conformal_rag_plugins.labelling.chunk_labels import map_gold_to_chunks
from conformal_rag_plugins.langchain import ConformalRetriever, calibrate_retriever
from conformal_rag_plugins.langchain.fusion import build_hybrid_retriever
from conformal_rag_plugins.langchain.text_splitting import chunk_entries
from conformal_rag_plugins.local.corpus import bundled_corpus, bundled_questions
from conformal_rag_plugins.local.langchain_stack import build_chroma_vectorstore


def format_docs(docs) -> str:
    return "\n\n".join(d.page_content for d in docs)


def main() -> None:
    entries = chunk_entries(bundled_corpus())  # passages longer than MiniLM's 254-token window split first
    questions, _ = map_gold_to_chunks(bundled_questions(), entries)  # gold: the chunk holding the answer
    store = build_chroma_vectorstore(entries)  # langchain_chroma.Chroma, cosine space
    host = build_hybrid_retriever(store, entries, pool_size=50)  # dense + BM25, keeps metadata["score"]

    calibration_set, held_out = split_examples(questions, (0.5, 0.5), seed=0)
    calibration = calibrate_retriever(host, calibration_set, confidence_level=0.9)
    print(calibration.summary())

    retriever = ConformalRetriever(retriever=host, calibration=calibration)
    prompt = ChatPromptTemplate.from_template("Context:\n{context}\n\nQuestion: {question}")
    llm = FakeListChatModel(responses=["(your chat model's answer)"])  # swap in any chat model
    chain = {"context": retriever | format_docs, "question": RunnablePassthrough()} | prompt | llm | StrOutputParser()

    question = held_out[0]
    docs = retriever.invoke(question.question)
    print(question.question, "->", [d.id for d in docs], "gold:", question.gold_ids)
    print(chain.invoke(question.question))


if __name__ == "__main__":
    main()
