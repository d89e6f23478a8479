"""End-to-end (retrieval + generation) calibration driven by the LlamaIndex host index and LLM."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from llama_index.core.base.llms.base import BaseLLM

from ..answer_sets.calibration import AnswerSetCalibration
from ..answer_sets.sample_cache import SampleCache
from ..answer_sets.stages import HostHooks, calibrate_stages
from ..datasets.examples import CalibrationExample
from ..retrieval.calibration import RetrievalCalibration
from ..retrieval.options import RetrievalOptions
from ..runtime.run_sync import run_sync
from .answer_sampler import LlamaIndexSampler, embedder_identity, model_id
from .calibrate import calibrate_retriever, resolve_host
from .host import pool_from_nodes, texts_by_id

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
    generator_score: str | None = None,
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
    generator_score : {"frequency", "likelihood"}, optional
        The cluster confidence: sample frequency (default), or frequency with ties broken
        by the LLM's own token likelihood (smaller sets; the LLM must report logprobs, e.g.
        ``local_llm(logprobs=True)``). Recorded in ``clustering_["score"]`` and used at query time.
    method : {"bonferroni", "pac", "hmp"}
        ``alpha_retrieval`` splits alpha for Bonferroni/PAC (default equal); ``delta`` for
        PAC; ``hmp_weight`` (retrieval weight) for the harmonic-mean rule.

    Examples
    --------
    >>> cal = calibrate_answer_sets(hybrid, llm, examples, confidence_level=0.7, n_samples=10)  # doctest: +SKIP
    >>> cal.save("answer_sets.json")  # doctest: +SKIP
    """
    retriever, _ = resolve_host(host, pool_size)
    sampler = LlamaIndexSampler(llm, n_samples=n_samples, max_concurrency=max_concurrency, cache=cache)
    hooks = HostHooks(
        fetch=lambda q: pool_from_nodes(retriever.retrieve(q))[0],
        texts_for=lambda ids: texts_by_id(retriever, ids),
        calibrate_retrieval=lambda exs: calibrate_retriever(
            retriever,
            exs,
            confidence_level=confidence_level,
            options=RetrievalOptions(score=score, progress=progress),
        ),
        sample=sampler.asample,
        model=model_id(llm),
        run=run_sync,
        identity=sampler.identity,
        embedding_identity=lambda: embedder_identity(embed_model),
    )
    embed = embed_model.get_text_embedding_batch if embed_model is not None else None
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
