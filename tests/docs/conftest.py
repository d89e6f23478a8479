"""``docs_objects``: the reader's own objects that the documentation's snippets assume, built on the real stack."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest


class DocsObjects:
    """Real objects over the bundled SQuAD data, built once per session and only when a page asks for them."""

    def __init__(self, request: pytest.FixtureRequest) -> None:
        self._request = request
        self._cache: dict[str, Any] = {}

    def _once(self, key: str, build: Any) -> Any:
        if key not in self._cache:
            self._cache[key] = build()
        return self._cache[key]

    def questions(self) -> list[Any]:
        """The 705 answerable bundled questions (gold: passage ids, which are the indexed node/document ids)."""
        return self._request.getfixturevalue("squad_questions")

    def chroma_server(self, host: str = "127.0.0.1", port: int = 8000) -> int:
        """``chroma run --host 127.0.0.1 --port 8000``, as the page says (once per session)."""
        start = self._request.getfixturevalue("start_chroma_server")
        return self._once(f"chroma-{host}:{port}", lambda: start(host, port))

    def llamaindex(self) -> SimpleNamespace:
        """``index`` (Chroma + MiniLM), ``nodes``, ``host`` (vector + BM25 fusion), ``examples``, ``calibration``."""

        def build() -> SimpleNamespace:
            from conformal_rag_plugins import split_examples
            from conformal_rag_plugins.llamaindex import calibrate_retriever
            from conformal_rag_plugins.local.llamaindex_stack import nodes_from_entries

            bundle = self._request.getfixturevalue("host_factory")("llamaindex", "hybrid")
            index = self._request.getfixturevalue("li_index")
            nodes = nodes_from_entries(self._request.getfixturevalue("squad_entries"))
            examples = split_examples(self.questions(), (0.5, 0.5), seed=0)[0]  # the other half is held out
            calibration = calibrate_retriever(bundle.host, examples, confidence_level=0.9)
            return SimpleNamespace(
                index=index, nodes=nodes, host=bundle.host, examples=examples, calibration=calibration
            )

        return self._once("llamaindex", build)

    def langchain(self) -> SimpleNamespace:
        """``vectorstore`` (Chroma + MiniLM), ``embeddings``, ``examples``, ``format_docs``, ``prompt``, ``llm``."""

        def build() -> SimpleNamespace:
            from langchain_core.prompts import PromptTemplate

            from conformal_rag_plugins.local import MiniLMEmbeddings, langchain_llm

            store = self._request.getfixturevalue("lc_store")
            prompt = PromptTemplate.from_template("Context: {context}\nQuestion: {question}\nAnswer:")
            return SimpleNamespace(
                vectorstore=store,
                embeddings=MiniLMEmbeddings(),
                examples=self.questions()[:300],
                format_docs=lambda docs: "\n\n".join(d.page_content for d in docs),
                prompt=prompt,
                llm=langchain_llm(),
            )

        return self._once("langchain", build)


@pytest.fixture(scope="session")
def docs_objects(request: pytest.FixtureRequest) -> DocsObjects:
    return DocsObjects(request)
