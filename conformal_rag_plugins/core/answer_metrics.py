"""Metrics of answer sets as TRAQ/TRAC report them: coverage, sizes, abstentions, hallucinations.

Coverage: some sampled answer in the set (every cluster member) matches a reference, by ROUGE-1
F1 > 0.3 or exact normalised match. Sizes: ``ans`` raw answers, ``ext`` distinct normalised,
``rou`` greedy ROUGE-L >= 0.7, ``sem`` semantic clusters. A set abstains when empty or only
"I don't know"; it hallucinates when it neither abstains nor covers (ROUGE-1 rule).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

import numpy as np

from .clustering import AnswerCluster, Method, cluster_answers
from .errors import ConformalError
from .generation_scores import DEFAULT_MATCH_THRESHOLD, answer_matches
from .normalize import is_abstention, normalize_answer

AnswerSet = Sequence[AnswerCluster] | Sequence[str]


@dataclass(frozen=True)
class SetSizes:
    """The four set sizes of TRAC: raw answers, exact-distinct, ROUGE-distinct, semantic clusters."""

    ans: int
    ext: int
    rou: int
    sem: int


def _members(answer_set: AnswerSet) -> list[str]:
    out: list[str] = []
    for item in answer_set:
        if isinstance(item, AnswerCluster):
            out.extend(item.members)
        elif item is None or isinstance(item, str):
            out.append("" if item is None else item)
        else:
            raise ConformalError(f"An answer set holds AnswerCluster objects or strings, got {type(item).__name__}.")
    return out


def _is_clusters(answer_set: AnswerSet) -> bool:
    return len(answer_set) > 0 and all(isinstance(c, AnswerCluster) for c in answer_set)


def set_sizes(
    answer_set: AnswerSet,
    *,
    rouge_tau: float = 0.7,
    method: Method = "rougeL",
    tau: float | None = None,
    embed: Callable[[list[str]], np.ndarray] | None = None,
) -> SetSizes:
    """Ans, Ext, Rou and Sem sizes of one answer set.

    For raw strings ``sem`` clusters them with ``method``/``tau``/``embed``; for clusters it is their number.

    Examples
    --------
    >>> answers = ["Paris", "paris.", "Eiffel Tower", "Eiffel Tower, Paris", "Lyon"]
    >>> set_sizes(answers)
    SetSizes(ans=5, ext=4, rou=3, sem=3)
    >>> from conformal_rag_plugins.core.clustering import cluster_answers
    >>> set_sizes(cluster_answers(answers, method="exact"))
    SetSizes(ans=5, ext=4, rou=3, sem=4)
    """
    members = _members(answer_set)
    distinct: dict[str, str] = {}
    for m in members:
        distinct.setdefault(normalize_answer(m), m)
    rou = len(cluster_answers(list(distinct.values()), method="rougeL", tau=rouge_tau)) if distinct else 0
    if _is_clusters(answer_set):
        sem = len(answer_set)
    else:
        sem = len(cluster_answers(members, method=method, tau=tau, embed=embed)) if members else 0
    return SetSizes(ans=len(members), ext=len(distinct), rou=rou, sem=sem)


def set_covers(
    answer_set: AnswerSet,
    references: Sequence[str],
    *,
    match: str = "rouge1",
    threshold: float = DEFAULT_MATCH_THRESHOLD,
) -> bool:
    """Whether some answer in the set matches a reference (ROUGE-1 F1 > 0.3, or ``match="exact"``).

    Examples
    --------
    >>> set_covers(["Lyon", "in Paris"], ["Paris"]), set_covers(["Lyon", "in Paris"], ["Paris"], match="exact")
    (True, False)
    """
    refs = list(references)
    seen: set[str] = set()
    for m in _members(answer_set):
        key = normalize_answer(m)
        if key in seen:
            continue
        seen.add(key)
        if answer_matches(m, refs, match=match, threshold=threshold):  # type: ignore[arg-type]
            return True
    return False


def set_abstains(answer_set: AnswerSet) -> bool:
    """True when the set is empty or holds only "I don't know" answers.

    Examples
    --------
    >>> set_abstains([]), set_abstains(["I don't know", "unknown"]), set_abstains(["I don't know", "Paris"])
    (True, True, False)
    """
    for item in answer_set:
        if isinstance(item, AnswerCluster):
            if not item.abstention:
                return False
        elif not is_abstention(item):
            return False
    return True


@dataclass(frozen=True)
class AnswerSetMetrics:
    """Metrics of one question's answer set."""

    covered: bool
    covered_exact: bool
    sizes: SetSizes
    abstains: bool
    hallucinates: bool


def evaluate_answer_set(
    answer_set: AnswerSet,
    references: Sequence[str],
    *,
    threshold: float = DEFAULT_MATCH_THRESHOLD,
    rouge_tau: float = 0.7,
    method: Method = "rougeL",
    tau: float | None = None,
    embed: Callable[[list[str]], np.ndarray] | None = None,
) -> AnswerSetMetrics:
    """Coverage (ROUGE-1 and exact), sizes, abstention and hallucination of one set.

    Examples
    --------
    >>> m = evaluate_answer_set(["Lyon", "Nice"], ["Paris"])
    >>> m.covered, m.abstains, m.hallucinates
    (False, False, True)
    >>> evaluate_answer_set(["I don't know"], ["Paris"]).hallucinates
    False
    """
    covered = set_covers(answer_set, references, match="rouge1", threshold=threshold)
    covered_exact = set_covers(answer_set, references, match="exact")
    abstains = set_abstains(answer_set)
    return AnswerSetMetrics(
        covered=covered,
        covered_exact=covered_exact,
        sizes=set_sizes(answer_set, rouge_tau=rouge_tau, method=method, tau=tau, embed=embed),
        abstains=abstains,
        hallucinates=(not abstains) and not covered,
    )


@dataclass(frozen=True)
class AnswerSetReport:
    """Averages over test questions (coverage, TRAC's four sizes, error split)."""

    n: int
    coverage: float
    coverage_exact: float
    ans: float
    ext: float
    rou: float
    sem: float
    abstention_rate: float
    hallucination_rate: float

    def as_dict(self) -> dict[str, float | int]:
        """JSON-ready dict."""
        return asdict(self)


def evaluate_answer_sets(
    answer_sets: Sequence[AnswerSet],
    references: Sequence[Sequence[str]],
    *,
    threshold: float = DEFAULT_MATCH_THRESHOLD,
    rouge_tau: float = 0.7,
    method: Method = "rougeL",
    tau: float | None = None,
    embed: Callable[[list[str]], np.ndarray] | None = None,
) -> AnswerSetReport:
    """Average :func:`evaluate_answer_set` over questions.

    Examples
    --------
    >>> r = evaluate_answer_sets([["Paris", "Lyon"], ["I don't know"], ["Rome"]], [["Paris"], ["Oslo"], ["Bern"]])
    >>> r.coverage, r.abstention_rate, r.hallucination_rate, r.ans
    (0.333..., 0.333..., 0.333..., 1.333...)
    """
    if len(answer_sets) != len(references):
        raise ConformalError(f"Got {len(answer_sets)} answer sets but {len(references)} reference lists.")
    if not answer_sets:
        raise ConformalError("No answer sets to evaluate.")
    rows = [
        evaluate_answer_set(s, r, threshold=threshold, rouge_tau=rouge_tau, method=method, tau=tau, embed=embed)
        for s, r in zip(answer_sets, references, strict=True)
    ]
    return AnswerSetReport(
        n=len(rows),
        coverage=float(np.mean([m.covered for m in rows])),
        coverage_exact=float(np.mean([m.covered_exact for m in rows])),
        ans=float(np.mean([m.sizes.ans for m in rows])),
        ext=float(np.mean([m.sizes.ext for m in rows])),
        rou=float(np.mean([m.sizes.rou for m in rows])),
        sem=float(np.mean([m.sizes.sem for m in rows])),
        abstention_rate=float(np.mean([m.abstains for m in rows])),
        hallucination_rate=float(np.mean([m.hallucinates for m in rows])),
    )
