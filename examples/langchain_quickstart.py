"""LangChain quick start: your documents, your store, the calibrated filter, a chain, the held-out verdict
and the tuned host.

This file is the first four Python blocks of docs/quickstart-langchain.md, word for word (a test checks it;
the docs test runs those blocks). Offline, public names only: ``python examples/langchain_quickstart.py``
"""

from langchain_core.documents import Document
from langchain_core.vectorstores import InMemoryVectorStore

from conformal_rag_plugins import split_examples
from conformal_rag_plugins.langchain import ConformalDocumentCompressor, ConformalRetriever, calibrate_compressor
from conformal_rag_plugins.local import (
    MiniLMEmbeddings, bundled_corpus, bundled_questions, langchain_llm, recursive_splitter)

# 1. Your documents, with ids that stay the same on every run.
documents = [Document(p.text, id=p.id, metadata={"title": p.title or ""}) for p in bundled_corpus()]

# 2. Your store. Chunks fit all-MiniLM-L6-v2's 256 word pieces, so no text is cut off unseen; each chunk
#    keeps its document in metadata["doc_id"] and gets a stable id derived from it.
chunks = recursive_splitter().split_documents(documents)
embeddings = MiniLMEmbeddings()
vectorstore = InMemoryVectorStore(embeddings)
vectorstore.add_documents(chunks)

# 3. Labelled questions: gold = a document id and the reference answers (see Gold ids).
examples, held_out = split_examples(bundled_questions(), (0.5, 0.5), seed=0)

from langchain_classic.retrievers import ContextualCompressionRetriever
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import PromptTemplate
from langchain_core.runnables import RunnablePassthrough

base = vectorstore.as_retriever(search_kwargs={"k": 50})
calibration = calibrate_compressor(base, examples, embeddings=embeddings)  # once, same pipeline
print(calibration.summary())

retriever = ContextualCompressionRetriever(
    # before: base_compressor=EmbeddingsFilter(embeddings=embeddings, similarity_threshold=0.76),
    base_compressor=ConformalDocumentCompressor(calibration=calibration, embeddings=embeddings),
    base_retriever=base,
)

def format_docs(docs):
    return "\n\n".join(doc.page_content for doc in docs)

prompt = PromptTemplate.from_template(  # a base model answers after one worked example
    "Answer the question with a short phrase from the context.\n\n"
    "Context: The Eiffel Tower in Paris was completed in 1889 for the World's Fair.\n"
    "Question: When was the Eiffel Tower completed?\nAnswer: 1889\n\n"
    "Context: {context}\nQuestion: {question}\nAnswer:"
)
llm = langchain_llm(temperature=0.0, n_ctx=8192)   # the bundled Gemma 3 270M; any LangChain LLM
chain = {"context": retriever | format_docs, "question": RunnablePassthrough()} | prompt | llm | StrOutputParser()
print(held_out[0].question, "->", chain.invoke(held_out[0].question))

from conformal_rag_plugins.langchain import calibrate_retriever

calibration = calibrate_retriever(vectorstore, examples, confidence_level=0.9)
calibration.save("calibration.json")                                       # JSON, never pickle
conformal = ConformalRetriever(vectorstore=vectorstore, calibration=calibration)
chain = {"context": conformal | format_docs, "question": RunnablePassthrough()} | prompt | llm | StrOutputParser()
print("your store:", conformal.evaluate(held_out).summary())

tuned = ConformalRetriever.from_documents(documents, examples, confidence_level=0.9, persist_dir="chroma")
tuned.calibration.save("tuned_calibration.json")
print("tuned:     ", tuned.evaluate(held_out).summary())   # against "your store:" above
