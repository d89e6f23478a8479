"""LangChain quick start: your documents, your store, the calibrated filter, a chain and the held-out verdict.

Runs offline on the bundled SQuAD passages (the same steps as docs/quickstart-langchain.md), using public
names only: ``python examples/langchain_quickstart.py``
"""

from __future__ import annotations

from langchain_classic.retrievers import ContextualCompressionRetriever
from langchain_core.documents import Document
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import PromptTemplate
from langchain_core.runnables import RunnablePassthrough
from langchain_core.vectorstores import InMemoryVectorStore

from conformal_rag_plugins import split_examples
from conformal_rag_plugins.langchain import (
    ConformalDocumentCompressor,
    ConformalRetriever,
    calibrate_compressor,
    calibrate_retriever,
)
from conformal_rag_plugins.local import (
    MiniLMEmbeddings,
    bundled_corpus,
    bundled_questions,
    langchain_llm,
    recursive_splitter,
)


def format_docs(docs: list[Document]) -> str:
    return "\n\n".join(doc.page_content for doc in docs)


def main() -> None:
    # 1. Your documents, with ids that stay the same on every run.
    documents = [Document(p.text, id=p.id, metadata={"title": p.title or ""}) for p in bundled_corpus()]
    # 2. Your store, in chunks that fit all-MiniLM-L6-v2's window (metadata["doc_id"], stable chunk ids).
    chunks = recursive_splitter().split_documents(documents)
    embeddings = MiniLMEmbeddings()
    vectorstore = InMemoryVectorStore(embeddings)
    vectorstore.add_documents(chunks)
    # 3. Labelled questions (gold: a document id and the reference answers), half held out.
    examples, held_out = split_examples(bundled_questions(), (0.5, 0.5), seed=0)

    # 4. The one-line swap: the calibrated compressor instead of a hand-picked EmbeddingsFilter.
    base = vectorstore.as_retriever(search_kwargs={"k": 50})
    calibration = calibrate_compressor(base, examples, embeddings=embeddings)
    print(calibration.summary())
    retriever = ContextualCompressionRetriever(
        base_compressor=ConformalDocumentCompressor(calibration=calibration, embeddings=embeddings),
        base_retriever=base,
    )
    prompt = PromptTemplate.from_template(  # a base model answers after one worked example
        "Answer the question with a short phrase from the context.\n\n"
        "Context: The Eiffel Tower in Paris was completed in 1889 for the World's Fair.\n"
        "Question: When was the Eiffel Tower completed?\nAnswer: 1889\n\n"
        "Context: {context}\nQuestion: {question}\nAnswer:"
    )
    llm = langchain_llm(temperature=0.0, n_ctx=8192)
    chain = {"context": retriever | format_docs, "question": RunnablePassthrough()} | prompt | llm | StrOutputParser()
    question = held_out[0]
    print(question.question, "->", chain.invoke(question.question).strip())

    # 5. The verdict on questions the calibration has not seen (as `conformal-rag report` gives it).
    conformal = ConformalRetriever(vectorstore=vectorstore, calibration=calibrate_retriever(vectorstore, examples))
    conformal.calibration.save("calibration.json")
    print("your store:", conformal.evaluate(held_out).summary())

    # 6. The tuned host of `conformal-rag calibrate`, in one call, on the same documents and questions.
    tuned = ConformalRetriever.from_documents(documents, examples, confidence_level=0.9, persist_dir="chroma")
    print("tuned:     ", tuned.evaluate(held_out).summary())


if __name__ == "__main__":
    main()
