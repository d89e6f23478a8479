"""Greedy semantic clustering of sampled answers (TRAQ's Monte Carlo confidence).

An answer joins the first cluster whose representative (first answer) is equivalent:
ROUGE-L/ROUGE-1 F1 ``>= tau`` (default 0.7, as TRAQ), equal SQuAD-normalised text
(``"exact"``), embedding cosine ``>= tau`` (default 0.9), or a callable
``equivalent(representative, answer)`` (e.g. bidirectional NLI entailment). Equal normalised
texts are always equivalent; abstentions form one cluster of their own.

Confidence is ``count / M`` (``score="frequency"``; nonconformity ``-confidence``), which ties
at ``M + 1`` values; ``score="likelihood"`` uses ``(count + rho / 2) / (M + 1)`` with ``rho``
the geometric-mean token probability, which only breaks ties between equal counts. Both are
fixed functions of the samples, so both calibrate validly.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from .errors import ConformalError
from .normalize import is_abstention, normalize_answer

Equivalence = Callable[[str, str], bool]
"""A pluggable equivalence test ``equivalent(representative, answer) -> bool``."""

Method = str | Equivalence
CLUSTER_METHODS: tuple[str, ...] = ("rougeL", "rouge1", "exact", "embedding")
GENERATOR_SCORES: tuple[str, ...] = ("frequency", "likelihood")
"""Cluster confidence: sample frequency (TRAQ), or frequency with ties broken by likelihood."""
_DEFAULT_TAU = {"rougeL": 0.7, "rouge1": 0.7, "embedding": 0.9}


@dataclass(frozen=True)
class Clustering:
    """How sampled answers are grouped: equivalence test, threshold, embedder and abstention test.

    Pass it as ``method=`` of :func:`cluster_answers` / :func:`merge_clusters` (``tau=`` and
    ``embed=`` are the short form). ``tau`` defaults to 0.7 (ROUGE) or 0.9 (embedding cosine).

    Examples
    --------
    >>> unsure = Clustering("exact", abstention=lambda a: not a or a.strip().lower() in ("?", "no idea"))
    >>> [(c.representative, c.abstention) for c in cluster_answers(["Paris", "no idea", "?"], method=unsure)]
    [('no idea', True), ('Paris', False)]
    """

    method: Method = "rougeL"
    tau: float | None = None
    embed: Callable[[list[str]], np.ndarray] | None = None
    abstention: Callable[[str | None], bool] = is_abstention


def _clustering(method: Method | Clustering, tau: float | None, embed: Callable | None) -> Clustering:
    """``method`` as a :class:`Clustering` (``tau`` and ``embed`` go inside it when it is one already)."""
    if isinstance(method, Clustering):
        if tau is not None or embed is not None:
            raise ConformalError("Pass tau and embed inside the Clustering given as method=, not beside it.")
        return method
    return Clustering(method, tau, embed)


@dataclass(frozen=True)
class AnswerCluster:
    """A cluster of equivalent sampled answers; the representative is its first member.

    ``confidence`` is ``count / M`` for one chunk, the best over the supporting chunks after
    :func:`merge_clusters`; ``support`` holds ``(chunk id, confidence)`` pairs, best first.

    Examples
    --------
    >>> c = AnswerCluster("Paris", ("Paris", "paris."), 0.2)
    >>> c.count, c.score, c.normalized
    (2, -0.2, 'paris')
    """

    representative: str
    members: tuple[str, ...]
    confidence: float
    abstention: bool = False
    support: tuple[tuple[str, float], ...] = ()
    likelihood: float | None = None

    @property
    def count(self) -> int:
        """Number of sampled answers in the cluster."""
        return len(self.members)

    @property
    def score(self) -> float:
        """Nonconformity score ``-confidence`` (lower conforms better)."""
        return -self.confidence

    @property
    def normalized(self) -> str:
        """SQuAD-normalised representative."""
        return normalize_answer(self.representative)

    @property
    def chunk_ids(self) -> tuple[str, ...]:
        """Ids of the chunks whose generator sets contain this answer."""
        return tuple(cid for cid, _ in self.support)


class _Tokenizer:
    """rouge-score tokenizer on SQuAD-normalised text (keeps non-ASCII letters)."""

    def tokenize(self, text: str) -> list[str]:
        return normalize_answer(text).split()


@functools.lru_cache(maxsize=4)
def _scorer(rouge_type: str):  # pragma: no cover - trivial cache
    from rouge_score import rouge_scorer

    return rouge_scorer.RougeScorer([rouge_type], tokenizer=_Tokenizer())


@functools.lru_cache(maxsize=1 << 16)
def rouge_f1(a: str, b: str, rouge_type: str = "rouge1") -> float:
    """Symmetric ROUGE F1 on SQuAD-normalised tokens; 0 when either side normalises to empty.

    A whitespace tokenizer on :func:`normalize_answer` output, so non-ASCII answers are compared too.

    Examples
    --------
    >>> rouge_f1("the Eiffel Tower", "Eiffel Tower in Paris")
    0.666...
    """
    if not normalize_answer(a) or not normalize_answer(b):
        return 0.0
    return float(_scorer(rouge_type).score(a, b)[rouge_type].fmeasure)


class _Matcher:
    """Equivalence over a fixed list of texts, by index (embeddings are computed once)."""

    def __init__(self, texts: Sequence[str], method: Method, tau: float | None, embed) -> None:
        self.texts = list(texts)
        self.norm = [normalize_answer(t) for t in self.texts]
        self.method = method
        if callable(method):
            self.tau = float("nan")
        elif method in CLUSTER_METHODS:
            self.tau = float(_DEFAULT_TAU.get(method, 1.0) if tau is None else tau)
            if method != "exact" and not (0.0 <= self.tau <= 1.0):
                raise ConformalError(f"tau must lie in [0, 1], got {tau!r}.")
        else:
            raise ConformalError(
                f"Unknown clustering method {method!r}; choose one of {', '.join(CLUSTER_METHODS)} "
                "or pass a callable equivalent(a, b) -> bool."
            )
        self.unit: np.ndarray | None = None
        if method == "embedding":
            if embed is None:
                raise ConformalError("method='embedding' needs embed=callable(list[str]) -> array of shape (n, d).")
            self.unit = self._embed(embed)

    def _embed(self, embed) -> np.ndarray:
        if not self.texts:
            return np.zeros((0, 1))
        vecs = np.asarray(embed(list(self.texts)), dtype=float)
        if vecs.ndim != 2 or vecs.shape[0] != len(self.texts):
            raise ConformalError(f"embed() must return an array of shape ({len(self.texts)}, d), got {vecs.shape}.")
        norms = np.linalg.norm(vecs, axis=1, keepdims=True)
        return np.divide(vecs, norms, out=np.zeros_like(vecs), where=norms > 0)

    def same(self, i: int, j: int) -> bool:
        if self.norm[i] == self.norm[j]:
            return True
        method = self.method
        if callable(method):
            return bool(method(self.texts[i], self.texts[j]))
        if method == "exact":
            return False
        if method == "embedding":
            assert self.unit is not None
            return bool(float(self.unit[i] @ self.unit[j]) >= self.tau)
        return rouge_f1(self.texts[i], self.texts[j], method) >= self.tau


def _greedy(texts: Sequence[str], abstain: Sequence[bool], method: Method, tau: float | None, embed) -> list[list[int]]:
    """Greedy clustering by index; abstentions form one cluster of their own."""
    real = [i for i, a in enumerate(abstain) if not a]
    matcher = _Matcher([texts[i] for i in real], method, tau, embed)
    groups: list[list[int]] = []
    reps: list[int] = []  # local index (into real) of each real group's representative
    abst_group: list[int] | None = None
    local = {i: k for k, i in enumerate(real)}
    for i in range(len(texts)):
        if abstain[i]:
            if abst_group is None:
                abst_group = [i]
                groups.append(abst_group)
                reps.append(-1)
            else:
                abst_group.append(i)
            continue
        li = local[i]
        for g, rep in zip(groups, reps, strict=True):
            if rep >= 0 and matcher.same(rep, li):
                g.append(i)
                break
        else:
            groups.append([i])
            reps.append(li)
    return groups


def cluster_answers(
    answers: Sequence[str | None],
    *,
    method: Method | Clustering = "rougeL",
    tau: float | None = None,
    embed: Callable[[list[str]], np.ndarray] | None = None,
    n_samples: int | None = None,
    chunk_id: str | None = None,
    logprobs: Sequence[float | None] | None = None,
    score: str = "frequency",
) -> list[AnswerCluster]:
    """Cluster the ``M`` sampled answers of one (question, chunk) pair, most confident first.

    ``None`` (a failed sample) is an abstention; ``n_samples`` (``M``) defaults to ``len(answers)``;
    ``score="likelihood"`` needs ``logprobs`` (mean token log-probability) for every non-empty answer.
    Ties by first appearance.

    Examples
    --------
    >>> cl = cluster_answers(["Paris", "paris.", "In Paris", "Lyon", "I don't know"], method="exact")
    >>> [(c.representative, c.count, c.confidence) for c in cl]
    [('Paris', 2, 0.4), ('In Paris', 1, 0.2), ('Lyon', 1, 0.2), ("I don't know", 1, 0.2)]
    >>> cl = cluster_answers(["Lyon", "Paris", "Nice"], method="exact", logprobs=[-2.0, -0.1, -3.0], score="likelihood")
    >>> [(c.representative, round(c.confidence, 3)) for c in cl]
    [('Paris', 0.363), ('Lyon', 0.267), ('Nice', 0.256)]
    """
    rule = _clustering(method, tau, embed)
    texts = ["" if a is None else str(a).strip() for a in answers]
    m = len(texts) if n_samples is None else int(n_samples)
    if m < len(texts) or m < 1:
        raise ConformalError(f"n_samples (M = {m}) must be >= 1 and >= the {len(texts)} answers given.")
    abstain = [rule.abstention(a) for a in answers]
    lps = _check_logprobs(texts, logprobs, score)
    groups = _greedy(texts, abstain, rule.method, rule.tau, rule.embed)
    clusters = []
    for g in groups:
        rho = _likelihood([lps[i] for i in g])
        conf = len(g) / m if score == "frequency" else (len(g) + 0.5 * (rho or 0.0)) / (m + 1)
        clusters.append(
            AnswerCluster(
                representative=texts[g[0]],
                members=tuple(texts[i] for i in g),
                confidence=conf,
                abstention=abstain[g[0]],
                support=() if chunk_id is None else ((str(chunk_id), conf),),
                likelihood=rho,
            )
        )
    order = sorted(range(len(clusters)), key=lambda k: (-clusters[k].confidence, groups[k][0]))
    return [clusters[k] for k in order]


def _check_logprobs(texts: Sequence[str], logprobs: Sequence[float | None] | None, score: str) -> list[float | None]:
    if score not in GENERATOR_SCORES:
        raise ConformalError(f"score must be one of {GENERATOR_SCORES}, got {score!r}.")
    if logprobs is None:
        lps: list[float | None] = [None] * len(texts)
    else:
        lps = [None if v is None else float(v) for v in logprobs]
        if len(lps) != len(texts):
            raise ConformalError(f"Got {len(lps)} logprobs for {len(texts)} answers.")
        if any(v is not None and (math.isnan(v) or v > 1e-9) for v in lps):
            raise ConformalError("logprobs must be mean token log-probabilities (<= 0, not NaN).")
    if score == "likelihood":
        missing = [t for t, v in zip(texts, lps, strict=True) if t and v is None]
        if missing:
            raise ConformalError(
                f"score='likelihood' needs the token log-probability of every sampled answer, but {len(missing)} "
                f"answer(s) came without one (e.g. {missing[0]!r}): the LLM does not report logprobs. Enable them "
                "(the bundled model: conformal_rag_plugins.local.llamaindex_llm(logprobs=True) or "
                "langchain_llm(logprobs=True); OpenAI: logprobs=True), or calibrate with the frequency score."
            )
    return lps


def _likelihood(logprobs: Sequence[float | None]) -> float | None:
    """Geometric-mean token probability of a cluster's samples (``None`` when none is known)."""
    known = [v for v in logprobs if v is not None]
    return float(math.exp(min(0.0, sum(known) / len(known)))) if known else None


def merge_clusters(
    per_chunk: Mapping[str, Sequence[AnswerCluster]] | Iterable[tuple[str, Sequence[AnswerCluster]]],
    *,
    method: Method | Clustering = "rougeL",
    tau: float | None = None,
    embed: Callable[[list[str]], np.ndarray] | None = None,
) -> list[AnswerCluster]:
    """Union of per-chunk answer sets (in retrieval order), de-duplicated by re-clustering.

    Each per-chunk cluster is an item, visited by decreasing confidence (ties: chunk then cluster
    order), joining the first equivalent merged cluster (abstentions only with abstentions; a
    :class:`Clustering`'s ``abstention`` is not used). A merged cluster keeps its most confident
    item's representative, the best confidence, all members and each chunk's best confidence.

    Examples
    --------
    >>> a = cluster_answers(["Paris", "Paris", "Lyon"], method="exact", chunk_id="c1")
    >>> b = cluster_answers(["paris", "Paris.", "Paris", "Nice"], method="exact", chunk_id="c2")
    >>> merged = merge_clusters({"c1": a, "c2": b}, method="exact")
    >>> [(m.representative, m.confidence, m.chunk_ids) for m in merged]
    [('paris', 0.75, ('c2', 'c1')), ('Lyon', 0.333..., ('c1',)), ('Nice', 0.25, ('c2',))]
    """
    pairs = list(per_chunk.items()) if isinstance(per_chunk, Mapping) else list(per_chunk)
    items: list[tuple[str, AnswerCluster]] = [(str(cid), c) for cid, clusters in pairs for c in clusters]
    order = sorted(range(len(items)), key=lambda k: -items[k][1].confidence)  # stable: chunk order on ties
    items = [items[k] for k in order]
    texts = [c.representative for _, c in items]
    abstain = [c.abstention for _, c in items]
    rule = _clustering(method, tau, embed)
    groups = _greedy(texts, abstain, rule.method, rule.tau, rule.embed)
    merged = []
    for g in groups:
        best: dict[str, float] = {}
        for k in g:
            cid, c = items[k]
            best[cid] = max(best.get(cid, -np.inf), c.confidence)
        support = tuple(sorted(best.items(), key=lambda kv: -kv[1]))
        head = items[g[0]][1]
        merged.append(
            AnswerCluster(
                representative=head.representative,
                members=tuple(m for k in g for m in items[k][1].members),
                confidence=max(items[k][1].confidence for k in g),
                abstention=head.abstention,
                support=support,
                likelihood=max((items[k][1].likelihood for k in g if items[k][1].likelihood is not None), default=None),
            )
        )
    return merged  # groups start at decreasing-confidence items, so this is already sorted
