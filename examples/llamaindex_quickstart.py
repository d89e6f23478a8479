"""LlamaIndex quick start: your documents, your index, the calibrated filter, a query, the held-out verdict
and the tuned host.

This file is the first four Python blocks of docs/quickstart-llamaindex.md, word for word (a test checks it;
the docs test runs those blocks). Offline, public names only: ``python examples/llamaindex_quickstart.py``
"""

from llama_index.core import Document, VectorStoreIndex

from conformal_rag_plugins import split_examples
from conformal_rag_plugins.llamaindex import ConformalNodePostprocessor, ConformalRetriever, calibrate_retriever
from conformal_rag_plugins.local import (
    MiniLMEmbedding, bundled_corpus, bundled_questions, llamaindex_llm, sentence_splitter)

# 1. Your documents, with ids that stay the same on every run.
documents = [Document(text=p.text, id_=p.id, metadata={"title": p.title or ""}) for p in bundled_corpus()]

# 2. Your index. Chunks fit all-MiniLM-L6-v2's 256 word pieces, so no text is cut off unseen;
#    the chunk ids are derived from the document ids, so a rebuilt index has the same ids.
embed_model = MiniLMEmbedding()
index = VectorStoreIndex.from_documents(documents, transformations=[sentence_splitter()], embed_model=embed_model)

# 3. Labelled questions: gold = a document id and the reference answers (see Gold ids).
examples, held_out = split_examples(bundled_questions(), (0.5, 0.5), seed=0)
calibration = calibrate_retriever(index, examples, pool_size=50)   # once, on your index
print(calibration.summary())

from llama_index.core import PromptTemplate

engine = index.as_query_engine(
    similarity_top_k=50,
    # before: node_postprocessors=[SimilarityPostprocessor(similarity_cutoff=0.75)],
    node_postprocessors=[ConformalNodePostprocessor(calibration=calibration)],
    llm=llamaindex_llm(temperature=0.0),   # the bundled Gemma 3 270M; any LlamaIndex LLM
    text_qa_template=PromptTemplate(  # a base model answers after one worked example
        "Answer the question with a short phrase from the context.\n\n"
        "Context: The Eiffel Tower in Paris was completed in 1889 for the World's Fair.\n"
        "Question: When was the Eiffel Tower completed?\nAnswer: 1889\n\n"
        "Context: {context_str}\nQuestion: {query_str}\nAnswer:"
    ),
)
response = engine.query(held_out[0].question)
print(held_out[0].question, "->", response, f"({len(response.source_nodes)} chunks kept)")

retriever = ConformalRetriever(index=index, calibration=calibration)
print("your index:", retriever.evaluate(held_out).summary())

tuned = ConformalRetriever.from_documents(documents, examples, confidence_level=0.9, persist_dir="chroma")
tuned.calibration.save("tuned_calibration.json")
print("tuned:     ", tuned.evaluate(held_out).summary())   # against "your index:" above
