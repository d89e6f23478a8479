"""Generation-stage nonconformity scores (TRAQ): calibration score, ceiling, generator set.

For a calibration example the LLM is sampled with the *gold* chunk as
context, the samples are clustered (:func:`~.clustering.cluster_answers`),
and the score is

``r = -max{confidence(C) : C matches a reference answer}``, or ``+inf`` when
no cluster matches.

A miss (``+inf``) is kept in the calibration, never dropped, so the threshold
stays valid; :func:`coverage_ceiling` reports how often the LLM can be right
at all. At query time the generator set of a chunk is every cluster with
``-confidence <= q_gen``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Literal

import numpy as np

from .clustering import AnswerCluster, rouge_f1
from .errors import ConformalError
from .normalize import is_abstention, normalize_answer
from .validation import check_scores

MatchRule = Literal["rouge1", "exact"]
DEFAULT_MATCH_THRESHOLD = 0.3
"""ROUGE-1 F1 above which an answer counts as correct (TRAQ, TRAC)."""


def answer_matches(
    answer: str | None,
    references: Iterable[str],
    *,
    match: MatchRule = "rouge1",
    threshold: float = DEFAULT_MATCH_THRESHOLD,
) -> bool:
    """Whether an answer is equivalent to one of the reference answers.

    ``match="rouge1"``: ROUGE-1 F1 ``> threshold`` (strictly) or equal
    normalised text; ``match="exact"``: equal normalised text. An abstention
    only matches an abstention reference (an unanswerable question), and a
    real answer never matches an abstention reference.

    Examples
    --------
    >>> answer_matches("in Paris", ["Paris"])
    True
    >>> answer_matches("in Paris", ["Paris"], match="exact")
    False
    >>> answer_matches("I don't know", ["Paris"])
    False
    """
    if match not in ("rouge1", "exact"):
        raise ConformalError(f"match must be 'rouge1' or 'exact', got {match!r}.")
    abstains = is_abstention(answer)
    norm = normalize_answer(answer)
    for ref in references:
        if is_abstention(ref) or abstains:
            if is_abstention(ref) and abstains:
                return True
            continue
        if norm == normalize_answer(ref):
            return True
        if match == "rouge1" and rouge_f1(str(answer), str(ref), "rouge1") > threshold:
            return True
    return False


def generation_score(
    clusters: Sequence[AnswerCluster],
    references: Iterable[str],
    *,
    match: MatchRule = "rouge1",
    threshold: float = DEFAULT_MATCH_THRESHOLD,
) -> float:
    """Calibration nonconformity of one example: ``-(best matching confidence)``.

    A cluster matches when its representative matches a reference
    (:func:`answer_matches`). Returns ``+inf`` when no cluster matches: a miss,
    which must be kept in the calibration scores.

    Parameters
    ----------
    clusters : sequence of AnswerCluster
        The clusters of the ``M`` samples generated with the gold chunk.
    references : iterable of str
        The reference answers.
    match : {"rouge1", "exact"}, default "rouge1"
    threshold : float, default 0.3
        ROUGE-1 F1 threshold (strict ``>``).

    Returns
    -------
    float
        In ``[-1, 0)`` or ``inf``.

    Examples
    --------
    >>> from conformal_rag_plugins.core.clustering import cluster_answers
    >>> cl = cluster_answers(["Paris", "Paris", "Lyon", "Paris, France"], method="exact")
    >>> generation_score(cl, ["Paris"])
    -0.5
    >>> generation_score(cl, ["Marseille"])
    inf
    """
    refs = list(references)
    best = -math.inf
    for c in clusters:
        if c.confidence > best and answer_matches(c.representative, refs, match=match, threshold=threshold):
            best = c.confidence
    return math.inf if best == -math.inf else -float(best)


def coverage_ceiling(scores: Iterable[float]) -> float:
    """Share of calibration examples whose score is finite (the LLM can be right).

    If it is below ``1 - alpha_gen``, that target is unreachable with this LLM
    and prompt: the threshold is ``+inf`` and the generator set keeps every
    cluster. Report it rather than hiding it.

    Examples
    --------
    >>> coverage_ceiling([-0.5, float("inf"), -0.1, -1.0])
    0.75
    """
    arr = check_scores(scores)
    return float(np.isfinite(arr).mean())


def generator_set(clusters: Sequence[AnswerCluster], q_gen: float) -> list[AnswerCluster]:
    """The clusters kept for one (question, chunk): those with ``-confidence <= q_gen``.

    Ties are kept. ``q_gen = +inf`` keeps every cluster.

    Examples
    --------
    >>> from conformal_rag_plugins.core.clustering import cluster_answers
    >>> cl = cluster_answers(["A", "A", "A", "B", "C"], method="exact")
    >>> [c.representative for c in generator_set(cl, -0.2)]
    ['A', 'B', 'C']
    >>> [c.representative for c in generator_set(cl, -0.3)]
    ['A']
    """
    if math.isnan(q_gen):
        raise ConformalError("q_gen must not be NaN.")
    return [c for c in clusters if -c.confidence <= q_gen]
