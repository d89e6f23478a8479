"""End-to-end (retrieval + generation) calibration on a LlamaIndex index and LLM."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from llama_index.core.base.llms.base import BaseLLM

from ..answer_sets.calibration import AnswerSetCalibration
from ..answer_sets.conformalizer import AnswerSetConformalizer
from ..answer_sets.host import Embedding
from ..answer_sets.options import ClusteringOptions, RetrievalStageOptions, SamplingOptions, SplitOptions
from ..core.validation import DEFAULT_CONFIDENCE_LEVEL
from ..datasets.examples import CalibrationExample
from ..retrieval.calibration import RetrievalCalibration
from ..retrieval.options import RetrievalOptions
from ..retrieval.pool_calibration import CandidatePool
from .answer_sampler import LlamaIndexSampler, answer_embedding
from .calibrate import calibrate_retriever
from .host import gold_on_chunks, pool_from_nodes, resolve_host, texts_by_id


class LlamaIndexAnswerHost:
    """An index or retriever and LLM as an :class:`~conformal_rag_plugins.answer_sets.host.AnswerSetHost`.

    What :func:`calibrate_answer_sets` builds; give it to :class:`~conformal_rag_plugins.AnswerSetConformalizer`.

    Examples
    --------
    >>> reader = LlamaIndexAnswerHost(index, llm, pool_size=20)  # doctest: +SKIP
    >>> AnswerSetConformalizer(0.7).conformalize(reader, examples).guaranteed_  # doctest: +SKIP
    True
    """

    def __init__(self, host: Any, llm: BaseLLM, *, pool_size: int | None = None) -> None:
        # the retriever already has the pool size, so calibration reads it from there
        self.llm, self.host = llm, resolve_host(host, pool_size)[0]

    def fetch(self, question: str) -> CandidatePool:
        """The retriever's scored nodes for ``question`` as a candidate pool."""
        return pool_from_nodes(self.host.retrieve(question))[0]

    def texts_for(self, ids: list[str]) -> dict[str, str]:
        """The text of each node id the retriever's docstore knows."""
        return texts_by_id(self.host, ids)

    def calibrate_retrieval(
        self, examples: list[CalibrationExample], *, confidence_level: float, score: str, progress: bool
    ) -> RetrievalCalibration:
        """:func:`~.calibrate.calibrate_retriever` on the retriever."""
        options = RetrievalOptions(score=score, progress=progress)
        return calibrate_retriever(self.host, examples, confidence_level=confidence_level, options=options)

    def sampler(self, options: SamplingOptions) -> LlamaIndexSampler:
        """The LLM's answer sampler with these options."""
        return LlamaIndexSampler.with_options(self.llm, options)

    def embedding(self, embedder: Any) -> Embedding | None:
        """A LlamaIndex embedding model's batch call (``None`` for none)."""
        return answer_embedding(embedder)

    def prepare_gold(self, examples: Sequence[CalibrationExample]) -> list[CalibrationExample]:
        """The examples with gold on the host's nodes (the one gold-id rule: node or document ids)."""
        return gold_on_chunks(self.host, list(examples))


def calibrate_answer_sets(
    host: Any,
    llm: BaseLLM,
    examples: Sequence[CalibrationExample],
    *,
    confidence_level: float = DEFAULT_CONFIDENCE_LEVEL,
    sampling: SamplingOptions | None = None,
    split: SplitOptions | None = None,
    clustering: ClusteringOptions | None = None,
    retrieval: RetrievalStageOptions | None = None,
) -> AnswerSetCalibration:
    """Calibrate both stages (:class:`~conformal_rag_plugins.answer_sets.conformalizer.AnswerSetConformalizer`).

    The retrieval stage is calibrated like :func:`calibrate_retriever` (or pass
    ``RetrievalStageOptions(calibration=...)``); the generator stage samples ``n_samples`` answers
    per example from its gold chunk, clusters them, and scores the cluster matching a reference
    (ROUGE-1 F1 > ``match_threshold``), ``+inf`` when none does (kept).

    Parameters
    ----------
    host : VectorStoreIndex or BaseRetriever
        The index (or retriever) queried at serving time.
    llm : LlamaIndex LLM
        The generator (base models: few-shot completion prompt; chat models: chat prompt).
    examples : sequence of CalibrationExample
        Reference answers and gold: node ids or document ids (see the docs' Gold ids page); both
        stages use the same gold chunks.
    confidence_level : float, default 0.9
        The end-to-end target ``1 - alpha``.
    sampling, split, clustering, retrieval : optional
        :class:`~conformal_rag_plugins.answer_sets.options.SamplingOptions`,
        :class:`~conformal_rag_plugins.answer_sets.options.SplitOptions`,
        :class:`~conformal_rag_plugins.answer_sets.options.ClusteringOptions` (``embedder=embed_model``),
        :class:`~conformal_rag_plugins.answer_sets.options.RetrievalStageOptions`.
        ``SamplingOptions(pilot=...)`` (:class:`~conformal_rag_plugins.answer_sets.options.PilotOptions`,
        default 5 questions) first estimates the generator's coverage ceiling on a seeded pilot and
        raises :class:`~conformal_rag_plugins.core.errors.UnreachableTargetError` before the full
        calibration when the target is clearly out of reach. Its questions are left out of the
        thresholds (the decision to go on depends on them). ``pilot=None``: no pilot.

    Returns
    -------
    AnswerSetCalibration

    Raises
    ------
    UnreachableTargetError
        The pilot found the target out of reach (after the pilot's LLM calls only).

    Examples
    --------
    >>> cal = calibrate_answer_sets(hybrid, llm, examples, sampling=SamplingOptions(n_samples=10))  # doctest: +SKIP
    """
    retrieval = retrieval or RetrievalStageOptions()
    reader = LlamaIndexAnswerHost(host, llm, pool_size=retrieval.pool_size)
    conformalizer = AnswerSetConformalizer(
        confidence_level, sampling=sampling, split=split, clustering=clustering, retrieval=retrieval
    )
    return conformalizer.conformalize(reader, examples)
