"""End-to-end (retrieval + generation) calibration driven by a LangChain store/retriever and model."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.language_models import BaseLanguageModel

from ..answer_sets.calibration import AnswerSetCalibration
from ..answer_sets.sample_cache import SampleCache
from ..answer_sets.stages import HostHooks, calibrate_stages
from ..datasets.examples import CalibrationExample
from ..retrieval.calibration import RetrievalCalibration
from ..retrieval.options import RetrievalOptions
from ..runtime.run_sync import run_sync
from .answer_sampler import LangChainSampler, embedder_identity, model_id
from .calibrate import calibrate_retriever, resolve_pool_size
from .host import Host, fetch_pool, texts_by_id

__all__ = ["calibrate_answer_sets"]


def calibrate_answer_sets(
    host: Host,
    llm: BaseLanguageModel,
    examples: Sequence[CalibrationExample],
    *,
    confidence_level: float = 0.8,
    method: str = "bonferroni",
    alpha_retrieval: float | None = None,
    delta: float | None = None,
    hmp_weight: float | None = None,
    n_samples: int = 10,
    score: str = "relative",
    pool_size: int | None = None,
    retrieval_calibration: RetrievalCalibration | None = None,
    clustering: dict[str, Any] | None = None,
    generator_score: str | None = None,
    match_threshold: float = 0.3,
    cache: SampleCache | None = None,
    max_concurrency: int = 4,
    embeddings: Any = None,
    optimise_split: bool = False,
    optimisation_fraction: float = 0.3,
    bo_calls: int = 15,
    random_state: int = 0,
    progress: bool = True,
) -> AnswerSetCalibration:
    """Calibrate both stages on the host store/retriever and chat or completion model.

    Same contract as the LlamaIndex ``calibrate_answer_sets``.

    Examples
    --------
    >>> cal = calibrate_answer_sets(store, chat_model, examples, confidence_level=0.7)  # doctest: +SKIP
    """
    sampler = LangChainSampler(llm, n_samples=n_samples, max_concurrency=max_concurrency, cache=cache)
    size = resolve_pool_size(host, pool_size)
    hooks = HostHooks(
        fetch=lambda q: fetch_pool(host, q, size)[0],
        texts_for=lambda ids: texts_by_id(host, ids),
        calibrate_retrieval=lambda exs: calibrate_retriever(
            host,
            exs,
            confidence_level=confidence_level,
            pool_size=pool_size,
            options=RetrievalOptions(score=score, progress=progress),
        ),
        sample=sampler.asample,
        model=model_id(llm),
        run=run_sync,
        identity=sampler.identity,
        embedding_identity=lambda: embedder_identity(embeddings),
    )
    embed = embeddings.embed_documents if embeddings is not None else None
    return calibrate_stages(
        hooks,
        examples,
        retrieval_calibration=retrieval_calibration,
        confidence_level=confidence_level,
        method=method,
        alpha_retrieval=alpha_retrieval,
        delta=delta,
        hmp_weight=hmp_weight,
        n_samples=n_samples,
        clustering=clustering,
        generator_score=generator_score,
        match_threshold=match_threshold,
        optimise_split=optimise_split,
        optimisation_fraction=optimisation_fraction,
        bo_calls=bo_calls,
        random_state=random_state,
        progress=progress,
        embed=embed,
    )
