"""End-to-end (retrieval + generation) calibration driven by the LlamaIndex host index and LLM."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from llama_index.core.async_utils import asyncio_run
from llama_index.core.base.llms.base import BaseLLM

from ..calibration.answer_sets import AnswerSetCalibration
from ..calibration.examples import CalibrationExample, split_examples
from ..calibration.retrieval import RetrievalCalibration
from ..generation import SampleCache
from ..generation.calibrate import acalibrate_end_to_end, bo_choice, gold_text_lookup
from .calibrate import calibrate_retriever, resolve_host
from .host import pool_from_nodes, texts_by_id
from .sampling import LlamaIndexSampler, model_id

__all__ = ["calibrate_answer_sets"]


def calibrate_answer_sets(
    host: Any,
    llm: BaseLLM,
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
    embed_model: Any = None,
    optimise_split: bool = False,
    optimisation_fraction: float = 0.3,
    bo_calls: int = 15,
    random_state: int = 0,
    progress: bool = True,
) -> AnswerSetCalibration:
    """Calibrate both stages on the host index and LLM.

    The retrieval stage is calibrated like :func:`calibrate_retriever` (or pass
    ``retrieval_calibration``); the generator stage samples ``n_samples`` answers per
    example from its gold chunk, clusters them, and scores the cluster matching a
    reference (ROUGE-1 F1 > ``match_threshold``), ``+inf`` when none does (kept).

    Parameters
    ----------
    optimise_split : bool
        Choose the split of alpha (or the HMP weight) by Bayesian optimisation on a seeded
        ``optimisation_fraction`` of the examples (their top chunks are sampled), then
        calibrate both stages on the disjoint rest (unless ``retrieval_calibration`` is given,
        which must then not include the optimisation questions).
    method : {"bonferroni", "pac", "hmp"}
        ``alpha_retrieval`` splits alpha for Bonferroni/PAC (default equal); ``delta`` for
        PAC; ``hmp_weight`` (retrieval weight) for the harmonic-mean rule.

    Examples
    --------
    >>> cal = calibrate_answer_sets(hybrid, llm, examples, confidence_level=0.7, n_samples=10)  # doctest: +SKIP
    >>> cal.save("answer_sets.json")  # doctest: +SKIP
    """
    retriever, _ = resolve_host(host, pool_size)
    examples = list(examples)
    sampler = LlamaIndexSampler(llm, n_samples=n_samples, max_concurrency=max_concurrency, cache=cache)
    optimisation = None
    if optimise_split:
        opt, examples = split_examples(examples, (optimisation_fraction, 1 - optimisation_fraction), seed=random_state)
        texts = texts_by_id(retriever, sorted({g for ex in opt for g in ex.gold_ids}))
        optimisation = bo_choice(
            [ex for ex in opt if ex.answers and not ex.is_impossible],
            lambda q: pool_from_nodes(retriever.retrieve(q))[0],
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
        retriever, examples, confidence_level=confidence_level, score=score, progress=progress
    )
    texts = texts_by_id(retriever, sorted({g for ex in examples for g in ex.gold_ids}))
    return asyncio_run(
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
            embed=embed_model.get_text_embedding_batch if embed_model is not None else None,
        )
    )
