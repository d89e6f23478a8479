"""End-to-end (retrieval + generation) calibration driven by a LangChain store/retriever and model."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from langchain_core.language_models import BaseLanguageModel

from ..calibration.answer_sets import AnswerSetCalibration
from ..calibration.examples import CalibrationExample, split_examples
from ..calibration.retrieval import RetrievalCalibration
from ..generation import SampleCache
from ..generation.calibrate import acalibrate_end_to_end, bo_choice, gold_text_lookup
from .calibrate import calibrate_retriever
from .host import Host, fetch_pool, texts_by_id
from .sampling import LangChainSampler, model_id

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
    examples = list(examples)
    sampler = LangChainSampler(llm, n_samples=n_samples, max_concurrency=max_concurrency, cache=cache)
    optimisation = None
    if optimise_split:
        opt, examples = split_examples(examples, (optimisation_fraction, 1 - optimisation_fraction), seed=random_state)
        texts = texts_by_id(host, sorted({g for ex in opt for g in ex.gold_ids}))
        size = pool_size or getattr(host, "k", None) or 50
        optimisation = bo_choice(
            [ex for ex in opt if ex.answers and not ex.is_impossible],
            lambda q: fetch_pool(host, q, size)[0],
            texts,
            sampler.asample,
            confidence_level=confidence_level,
            method=method,
            n_samples=n_samples,
            delta=delta,
            bo_calls=bo_calls,
            progress=progress,
        )
        alpha_retrieval = optimisation.get("alpha_retrieval", alpha_retrieval)
        hmp_weight = optimisation.get("hmp_weight", hmp_weight)
    retrieval = retrieval_calibration or calibrate_retriever(
        host, examples, confidence_level=confidence_level, score=score, pool_size=pool_size, progress=progress
    )
    texts = texts_by_id(host, sorted({g for ex in examples for g in ex.gold_ids}))
    return asyncio.run(
        acalibrate_end_to_end(
            retrieval,
            examples,
            gold_text_lookup(texts),
            sampler.asample,
            confidence_level=confidence_level,
            n_samples=n_samples,
            model=model_id(llm),
            method=method,
            alpha_retrieval=alpha_retrieval,
            delta=delta,
            hmp_weight=hmp_weight,
            clustering=clustering,
            match_threshold=match_threshold,
            progress=progress,
            optimisation=optimisation,
            embed=embeddings.embed_documents if embeddings is not None else None,
        )
    )
