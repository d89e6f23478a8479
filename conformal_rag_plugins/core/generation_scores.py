"""Generation-stage nonconformity scores (TRAQ): calibration score, ceiling, generator set.

With the gold chunk as context, the score is ``-max{confidence(C) : C matches a reference}``, or
``+inf`` (a miss, kept so the threshold stays valid) when no cluster matches. At query time a
chunk's generator set is every cluster with ``-confidence <= q_gen`` (ties kept).
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

    ROUGE-1 F1 ``> threshold`` (strict) or equal normalised text (``match="exact"``: only the latter).
    Abstentions match only abstention references (unanswerable questions), and vice versa.

    Examples
    --------
    >>> answer_matches("in Paris", ["Paris"]), answer_matches("in Paris", ["Paris"], match="exact")
    (True, False)
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

    In ``[-1, 0)``, or ``+inf`` when no cluster's representative matches: a miss, kept in calibration.

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

    Below ``1 - alpha_gen`` the target is unreachable with this LLM and prompt (threshold ``+inf``).

    Examples
    --------
    >>> coverage_ceiling([-0.5, float("inf"), -0.1, -1.0])
    0.75
    """
    arr = check_scores(scores)
    return float(np.isfinite(arr).mean())


def generator_set(clusters: Sequence[AnswerCluster], q_gen: float) -> list[AnswerCluster]:
    """The clusters kept for one (question, chunk): those with ``-confidence <= q_gen``.

    Examples
    --------
    >>> from conformal_rag_plugins.core.clustering import cluster_answers
    >>> cl = cluster_answers(["A", "A", "A", "B", "C"], method="exact")
    >>> [c.representative for c in generator_set(cl, -0.3)]
    ['A']
    """
    if math.isnan(q_gen):
        raise ConformalError("q_gen must not be NaN.")
    return [c for c in clusters if -c.confidence <= q_gen]
