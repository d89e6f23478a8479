"""End-to-end (retrieval + generation) calibration on a LangChain store or retriever and model."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.language_models import BaseLanguageModel

from ..answer_sets.calibration import AnswerSetCalibration
from ..answer_sets.conformalizer import AnswerSetConformalizer
from ..answer_sets.host import Embedding
from ..answer_sets.options import ClusteringOptions, RetrievalStageOptions, SamplingOptions, SplitOptions
from ..core.validation import DEFAULT_CONFIDENCE_LEVEL
from ..datasets.examples import CalibrationExample
from ..labelling.gold_ids import gold_on_chunks
from ..retrieval.calibration import RetrievalCalibration
from ..retrieval.options import RetrievalOptions
from ..retrieval.pool_calibration import CandidatePool
from .answer_sampler import LangChainSampler, answer_embedding
from .calibrate import calibrate_retriever
from .host import Host, fetch_pool, gold_lookup, resolve_pool_size, texts_by_id


class LangChainAnswerHost:
    """A store or retriever and model as an :class:`~conformal_rag_plugins.answer_sets.host.AnswerSetHost`.

    What :func:`calibrate_answer_sets` builds; give it to :class:`~conformal_rag_plugins.AnswerSetConformalizer`.

    Examples
    --------
    >>> reader = LangChainAnswerHost(vectorstore, llm, pool_size=20)  # doctest: +SKIP
    >>> AnswerSetConformalizer(0.7).conformalize(reader, examples).guaranteed_  # doctest: +SKIP
    True
    """

    def __init__(self, host: Host, llm: BaseLanguageModel, *, pool_size: int | None = None) -> None:
        self.llm, self.host, self.pool_size = llm, host, pool_size
        self._size = resolve_pool_size(host, pool_size)

    def fetch(self, question: str) -> CandidatePool:
        """The store's (or retriever's) scored documents for ``question`` as a candidate pool."""
        return fetch_pool(self.host, question, self._size)[0]

    def texts_for(self, ids: list[str]) -> dict[str, str]:
        """The text of each chunk id the store knows."""
        return texts_by_id(self.host, ids)

    def calibrate_retrieval(
        self, examples: list[CalibrationExample], *, confidence_level: float, score: str, progress: bool
    ) -> RetrievalCalibration:
        """:func:`~.calibrate.calibrate_retriever` on the store, with this host's ``pool_size``."""
        options = RetrievalOptions(score=score, progress=progress)
        return calibrate_retriever(
            self.host, examples, confidence_level=confidence_level, pool_size=self.pool_size, options=options
        )

    def sampler(self, options: SamplingOptions) -> LangChainSampler:
        """The model's answer sampler with these options."""
        return LangChainSampler.with_options(self.llm, options)

    def embedding(self, embedder: Any) -> Embedding | None:
        """LangChain ``Embeddings``' batch call (``None`` for none)."""
        return answer_embedding(embedder)

    def prepare_gold(self, examples: Sequence[CalibrationExample]) -> list[CalibrationExample]:
        """The examples with gold on the store's chunks (the one gold-id rule: chunk or document ids)."""
        return gold_on_chunks(examples, gold_lookup(self.host))


def calibrate_answer_sets(
    host: Host,
    llm: BaseLanguageModel,
    examples: Sequence[CalibrationExample],
    *,
    confidence_level: float = DEFAULT_CONFIDENCE_LEVEL,
    sampling: SamplingOptions | None = None,
    split: SplitOptions | None = None,
    clustering: ClusteringOptions | None = None,
    retrieval: RetrievalStageOptions | None = None,
) -> AnswerSetCalibration:
    """Calibrate both stages on the host store or retriever and chat or completion model.

    Same contract and options as the LlamaIndex ``calibrate_answer_sets`` (the clustering embedder
    is LangChain ``Embeddings``), including ``SamplingOptions(pilot=...)``
    (:class:`~conformal_rag_plugins.answer_sets.options.PilotOptions`; ``None`` turns it off) that
    raises :class:`~conformal_rag_plugins.core.errors.UnreachableTargetError` early.

    Examples
    --------
    >>> cal = calibrate_answer_sets(store, chat_model, examples, confidence_level=0.7)  # doctest: +SKIP
    """
    retrieval = retrieval or RetrievalStageOptions()
    reader = LangChainAnswerHost(host, llm, pool_size=retrieval.pool_size)
    conformalizer = AnswerSetConformalizer(
        confidence_level, sampling=sampling, split=split, clustering=clustering, retrieval=retrieval
    )
    return conformalizer.conformalize(reader, examples)
