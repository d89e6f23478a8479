"""LangChain Runnable that turns ``{"question", "context": list[Document]}`` into a conformal answer set."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForChainRun, CallbackManagerForChainRun
from langchain_core.documents import Document
from langchain_core.language_models import BaseLanguageModel
from langchain_core.runnables import RunnableConfig, RunnableSerializable
from langchain_core.runnables.config import patch_config
from pydantic import ConfigDict, PrivateAttr, model_validator

from ..answer_sets.calibration import AnswerSetCalibration
from ..answer_sets.engine import (
    AnswerSetResult,
    ChunkInput,
    check_synthesizer_calibration,
    chunks_from_metadata,
    query_sampling,
)
from ..answer_sets.options import SamplingOptions, reject_moved_keywords
from ..answer_sets.synthesis import ClusteringEmbedder, asynthesize_answer_set
from ..core.errors import ConformalError
from ..runtime.run_sync import run_sync
from .answer_sampler import LangChainSampler, embedder_identity
from .host import doc_id


def _chunks(docs: Sequence[Document], calibration: AnswerSetCalibration) -> tuple[list[ChunkInput], str]:
    return chunks_from_metadata(
        [(doc_id(d) or f"doc-{i}", d.page_content, d.metadata) for i, d in enumerate(docs)], calibration
    )


class ChainRun:
    """Mixin (before ``RunnableSerializable``): ``invoke``/``ainvoke`` run ``_build`` as a chain run."""

    async def _build(self, value: dict[str, Any], child: RunnableConfig) -> Any:
        raise NotImplementedError

    async def _arun(
        self, value: dict[str, Any], run_manager: AsyncCallbackManagerForChainRun, config: RunnableConfig
    ) -> Any:
        return await self._build(value, patch_config(config, callbacks=run_manager.get_child()))

    def _run(self, value: dict[str, Any], run_manager: CallbackManagerForChainRun, config: RunnableConfig) -> Any:
        return run_sync(self._build(value, patch_config(config, callbacks=run_manager.get_child())))

    async def ainvoke(self, input: dict[str, Any], config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        return await self._acall_with_config(self._arun, input, config, run_type="chain")  # type: ignore[attr-defined]

    def invoke(self, input: dict[str, Any], config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        return self._call_with_config(self._run, input, config, run_type="chain")  # type: ignore[attr-defined]


class ConformalAnswerSetSynthesizer(ChainRun, RunnableSerializable[dict[str, Any], AnswerSetResult]):
    """Runnable answer-set synthesizer for LCEL, after ``ConformalRetriever``.

    Input ``{"question": str, "context": list[Document]}``; output an
    :class:`~conformal_rag_plugins.answer_sets.engine.AnswerSetResult` (``response``, ``answers`` with
    confidences and supporting document ids, ``abstained``, ``alpha``, tokens). Runs as a chain run,
    the model calls as its child runs.

    Every run first checks the model (class, name, a local model's file digest), its sampling
    settings, the prompt and, for embedding clustering, ``embeddings`` against the calibration's
    record, raising :class:`~conformal_rag_plugins.core.errors.GeneratorMismatchError` naming each difference.

    Parameters
    ----------
    llm : BaseLanguageModel
        Chat models get the chat prompt, completion LLMs the few-shot prompt (replace them on :attr:`sampler`).
    calibration : AnswerSetCalibration
        End-to-end calibration, e.g. from ``calibrate_answer_sets``.
    sampling : SamplingOptions, optional
        :class:`~conformal_rag_plugins.answer_sets.options.SamplingOptions`; ``n_samples`` must equal
        the calibration's M (default: taken from it); separate fields raise a ``TypeError``.
    equivalence : str, optional
        Must equal the calibrated clustering method (another rule is refused).
    embeddings : Embeddings, optional
        Required when the calibration clusters by embedding cosine.

    Examples
    --------
    >>> synth = ConformalAnswerSetSynthesizer(llm=chat_model, calibration=cal)  # doctest: +SKIP
    >>> chain = {"context": retriever, "question": RunnablePassthrough()} | synth  # doctest: +SKIP
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    llm: BaseLanguageModel
    calibration: AnswerSetCalibration
    sampling: SamplingOptions | None = None
    equivalence: Any = None
    embeddings: Any = None
    _sampler: LangChainSampler = PrivateAttr()
    _embedding_identity: list[dict[str, Any] | None] = PrivateAttr(default_factory=list)

    @model_validator(mode="after")
    def _setup(self) -> ConformalAnswerSetSynthesizer:
        self.sampling = query_sampling(self.calibration, self.sampling)
        self._sampler = LangChainSampler.with_options(self.llm, self.sampling)
        return self

    def __init__(self, **data: Any) -> None:
        reject_moved_keywords(type(self).__name__, data)
        if "calibration" in data:
            check_synthesizer_calibration(data["calibration"])
        super().__init__(**data)

    @property
    def sampler(self) -> LangChainSampler:
        """The sampler (its ``completion_prompt`` / ``chat_prompt`` can be replaced)."""
        return self._sampler

    @staticmethod
    def _parse(value: Any) -> tuple[str, list[Document]]:
        if not isinstance(value, dict) or "question" not in value:
            raise ConformalError('Input must be {"question": str, "context": list[Document]}.')
        return str(value["question"]), list(value.get("context") or [])

    async def _build(self, value: dict[str, Any], child: RunnableConfig) -> AnswerSetResult:
        question, docs = self._parse(value)
        chunks, cut_reason = _chunks(docs, self.calibration)
        return await asynthesize_answer_set(
            self.calibration, self._sampler, question, chunks, cut_reason=cut_reason, equivalence=self.equivalence,
            embedder=ClusteringEmbedder(
                self.embeddings, "embed_documents", embedder_identity, self._embedding_identity
            ),
            config=child,
        )  # fmt: skip
