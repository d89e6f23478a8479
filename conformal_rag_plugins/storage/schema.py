"""The field-by-field schema of a saved calibration file, checked on every load.

Anybody can recompute the checksum (only a signature proves a file unchanged), so these models
check each field's type and range and that fields recording the same fact agree (``n`` and the
scores, misses and ``+inf`` scores, the alpha split, gold ranks and ``pool_size``, ``selection``
with family, pool and fingerprint): a hand-edited file is refused unless every such field was
changed. The calibration classes' ``from_dict`` then recompute the thresholds from the scores.
Schema 2 retrieval files always write ``corpus`` and ``gold_ranks`` (``null`` when unknown);
version 1 files load under their own rules.

Examples
--------
>>> check_fields(RetrievalFile, {"kind": "x"}, "retrieval calibration")
Traceback (most recent call last):
...
conformal_rag_plugins.core.errors.CalibrationIntegrityError: The retrieval calibration has invalid fields: ...
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Annotated, Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from ..core.clustering import CLUSTER_METHODS, GENERATOR_SCORES
from ..core.errors import CalibrationIntegrityError
from ..core.retrieval_scores import SCORE_FAMILIES

Finite = Annotated[float, Field(allow_inf_nan=False)]
Level = Annotated[float, Field(gt=0.0, lt=1.0, allow_inf_nan=False)]
Score = Finite | Literal["+inf", "inf"]
Threshold = Finite | Literal["+inf", "inf", "-inf"]
Text = Annotated[str, Field(min_length=1)]
Checksum = Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]
MissShare = Annotated[float, Field(ge=0.0, lt=1.0, allow_inf_nan=False)]

_M = TypeVar("_M", bound=BaseModel)


def _is_inf(x: float | str) -> bool:
    return isinstance(x, str) and x in ("+inf", "inf")


class _Strict(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)


class FingerprintFile(_Strict):
    """The ``fingerprint`` block: what the threshold is tied to."""

    framework: Text
    store: Text
    distance: Text
    embedding_model: Text
    embedding_dim: Annotated[int, Field(ge=1)] | None
    score_scale: Text
    retriever: Text = "dense"


class ClusteringFile(BaseModel):
    """The ``clustering`` block of an answer-set calibration (extra keys allowed)."""

    model_config = ConfigDict(strict=True, extra="allow", frozen=True)

    method: Literal[CLUSTER_METHODS] = "rougeL"  # type: ignore[valid-type]
    tau: Annotated[float, Field(gt=0.0, le=1.0, allow_inf_nan=False)] | None = None
    score: Literal[GENERATOR_SCORES] = "frequency"  # type: ignore[valid-type]


class IdsFilterFile(_Strict):
    """The Bloom filter of the collection's ids (:mod:`~conformal_rag_plugins.retrieval.corpus_filter`)."""

    bits: Annotated[int, Field(ge=64, le=8 * 1024 * 1024, multiple_of=8)]
    hashes: Annotated[int, Field(ge=1, le=16)]
    data: Annotated[str, Field(pattern=r"^[A-Za-z0-9+/]*={0,2}$")]

    @model_validator(mode="after")
    def _length(self) -> IdsFilterFile:
        if len(self.data) != 4 * -(-self.bits // 8 // 3):
            raise ValueError(f"data holds {len(self.data)} base64 characters, not the {self.bits} bits it says")
        return self


class CorpusFile(_Strict):
    """The ``corpus`` block: size and id digest of the collection at calibration time.

    ``ids_filter`` (absent in older files) lets a postprocessor tell a chunk that was not in it."""

    size: Annotated[int, Field(ge=0)]
    ids_sha256: Checksum
    ids_filter: IdsFilterFile | None = None


class EmbeddingIdentityFile(_Strict):
    """The ``generator.embedding`` block: the embedding model answers were clustered with."""

    model: Text
    dim: Annotated[int, Field(ge=1)] | None = None


class GeneratorFile(_Strict):
    """The ``generator`` block of an answer-set calibration: what its generator threshold is tied to.

    ``llm`` (names the model) and ``sampling`` (``n_samples``, the prompt) are compared key by key at
    query time, so they may hold any JSON.
    """

    llm: dict[str, Any]
    sampling: dict[str, Any]
    embedding: EmbeddingIdentityFile | None = None

    @model_validator(mode="after")
    def _named(self) -> GeneratorFile:
        problems = [f"llm.{k} missing or not text" for k in ("class", "name") if not _text(self.llm.get(k))]
        n = self.sampling.get("n_samples")
        if not (isinstance(n, int) and not isinstance(n, bool) and n >= 1):
            problems.append(f"sampling.n_samples must be an integer >= 1 (got {n!r})")
        digest = self.sampling.get("prompt_sha256")
        if digest is not None and not (isinstance(digest, str) and re.fullmatch(r"[0-9a-f]{64}", digest)):
            problems.append(f"sampling.prompt_sha256 is not a SHA-256 (got {digest!r})")
        if problems:
            raise ValueError("; ".join(problems))
        return self


def _text(x: Any) -> bool:
    return isinstance(x, str) and bool(x)


class GroupFile(_Strict):
    """One entry of the ``groups`` block of a per-group (Mondrian) retrieval calibration."""

    n: Annotated[int, Field(ge=1)]
    threshold: Threshold
    source: Literal["group", "keep-all-small-group", "pooled-small-group"]


class RetrievalFile(_Strict):
    """A saved :class:`~conformal_rag_plugins.retrieval.calibration.RetrievalCalibration`."""

    kind: Literal["conformal_rag_plugins.retrieval_calibration"]
    schema_version: Literal[1, 2]
    alpha: Level
    confidence_level: Level
    method: Literal["split", "pac"] | Literal["crc", "ltt"]  # miscoverage | recall (risk)
    epsilon: Level | None = None
    delta: Level | None = None
    n: Annotated[int, Field(ge=1)]
    n_misses: Annotated[int, Field(ge=0)]
    threshold: Threshold
    score_family: Literal[SCORE_FAMILIES]  # type: ignore[valid-type]
    pool_size: Annotated[int, Field(ge=1)]
    scores: list[Score]
    fingerprint: FingerprintFile
    created_at: Text
    selection: dict[str, Any] = Field(default_factory=dict)
    labels: dict[str, Any] = Field(default_factory=dict)
    question_ids: list[Text] = Field(default_factory=list)
    corpus: CorpusFile | None = None
    gold_ranks: list[Annotated[int, Field(ge=1)] | None] | None = None
    checksum: Checksum | None = None
    signature: Checksum | None = None
    group_by: Text | None = None
    groups: dict[Text, GroupFile] | None = None
    group_labels: list[Text] | None = None
    group_fallback: Literal["keep_all", "pooled"] | None = None  # absent in older files: "pooled"
    chunk_group_key: Text | None = None  # label-conditional groups (of the gold chunk); absent: per query
    group_questions: list[str] | None = None  # grouped by a function: its inputs, to check it at query time
    group_example_ids: list[str | None] | None = None  # their example ids: each question gives its digest
    #: Written beside the groups since 2026-11-28: whose groups they are, so that a removed ``chunk_group_key``
    #: (per-chunk-group thresholds read as per-query ones) is refused. Older files do not have it.
    grouping: Literal["query", "chunk"] | None = None
    #: Written beside ``selection`` since 2026-11-29: how many questions tuned the host or chose the family
    #: (0: none), so that an emptied ``selection`` is refused. Older files do not have it.
    n_optimisation: Annotated[int, Field(ge=0)] | None = None
    risk: Literal["miscoverage", "recall"] = "miscoverage"
    gold_scores: list[Annotated[list[Score], Field(min_length=1)]] | None = None
    # absent in files saved before it: the plain rank
    threshold_rule: Literal["pool-miss-2", "pool-miss-1"] | None = None
    miss_bound: Annotated[float, Field(ge=0.0, lt=1.0)] | None = None

    @model_validator(mode="after")
    def _agree(self) -> RetrievalFile:
        problems = []
        if len(self.scores) != self.n:
            problems.append(f"n = {self.n} but {len(self.scores)} scores are stored")
        misses = sum(1 for s in self.scores if _is_inf(s))
        if misses != self.n_misses:
            problems.append(f"n_misses = {self.n_misses} but {misses} stored scores are +inf")
        if abs(self.confidence_level - (1.0 - self.alpha)) > 1e-9:
            problems.append(f"confidence_level = {self.confidence_level} is not 1 - alpha = {1 - self.alpha}")
        if self.miss_bound is not None and self.miss_bound >= self.alpha:
            problems.append(f"miss_bound = {self.miss_bound} is not below alpha = {self.alpha}")
        if self.method == "pac":
            if self.delta is None:
                problems.append("method 'pac' without delta")
            if self.epsilon is not None and abs(self.epsilon - self.alpha) > 1e-12:
                problems.append(f"epsilon = {self.epsilon} differs from alpha = {self.alpha}")
        elif self.method == "ltt":
            if self.delta is None:
                problems.append("method 'ltt' without delta")
            if self.epsilon is not None:
                problems.append("method 'ltt' with a PAC epsilon")
        elif self.delta is not None or self.epsilon is not None:
            problems.append(f"method {self.method!r} with a PAC delta or epsilon")
        problems.extend(_risk_problems(self))
        problems.extend(_required_problems(self))
        scores = [math.inf if _is_inf(s) else float(s) for s in self.scores]
        problems.extend(
            record_problems(scores, self.pool_size, self.score_family, self.gold_ranks or (), self.question_ids)
        )
        problems.extend(family_problems(scores, self.score_family, self.gold_ranks or (), self.pool_size))
        if self.threshold == "-inf":
            problems.append("threshold -inf")
        problems.extend(_group_problems(self))
        problems.extend(_selection_problems(self))
        problems.extend(_optimisation_id_problems(self.selection, self.question_ids))
        problems.extend(_fingerprint_pool_problems(self.fingerprint.retriever, self.pool_size))
        if problems:
            raise ValueError("; ".join(problems))
        return self


#: Fields a version-2 retrieval calibration always writes (``null`` when unknown).
_REQUIRED_SINCE_2 = {
    "corpus": "the digest of the collection it was calibrated on, null when the host could not list its ids",
    "gold_ranks": "the rank of each calibration question's gold chunk in its pool, null when never recorded",
}


def _required_problems(f: RetrievalFile) -> list[str]:
    """A version-2 file lacking a field version 2 always writes had it removed.

    A version-1 file holding ``gold_ranks`` or a ``null`` corpus (never written by version 1) had its version edited.
    """
    if f.schema_version < 2:
        wrong = [name for name in ("gold_ranks",) if name in f.model_fields_set]
        wrong += ["corpus"] if "corpus" in f.model_fields_set and f.corpus is None else []
        return [f"{name}: schema version 1 never wrote this field as stored; the version was edited" for name in wrong]
    return [
        f"{name}: missing ({why}); a file saved by this version always has it, so it was removed. Re-run the "
        "calibration (calibrate_retriever, or conformal-rag calibrate) to regenerate the file"
        for name, why in _REQUIRED_SINCE_2.items()
        if name not in f.model_fields_set
    ]


def record_problems(
    scores: Sequence[float],
    pool_size: int,
    score_family: str,
    gold_ranks: Sequence[int | None],
    question_ids: Sequence[str],
) -> list[str]:
    """Disagreements between the per-question records, ``pool_size`` and ``score_family``.

    A gold rank is the 1-based position of the best gold in a pool of at most ``pool_size``, ``None``
    for a miss (score ``+inf``). A ``rank`` score is that rank; a ``relative`` score (top minus gold)
    is never negative and 0 when the gold is first. Recorded question ids are distinct, one per score.

    Examples
    --------
    >>> record_problems([1.0, 2.0, math.inf], 1, "rank", [1, 2, None], ["a", "b", "c"])
    ['gold_ranks: question 1 has gold rank 2 but pool_size is 1', 'scores: question 1 has rank 2.0 but pool_size is 1']
    """
    problems = []
    n = len(scores)
    if gold_ranks:
        if len(gold_ranks) != n:
            problems.append(f"gold_ranks: {len(gold_ranks)} gold ranks for n = {n} scores")
        for i, (rank, score) in enumerate(zip(gold_ranks, scores, strict=False)):
            if rank is None and not math.isinf(score):
                problems.append(f"gold_ranks: question {i} is recorded as a miss but its score {score!r} is finite")
            elif rank is not None and math.isinf(score):
                problems.append(f"gold_ranks: question {i} has gold rank {rank} but its score is +inf (a miss)")
            elif rank is not None and rank > pool_size:
                problems.append(f"gold_ranks: question {i} has gold rank {rank} but pool_size is {pool_size}")
            elif rank is not None and score_family == "rank" and rank != score:
                problems.append(f"gold_ranks: question {i} has gold rank {rank} but its rank score is {score!r}")
            elif rank == 1 and score_family == "relative" and score != 0.0:
                problems.append(f"gold_ranks: question {i} has its gold ranked first but a relative score {score!r}")
            if len(problems) >= 3:
                break
    if score_family == "rank":
        bad = [(i, s) for i, s in enumerate(scores) if math.isfinite(s) and (s != int(s) or not 1 <= s <= pool_size)]
        problems.extend(f"scores: question {i} has rank {s!r} but pool_size is {pool_size}" for i, s in bad[:3])
    if score_family == "relative":  # the top score minus the gold's, never negative
        bad = [(i, s) for i, s in enumerate(scores) if s < 0.0]
        problems.extend(f"scores: question {i} has relative score {s!r} < 0" for i, s in bad[:3])
    if question_ids:
        if len(question_ids) != n:
            problems.append(f"{len(question_ids)} question ids for n = {n} scores")
        seen: set[str] = set()
        dup = next((q for q in question_ids if q in seen or seen.add(q)), None)  # type: ignore[func-returns-value]
        if dup is not None:
            problems.append(f"question_ids: {dup!r} appears more than once; calibration questions are distinct")
    return problems


def family_problems(
    scores: Sequence[float], score_family: str, gold_ranks: Sequence[int | None], pool_size: int
) -> list[str]:
    """A ``similarity`` file whose scores are another family's: its ``score_family`` was edited.

    A threshold means nothing on another family's scale (a relative threshold of 0.016 served as a
    similarity one keeps almost every candidate), and the threshold recomputed from the scores does not
    depend on the family, so only the scores can tell. A ``relative`` score is 0 exactly when the gold is
    ranked first, a ``rank`` score is the gold rank; a similarity score is ``-s_gold``, which is neither
    for every question of a real host. The other edits (to ``rank`` or ``relative``) fail
    :func:`record_problems`. Two or more questions are needed to tell.

    Examples
    --------
    >>> family_problems([0.0, 0.2, 0.0], "similarity", [1, 3, 1], 5)[0][:58]
    "score_family is 'similarity' but every question whose gold"
    >>> family_problems([-0.9, -0.7, -0.8], "similarity", [1, 3, 1], 5)
    []
    """
    if score_family != "similarity":
        return []
    values = [s for s in scores if math.isfinite(s)]
    if gold_ranks and len(gold_ranks) == len(scores):
        first = [s for s, r in zip(scores, gold_ranks, strict=True) if r == 1]
        if len(first) >= 2 and all(s == 0.0 for s in first):
            return [
                "score_family is 'similarity' but every question whose gold is ranked first has score 0, as a "
                "'relative' score (top minus gold) has: the family was edited, and its threshold is on another scale"
            ]
        ranked = [(s, r) for s, r in zip(scores, gold_ranks, strict=True) if r is not None]
        if len({r for _, r in ranked}) >= 2 and all(s == r for s, r in ranked):
            return [
                "score_family is 'similarity' but every score equals its gold rank, as a 'rank' score does: the "
                "family was edited, and its threshold is on another scale"
            ]
        return []
    zeros = sum(1 for s in values if s == 0.0)
    if zeros >= 2 and min(values) >= 0.0:
        return [
            f"score_family is 'similarity' but {zeros} of {len(values)} scores are exactly 0 and none is negative, "
            "as 'relative' scores (top minus gold) are: the family was edited, and its threshold is on another scale"
        ]
    if len(set(values)) >= 2 and all(s == int(s) and 1 <= s <= pool_size for s in values):
        return [
            f"score_family is 'similarity' but every score is a whole number from 1 to pool_size = {pool_size}, as "
            "'rank' scores are: the family was edited, and its threshold is on another scale"
        ]
    return []


#: LlamaIndex fusion modes under the tuned-hybrid names.
_FUSION_MODE_NAMES = {"dist_based_score": "zscore", "relative_score": "minmax"}


def _fingerprint_pool_problems(retriever: str, pool_size: int) -> list[str]:
    """The pool a fusion fingerprint names agrees with ``pool_size``.

    A LlamaIndex fusion host's ``similarity_top_k`` (``top_k=``) must equal the pool; a LangChain
    hybrid host's ``k`` may exceed it (extra candidates are cut), never fall short.
    """
    if retriever.startswith("fusion("):
        found = re.search(r"[(,]top_k=(\d+)[,)]", retriever)
        if found and int(found.group(1)) != pool_size:
            return [f"pool_size = {pool_size} but the fingerprint's retriever returns top_k={found.group(1)}"]
    elif retriever.startswith("hybrid("):
        found = re.search(r"[(,]k=(\d+)[,)]", retriever)
        if found and int(found.group(1)) < pool_size:
            return [f"pool_size = {pool_size} but the fingerprint's retriever returns only k={found.group(1)}"]
    return []


def _fingerprint_fusion(retriever: str) -> tuple[str, float] | None:
    """``(method, dense weight)`` named by a fusion fingerprint, or ``None`` when it names none."""
    lc = re.match(r"hybrid\(method=(\w+),weight=([0-9.eE+-]+)[,)]", retriever)
    if lc:
        return lc.group(1), float(lc.group(2))
    li = re.match(r"fusion\(mode=(\w+),weights=([0-9.eE+-]+)[,)]", retriever)
    if li:
        return _FUSION_MODE_NAMES.get(li.group(1), li.group(1)), float(li.group(2))
    return None


def _same_weight(stored: Any, named: float) -> bool:
    """``stored`` is a number equal to ``named`` up to the 6 digits a fingerprint prints."""
    return not isinstance(stored, bool) and isinstance(stored, int | float) and abs(stored - named) <= 1e-5


def _selection_problems(f: RetrievalFile) -> list[str]:
    """``selection`` (how ``auto`` or a tuned host chose) agrees with ``n_optimisation``, family, pool, fingerprint."""
    sel = f.selection
    rule = sel.get("rule")
    recorded = sel.get("n_optimisation") or 0
    problems = []
    if f.n_optimisation is not None and f.n_optimisation != recorded:
        problems.append(
            f"n_optimisation = {f.n_optimisation} but selection records {recorded} optimisation questions: selection "
            "was edited, and the questions that tuned the host would be counted as held out"
        )
    if rule not in ("auto", "tuned-hybrid"):
        return problems
    if "chosen" in sel and sel["chosen"] != f.score_family:
        problems.append(f"selection.chosen = {sel['chosen']!r} but score_family = {f.score_family!r}")
    n_opt = sel.get("n_optimisation")
    if "n_optimisation" in sel and (isinstance(n_opt, bool) or not isinstance(n_opt, int) or n_opt < 1):
        problems.append(f"selection.n_optimisation must be a whole number >= 1 (got {n_opt!r})")
    if rule != "tuned-hybrid":
        return problems
    if "pool_size" in sel and sel["pool_size"] != f.pool_size:
        problems.append(f"selection.pool_size = {sel['pool_size']!r} but pool_size = {f.pool_size}")
    if "pool_sizes" in sel and isinstance(sel["pool_sizes"], list) and f.pool_size not in sel["pool_sizes"]:
        problems.append(f"pool_size = {f.pool_size} is not among selection.pool_sizes = {sel['pool_sizes']!r}")
    unit = sel.get("unit")
    if isinstance(unit, str):
        at_parent = ">parent:" in f.fingerprint.retriever
        if (unit != "chunk") != at_parent or (at_parent and not f.fingerprint.retriever.endswith(">" + unit)):
            problems.append(f"selection.unit = {unit!r} but the fingerprint's retriever is {f.fingerprint.retriever!r}")
    fused = _fingerprint_fusion(f.fingerprint.retriever)
    method, weight = sel.get("fusion_method"), sel.get("dense_weight")
    if fused is not None and method is not None and method != fused[0]:
        problems.append(f"selection.fusion_method = {method!r} but the fingerprint names {fused[0]!r}")
    if fused is not None and weight is not None and not _same_weight(weight, fused[1]):
        problems.append(f"selection.dense_weight = {weight!r} but the fingerprint names {fused[1]:g}")
    return problems


def _optimisation_id_problems(selection: dict[str, Any], question_ids: Sequence[str]) -> list[str]:
    """``selection.optimisation_question_ids`` (optional): the distinct questions that tuned the host.

    Recorded only by rules tuning on an optimisation split (``auto``, ``tuned-hybrid``): at most
    ``n_optimisation`` ids (repeated questions recorded once), none a calibration question. Older files
    lack the field.

    Examples
    --------
    >>> _optimisation_id_problems({"rule": "auto", "n_optimisation": 2, "optimisation_question_ids": ["a"]}, ["b"])
    []
    >>> _optimisation_id_problems({"rule": "auto", "n_optimisation": 1, "optimisation_question_ids": ["a"]}, ["a"])
    ["selection.optimisation_question_ids: 'a' is also a calibration question; the two splits are disjoint"]
    """
    if "optimisation_question_ids" not in selection:
        return []
    if selection.get("rule") not in ("auto", "tuned-hybrid"):
        return ["selection.optimisation_question_ids without a rule that tunes on an optimisation split"]
    return _id_list_problems("selection", selection, question_ids)


def _id_list_problems(where: str, record: dict[str, Any], question_ids: Sequence[str]) -> list[str]:
    """``record["optimisation_question_ids"]``: distinct digests, at most ``n_optimisation``, no calibration one.

    Examples
    --------
    >>> _id_list_problems("optimisation", {"n_optimisation": 2, "optimisation_question_ids": ["a", "a"]}, [])
    ['optimisation.optimisation_question_ids repeats a question']
    """
    ids = record["optimisation_question_ids"]
    name = f"{where}.optimisation_question_ids"
    if not isinstance(ids, list) or not all(isinstance(q, str) and q for q in ids):
        return [f"{name} must be a list of non-empty question digests"]
    problems = []
    n_opt = record.get("n_optimisation")
    if not isinstance(n_opt, int) or isinstance(n_opt, bool) or len(ids) > n_opt:
        problems.append(f"{name} holds {len(ids)} ids for n_optimisation = {n_opt!r}")
    if len(set(ids)) != len(ids):
        problems.append(f"{name} repeats a question")
    both = next((q for q in ids if q in set(question_ids)), None)
    if both is not None:
        problems.append(f"{name}: {both!r} is also a calibration question; the two splits are disjoint")
    return problems


def _split_optimisation_problems(optimisation: dict[str, Any], question_ids: Sequence[str]) -> list[str]:
    """An answer-set file's ``optimisation.optimisation_question_ids`` (optional; older files lack it).

    The distinct questions whose Bayesian optimisation chose the split of alpha (or the HMP weight):
    at most ``n_optimisation``, none a calibration question of either stage.

    Examples
    --------
    >>> _split_optimisation_problems({"n_optimisation": 2, "optimisation_question_ids": ["a", "b"]}, ["c"])
    []
    >>> _split_optimisation_problems({"optimisation_question_ids": ["a"]}, ["c"])
    ['optimisation.optimisation_question_ids holds 1 ids for n_optimisation = None']
    """
    if "optimisation_question_ids" not in optimisation:
        return []
    return _id_list_problems("optimisation", optimisation, question_ids)


def _group_problems(f: RetrievalFile) -> list[str]:
    """The ``group_by``/``groups``/``group_labels`` fields agree with each other and with ``n``."""
    present = (f.group_by is not None, f.groups is not None, f.group_labels is not None)
    if not any(present):
        problems = [] if f.group_fallback is None else ["group_fallback without groups"]
        problems += [] if f.group_questions is None else ["group_questions without groups"]
        problems += [] if f.grouping is None else ["grouping without groups"]
        return problems + ([] if f.chunk_group_key is None else ["chunk_group_key without groups"])
    if not all(present):
        return ["group_by, groups and group_labels must be stored together"]
    assert f.groups is not None and f.group_labels is not None
    problems = []
    if f.grouping == "chunk" and f.chunk_group_key is None:
        problems.append(
            "grouping is 'chunk' but chunk_group_key is missing: the per-chunk-group thresholds would be served "
            "as per-query groups (the pooled threshold for a query without a group)"
        )
    elif f.grouping == "query" and f.chunk_group_key is not None:
        problems.append(f"grouping is 'query' but chunk_group_key is {f.chunk_group_key!r}")
    if f.chunk_group_key is not None and f.chunk_group_key != f.group_by:
        problems.append(f"chunk_group_key {f.chunk_group_key!r} differs from group_by {f.group_by!r}")
    if len(f.group_labels) != f.n:
        problems.append(f"{len(f.group_labels)} group labels for n = {f.n} scores")
    if f.group_questions is not None and len(f.group_questions) != f.n:
        problems.append(f"{len(f.group_questions)} group questions for n = {f.n} scores")
    counts: dict[str, int] = {}
    for g in f.group_labels:
        counts[g] = counts.get(g, 0) + 1
    if set(counts) != set(f.groups):
        problems.append(f"groups {sorted(f.groups)} are not the groups of group_labels {sorted(counts)}")
    else:
        problems.extend(
            f"group {g!r} stores n = {v.n} but {counts[g]} labels name it"
            for g, v in f.groups.items()
            if v.n != counts[g]
        )
    return problems


def _risk_problems(f: RetrievalFile) -> list[str]:
    """Disagreements between ``risk``, ``method`` and ``gold_scores`` (recall control)."""
    recall_method = f.method in ("crc", "ltt")
    if f.risk == "miscoverage":
        out = [f"method {f.method!r} controls recall but risk is 'miscoverage'"] if recall_method else []
        return out + (["gold_scores without risk 'recall'"] if f.gold_scores is not None else [])
    out = [] if recall_method else [f"risk 'recall' needs method 'crc' or 'ltt', not {f.method!r}"]
    if f.gold_scores is None or len(f.gold_scores) != f.n:
        out.append(f"risk 'recall' needs gold_scores for each of the n = {f.n} questions")
    return out


class AnswerSetFile(_Strict):
    """A saved ``AnswerSetCalibration``; its ``retrieval`` block is checked (:class:`RetrievalFile`) on rebuild."""

    kind: Literal["conformal_rag_plugins.answer_set_calibration"]
    schema_version: Literal[1]
    retrieval: dict[str, Any]
    generation_scores: Annotated[list[Score], Field(min_length=1)]
    alpha: Level
    method: Literal["bonferroni", "pac", "hmp"]
    alpha_retrieval: Level
    alpha_generation: Level
    delta: Level | None = None
    delta_retrieval: Level | None = None
    delta_generation: Level | None = None
    hmp_weight: Level | None = None
    retrieval_threshold: Threshold
    generation_threshold: Threshold
    coverage_ceiling: Annotated[float, Field(ge=0.0, le=1.0, allow_inf_nan=False)] | None = None
    n_samples: Annotated[int, Field(ge=1)]
    model: Text
    clustering: ClusteringFile
    created_at: Text
    optimisation: dict[str, Any] = Field(default_factory=dict)
    question_ids: list[Text] = Field(default_factory=list)
    guaranteed: bool | None = None
    checksum: Checksum | None = None
    signature: Checksum | None = None
    generator: GeneratorFile | None = None  # absent in older files: loaded with an UncheckedGeneratorWarning
    # a stage's pool-miss bound, written only when set (absent: half the stage's alpha, as older files)
    miss_bound_retrieval: MissShare | None = None
    miss_bound_generation: MissShare | None = None

    @model_validator(mode="after")
    def _agree(self) -> AnswerSetFile:
        problems = []
        for stage, bound, level in (("retrieval", self.miss_bound_retrieval, self.alpha_retrieval),
                                    ("generation", self.miss_bound_generation, self.alpha_generation)):  # fmt: skip
            if bound is not None and (self.method == "hmp" or bound >= level):
                problems.append(f"miss_bound_{stage} = {bound} needs method bonferroni or pac and alpha_{stage} > it")
        if self.generator is not None and self.generator.sampling.get("n_samples") != self.n_samples:
            problems.append(
                f"generator.sampling.n_samples = {self.generator.sampling.get('n_samples')!r} but n_samples = "
                f"{self.n_samples}"
            )
        if self.method == "hmp":
            if self.hmp_weight is None:
                problems.append("method 'hmp' without hmp_weight")
            elif abs(self.alpha_retrieval - self.alpha * self.hmp_weight / 2) > 1e-12:
                problems.append(
                    f"alpha_retrieval = {self.alpha_retrieval} is not alpha * hmp_weight / 2 = "
                    f"{self.alpha * self.hmp_weight / 2}"
                )
        elif self.hmp_weight is not None:
            problems.append(f"hmp_weight with method {self.method!r}")
        if abs(self.alpha_retrieval + self.alpha_generation - self.alpha) > 1e-9:
            problems.append(
                f"alpha_retrieval + alpha_generation = {self.alpha_retrieval + self.alpha_generation} is not "
                f"alpha = {self.alpha}"
            )
        deltas = (self.delta, self.delta_retrieval, self.delta_generation)
        if self.method == "pac":
            if None in deltas:
                problems.append("method 'pac' without delta, delta_retrieval and delta_generation")
            elif abs(self.delta_retrieval + self.delta_generation - self.delta) > 1e-9:  # type: ignore[operator]
                problems.append("delta_retrieval + delta_generation is not delta")
        elif any(d is not None for d in deltas):
            problems.append(f"a PAC delta with method {self.method!r}")
        n_ret = self.retrieval.get("n")
        if isinstance(n_ret, int) and n_ret != len(self.generation_scores):
            problems.append(
                f"{len(self.generation_scores)} generator scores for {n_ret} retrieval scores: both stages must be "
                "calibrated on the same questions"
            )
        if self.question_ids and len(self.question_ids) != len(self.generation_scores):
            problems.append(f"{len(self.question_ids)} question ids for {len(self.generation_scores)} generator scores")
        stage_ids = self.retrieval.get("question_ids")
        calibrated = [*self.question_ids, *(stage_ids if isinstance(stage_ids, list) else ())]
        problems.extend(_split_optimisation_problems(self.optimisation, calibrated))
        if self.coverage_ceiling is not None:
            hits = sum(1 for s in self.generation_scores if not _is_inf(s)) / len(self.generation_scores)
            if not math.isclose(hits, self.coverage_ceiling, abs_tol=1e-12):
                problems.append(f"coverage_ceiling = {self.coverage_ceiling} but the scores give {hits}")
        if "-inf" in (self.retrieval_threshold, self.generation_threshold):
            problems.append("a threshold of -inf")
        if problems:
            raise ValueError("; ".join(problems))
        return self


def _describe(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors(include_url=False):
        where = ".".join(str(p) for p in err["loc"] if not str(p).startswith(("literal[", "constrained-")))
        msg = str(err["msg"]).removeprefix("Value error, ")
        value = err.get("input")
        quiet = err["type"] in ("missing", "value_error") or isinstance(value, dict | list)
        shown = "" if quiet else f" (got {value!r})"
        parts.append(f"{where}: {msg}{shown}" if where else f"{msg}{shown}")
    return "; ".join(dict.fromkeys(parts))  # a union repeats its field once per failed branch


def check_fields(model: type[_M], data: Any, what: str) -> _M:
    """Validate ``data`` against ``model`` or raise :class:`CalibrationIntegrityError` naming every bad field.

    ``what`` names the content in the message (``"retrieval calibration"``).
    """
    if not isinstance(data, dict):
        raise CalibrationIntegrityError(f"The {what} is not a JSON object (got {type(data).__name__}).")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise CalibrationIntegrityError(f"The {what} has invalid fields: {_describe(exc)}.") from None
