"""The field-by-field schema of a saved calibration file, checked on every load.

The checksum only says that a file was not changed by accident: anybody can
recompute it. These models say that every field has the right type, lies in its
range and agrees with the other fields (``n`` with the number of scores, the
misses with the ``+inf`` scores, the split of ``alpha`` with ``alpha``), so that a
hand-edited file is refused even when its checksum was recomputed. The stored
thresholds are then recomputed from the stored scores by the calibration classes
themselves (:meth:`RetrievalCalibration.from_dict`, :meth:`AnswerSetCalibration.from_dict`).

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
from typing import Annotated, Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from ..core.clustering import CLUSTER_METHODS, GENERATOR_SCORES
from ..core.errors import CalibrationIntegrityError
from ..core.retrieval_scores import SCORE_FAMILIES

__all__ = ["AnswerSetFile", "FingerprintFile", "GeneratorFile", "GroupFile", "RetrievalFile", "check_fields"]

Finite = Annotated[float, Field(allow_inf_nan=False)]
Level = Annotated[float, Field(gt=0.0, lt=1.0, allow_inf_nan=False)]
Score = Finite | Literal["+inf", "inf"]
Threshold = Finite | Literal["+inf", "inf", "-inf"]
Text = Annotated[str, Field(min_length=1)]
Checksum = Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]

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


class EmbeddingIdentityFile(_Strict):
    """The ``generator.embedding`` block: the embedding model answers were clustered with."""

    model: Text
    dim: Annotated[int, Field(ge=1)] | None = None


class GeneratorFile(_Strict):
    """The ``generator`` block of an answer-set calibration: what its generator threshold is tied to.

    ``llm`` and ``sampling`` are compared key by key at query time, so they may hold any
    JSON; ``llm`` names the model, ``sampling`` records ``n_samples`` and the prompt.
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
    """A saved :class:`~conformal_rag_plugins.calibration.RetrievalCalibration`."""

    kind: Literal["conformal_rag_plugins.retrieval_calibration"]
    schema_version: Literal[1]
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
    corpus: dict[str, Any] | None = None
    checksum: Checksum | None = None
    signature: Checksum | None = None
    group_by: Text | None = None
    groups: dict[Text, GroupFile] | None = None
    group_labels: list[Text] | None = None
    group_fallback: Literal["keep_all", "pooled"] | None = None  # absent in older files: "pooled"
    risk: Literal["miscoverage", "recall"] = "miscoverage"
    gold_scores: list[Annotated[list[Score], Field(min_length=1)]] | None = None

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
        if self.question_ids and len(self.question_ids) != self.n:
            problems.append(f"{len(self.question_ids)} question ids for n = {self.n} scores")
        if self.threshold == "-inf":
            problems.append("threshold -inf")
        problems.extend(_group_problems(self))
        if problems:
            raise ValueError("; ".join(problems))
        return self


def _group_problems(f: RetrievalFile) -> list[str]:
    """The ``group_by``/``groups``/``group_labels`` fields agree with each other and with ``n``."""
    present = (f.group_by is not None, f.groups is not None, f.group_labels is not None)
    if not any(present):
        return [] if f.group_fallback is None else ["group_fallback without groups"]
    if not all(present):
        return ["group_by, groups and group_labels must be stored together"]
    assert f.groups is not None and f.group_labels is not None
    problems = []
    if len(f.group_labels) != f.n:
        problems.append(f"{len(f.group_labels)} group labels for n = {f.n} scores")
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
    """A saved :class:`~conformal_rag_plugins.calibration.AnswerSetCalibration`.

    The nested ``retrieval`` block is checked by :class:`RetrievalFile` when the
    calibration rebuilds its retrieval stage.
    """

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

    @model_validator(mode="after")
    def _agree(self) -> AnswerSetFile:
        problems = []
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

    Parameters
    ----------
    model : type
        :class:`RetrievalFile` or :class:`AnswerSetFile`.
    data : Any
        The decoded JSON.
    what : str
        How the message names the file's content ("retrieval calibration").
    """
    if not isinstance(data, dict):
        raise CalibrationIntegrityError(f"The {what} is not a JSON object (got {type(data).__name__}).")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise CalibrationIntegrityError(f"The {what} has invalid fields: {_describe(exc)}.") from None
