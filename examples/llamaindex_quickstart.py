"""LlamaIndex quick start: your documents, your index, the calibrated filter, a query and the held-out verdict.

Runs offline on the bundled SQuAD passages (the same steps as docs/quickstart-llamaindex.md), using public
names only: ``python examples/llamaindex_quickstart.py``
"""

from __future__ import annotations

from llama_index.core import Document, PromptTemplate, VectorStoreIndex

from conformal_rag_plugins import split_examples
from conformal_rag_plugins.llamaindex import ConformalNodePostprocessor, ConformalRetriever, calibrate_retriever
from conformal_rag_plugins.local import (
    MiniLMEmbedding,
    bundled_corpus,
    bundled_questions,
    llamaindex_llm,
    sentence_splitter,
)


def main() -> None:
    # 1. Your documents, with ids that stay the same on every run.
    documents = [Document(text=p.text, id_=p.id, metadata={"title": p.title or ""}) for p in bundled_corpus()]
    # 2. Your index, in chunks that fit all-MiniLM-L6-v2's window (stable chunk ids).
    index = VectorStoreIndex.from_documents(
        documents, transformations=[sentence_splitter()], embed_model=MiniLMEmbedding()
    )
    # 3. Labelled questions (gold: a document id and the reference answers), half held out.
    examples, held_out = split_examples(bundled_questions(), (0.5, 0.5), seed=0)
    calibration = calibrate_retriever(index, examples, confidence_level=0.9)
    calibration.save("calibration.json")
    print(calibration.summary())

    # 4. The one-line swap: the calibrated filter instead of a hand-picked similarity cut-off.
    engine = index.as_query_engine(
        similarity_top_k=50,
        node_postprocessors=[ConformalNodePostprocessor(calibration=calibration)],
        llm=llamaindex_llm(temperature=0.0),
        text_qa_template=PromptTemplate(  # a base model answers after one worked example
            "Answer the question with a short phrase from the context.\n\n"
            "Context: The Eiffel Tower in Paris was completed in 1889 for the World's Fair.\n"
            "Question: When was the Eiffel Tower completed?\nAnswer: 1889\n\n"
            "Context: {context_str}\nQuestion: {query_str}\nAnswer:"
        ),
    )
    question = held_out[0]
    response = engine.query(question.question)
    print(question.question, "->", str(response).strip(), f"({len(response.source_nodes)} chunks kept)")

    # 5. The verdict on questions the calibration has not seen (as `conformal-rag report` gives it).
    retriever = ConformalRetriever(index=index, calibration=calibration)
    print("your index:", retriever.evaluate(held_out).summary())

    # 6. The tuned host of `conformal-rag calibrate`, in one call, on the same documents and questions.
    tuned = ConformalRetriever.from_documents(documents, examples, confidence_level=0.9, persist_dir="chroma")
    print("tuned:     ", tuned.evaluate(held_out).summary())


if __name__ == "__main__":
    main()
