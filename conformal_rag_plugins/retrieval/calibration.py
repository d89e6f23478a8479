"""The fitted retrieval calibration: immutable, JSON with a schema version and checksum.

The checksum only catches accidents (anybody can recompute it); only a signature
(``CONFORMAL_RAG_SIGNING_KEY``) proves that a file is the one that was saved.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from functools import cached_property
from pathlib import Path
from typing import Any

from ..core.errors import CalibrationError, CalibrationIntegrityError, InfiniteThresholdWarning
from ..core.quantile import (
    PLAIN_RANK_RULE,
    THRESHOLD_RULE,
    conformal_quantile,
    current_threshold_rule,
    pac_quantile,
    threshold_rule,
)
from ..core.validation import check_pool_size
from ..storage.jsonio import decode_float as _dec
from ..storage.jsonio import encode_float as _enc
from ..storage.jsonio import (
    naming_file,
    read_checked,
    resolve_signing_key,
    sign,
    verify_signed,
    with_checksum,
    write_json,
)
from ..storage.schema import RetrievalFile, check_fields, record_problems
from .fingerprint import Fingerprint
from .group_check import group_question_problems
from .groups import check_groups, groups_payload, threshold_for
from .recall_calibration import check_risk_fields, recall_threshold

#: Version 2 always writes ``corpus`` and ``gold_ranks`` (``null`` when unknown); version 1 files still load.
SCHEMA_VERSION = 2
_READABLE_VERSIONS = (1, 2)
_KIND = "conformal_rag_plugins.retrieval_calibration"


@dataclass(frozen=True)
class RetrievalCalibration:
    """A calibrated retrieval threshold (scikit-learn style: fitted attributes end in ``_``).

    Build it with :class:`~conformal_rag_plugins.retrieval.conformalizer.RetrievalConformalizer` or a
    framework's ``calibrate_retriever``; save and load it with :meth:`save` / :meth:`load`.

    Attributes
    ----------
    threshold_ : float
        q-hat on the nonconformity scale of ``score_family_`` (``inf`` = keep all).
    alpha_ : float
        Target miscoverage (``1 - confidence_level``; epsilon for PAC; ``1 - recall`` for ``risk_ == "recall"``).
    method_ : {"split", "pac", "crc", "ltt"}
        ``split``/``pac`` control miscoverage; ``crc`` and ``ltt`` (Learn-then-Test) control ``1 - recall``.
    delta_ : float or None
        PAC or Learn-then-Test confidence parameter.
    score_family_ : {"similarity", "rank", "relative"}
    pool_size_ : int
        Candidates requested from the host per query, at calibration and query time.
    n_calibration_, n_misses_ : int
        Calibration questions, and those whose gold chunk was outside the pool (kept, scored +inf).
    scores_ : tuple of float
        The calibration nonconformity scores (for p-values).
    fingerprint_ : Fingerprint
    created_at_ : str
    selection_ : dict
        How ``auto`` or a tuned host chose the family (and host configuration), if they did.
    question_ids_ : tuple of str
        :func:`~conformal_rag_plugins.datasets.examples.question_digest` of each question, aligned
        with ``scores_`` (empty for bare observations or older files).
    labels_ : dict
        Counts of ``metadata["gold_rule"]`` and ``metadata["label_rule"]`` of the examples.
    corpus_ : dict
        Digest of the host's collection (``size``, ``ids_sha256``), when it can list its ids; a
        retriever built on a changed collection warns.
    group_by_ : str or None
        Per-group (Mondrian) calibration: the metadata key, or ``callable:<name>``.
    groups_ : dict
        Per group ``{"n", "threshold", "source"}``.
    group_labels_ : tuple of str
        The group of each calibration score (empty when ungrouped).
    group_fallback_ : {"keep_all", "pooled"}
        What a too-small or unseen group gets: ``+inf``, or the pooled threshold (not guaranteed).
        Files saved before this field existed load as ``"pooled"``, the rule they were calibrated with.
    chunk_group_key_ : str or None
        Label-conditional calibration: the chunk metadata key whose group's threshold each
        candidate gets at query time.
    group_questions_ : tuple of str
        Grouped by a function of the question: the calibration questions' texts, aligned with
        ``scores_``, so that a query-time ``group_by`` can be checked against ``group_labels_``
        (empty otherwise: a query-time ``group_by`` then cannot be checked and its sets are not
        guaranteed). The saved file then holds these texts.
    group_example_ids_ : tuple of str or None
        The example id of each of ``group_questions_`` (``None``: no id), so that on load each question
        is checked against its digest in ``question_ids_`` (empty in files saved before this record).
    risk_ : {"miscoverage", "recall"}
        The chance that no gold chunk is kept, or the mean share of gold chunks left out.
    gold_scores_ : tuple of tuple of float
        With ``risk_ == "recall"``: each question's sorted gold-chunk nonconformities (``+inf``
        outside the pool; ``scores_`` holds their minimum); the threshold is recomputed from them on load.
    gold_ranks_ : tuple of int or None
        1-based pool position of each question's best gold chunk (``None`` for a miss; empty when
        not recorded); each is at most ``pool_size_``, which is how a loaded file's pool is checked.
    miss_bound_ : float or None
        The share of questions the pool may miss that a flagged set assumes (``None``: ``alpha_ / 2``,
        the default; ``0``: a pool that cannot miss). Written to the file only when set.
    threshold_rule_ : str
        The rule the thresholds follow: ``"pool-miss-2"`` (a finite threshold holds given its flag when the
        pool may miss the gold, and misses the bound makes implausible withdraw it;
        :func:`~conformal_rag_plugins.core.quantile.flagged_rank`), ``"pool-miss-1"`` (the first such rule)
        or ``"plain-rank"`` for files saved before both. An older-rule calibration still loads and serves
        its stored thresholds, but its sets are never flagged guaranteed; :meth:`with_current_rule`
        recomputes them from the stored scores.
    schema_version_ : int
        The format :meth:`to_dict` writes: the current one, or the loaded file's (so a re-saved
        old file keeps its checksum).
    optimisation_recorded_ : bool
        Whether :meth:`to_dict` writes ``n_optimisation`` (the questions that tuned the host or chose the
        family, 0 for none) beside ``selection``, so that an emptied ``selection`` (its tuning questions then
        counted as held out) is refused: always, except for a loaded file saved before that record.
    grouping_recorded_ : bool
        Whether :meth:`to_dict` writes ``grouping`` (``"query"``/``"chunk"``) beside the groups: always,
        except for a loaded file saved before that record (so that it keeps its checksum).
    """

    threshold_: float
    alpha_: float
    method_: str
    score_family_: str
    pool_size_: int
    n_calibration_: int
    n_misses_: int
    scores_: tuple[float, ...]
    fingerprint_: Fingerprint
    delta_: float | None = None
    created_at_: str = field(default_factory=lambda: datetime.now(timezone.utc).isoformat())
    selection_: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)
    labels_: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)
    question_ids_: tuple[str, ...] = field(default=(), compare=False, hash=False)
    corpus_: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)
    group_by_: str | None = field(default=None, compare=False, hash=False)
    groups_: dict[str, dict[str, Any]] = field(default_factory=dict, compare=False, hash=False)
    group_labels_: tuple[str, ...] = field(default=(), compare=False, hash=False)
    group_fallback_: str = field(default="keep_all", compare=False, hash=False)
    chunk_group_key_: str | None = field(default=None, compare=False, hash=False)
    group_questions_: tuple[str, ...] = field(default=(), compare=False, hash=False)
    group_example_ids_: tuple[str | None, ...] = field(default=(), compare=False, hash=False)
    risk_: str = "miscoverage"
    gold_scores_: tuple[tuple[float, ...], ...] = field(default=(), compare=False, hash=False)
    gold_ranks_: tuple[int | None, ...] = field(default=(), compare=False, hash=False)
    threshold_rule_: str = field(default_factory=current_threshold_rule, compare=False, hash=False)
    miss_bound_: float | None = None
    schema_version_: int = field(default=SCHEMA_VERSION, compare=False, hash=False, repr=False)
    grouping_recorded_: bool = field(default=True, compare=False, hash=False, repr=False)
    optimisation_recorded_: bool = field(default=True, compare=False, hash=False, repr=False)

    def __post_init__(self) -> None:
        check_pool_size(self.pool_size_)
        check_risk_fields(self)
        if self.question_ids_ and len(self.question_ids_) != len(self.scores_):
            raise CalibrationIntegrityError(
                f"The calibration records {len(self.question_ids_)} question ids for {len(self.scores_)} scores."
            )
        if self.group_questions_ and len(self.group_questions_) != len(self.group_labels_):
            raise CalibrationIntegrityError(
                f"The calibration records {len(self.group_questions_)} group questions for "
                f"{len(self.group_labels_)} group labels."
            )
        problems = record_problems(
            self.scores_, self.pool_size_, self.score_family_, self.gold_ranks_, self.question_ids_
        )
        if problems:
            raise CalibrationIntegrityError(f"The calibration's records disagree: {'; '.join(problems)}.")

    @property
    def confidence_level_(self) -> float:
        """``1 - alpha_``."""
        return 1.0 - self.alpha_

    @property
    def is_infinite_(self) -> bool:
        """True when every candidate must be returned."""
        return math.isinf(self.threshold_)

    def recomputed_threshold(self, *, strict: bool = False) -> float:
        """The threshold recomputed from the stored scores, level, method, delta and miss bound (``inf`` kept).

        ``strict=True`` raises :class:`~conformal_rag_plugins.core.errors.CalibrationError` saying why
        instead of returning ``inf``.

        Examples
        --------
        >>> from conformal_rag_plugins import Fingerprint
        >>> fp = Fingerprint("none", "list", "cosine", "toy", 2, "cosine")
        >>> scores = tuple(i / 10 for i in range(1, 10))
        >>> cal = RetrievalCalibration(0.9, 0.1, "split", "similarity", 5, 9, 0, scores, fp)
        >>> cal.recomputed_threshold()  # 9 questions: too few for a flag when the pool may miss
        inf
        """
        with warnings.catch_warnings(), threshold_rule(self.threshold_rule_):
            warnings.simplefilter("ignore", InfiniteThresholdWarning)
            bound = self.miss_bound_
            if self.risk_ == "recall":
                return recall_threshold(
                    self.gold_scores_, self.alpha_, self.method_, self.delta_, strict=strict, miss_bound=bound
                )
            if self.method_ == "pac":
                if self.delta_ is None:
                    raise CalibrationIntegrityError("A PAC calibration without delta.")
                return pac_quantile(self.scores_, self.alpha_, self.delta_, strict=strict, miss_bound=bound)
            return conformal_quantile(self.scores_, self.alpha_, strict=strict, miss_bound=bound)

    @cached_property
    def infinite_reason_(self) -> str:
        """Why the threshold is ``+inf`` (too few questions, or misses that withdraw the flag); empty when finite.

        Examples
        --------
        >>> from conformal_rag_plugins import Fingerprint
        >>> fp = Fingerprint("none", "list", "cosine", "toy", 2, "cosine")
        >>> scores = tuple(i / 10 for i in range(1, 10))
        >>> RetrievalCalibration(math.inf, 0.1, "split", "similarity", 5, 9, 0, scores, fp).infinite_reason_[:40]
        '9 calibration points are too few at alph'
        """
        if not self.is_infinite_:
            return ""
        try:
            self.recomputed_threshold(strict=True)
        except CalibrationError as exc:
            return str(exc)
        return ""

    def check_threshold(self) -> None:
        """Raise :class:`CalibrationIntegrityError` unless ``threshold_`` is the one its scores give."""
        again = self.recomputed_threshold()
        stored = self.threshold_
        close = math.isfinite(stored) and math.isfinite(again) and math.isclose(stored, again, rel_tol=1e-12)
        if not (stored == again or close):
            raise CalibrationIntegrityError(
                f"The stored threshold {stored!r} disagrees with {again!r} recomputed from the stored "
                f"{self.n_calibration_} scores at alpha={self.alpha_} ({self.method_}): the file was edited or "
                "corrupted. Re-run calibration instead of editing thresholds."
            )
        with threshold_rule(self.threshold_rule_):
            check_groups(self)

    @property
    def stale_rule_reason_(self) -> str:
        """Why its sets are never flagged guaranteed (empty under the current rule)."""
        if self.threshold_rule_ == current_threshold_rule():
            return ""
        what = (
            "before thresholds accounted for pool misses"
            if self.threshold_rule_ == PLAIN_RANK_RULE
            else "under an older pool-miss rule, whose flag is not withdrawn when the pool misses more than it assumes"
        )
        return (
            f"This calibration was saved {what} (threshold rule {self.threshold_rule_!r}), so its sets are not flagged "
            "guaranteed. Re-calibrate, or recompute it from its stored scores with calibration.with_current_rule() "
            "and save it."
        )

    def with_current_rule(self) -> RetrievalCalibration:
        """A copy whose thresholds (pooled and per group) are recomputed from the stored scores under the current rule.

        Examples
        --------
        >>> from conformal_rag_plugins import Fingerprint
        >>> fp = Fingerprint("none", "list", "cosine", "toy", 2, "cosine")
        >>> scores = tuple(i / 20 for i in range(1, 21))
        >>> old = RetrievalCalibration(
        ...     0.95, 0.1, "split", "similarity", 5, 20, 0, scores, fp, threshold_rule_="plain-rank"
        ... )
        >>> new = old.with_current_rule()
        >>> old.threshold_, new.threshold_, new.threshold_rule_, new.stale_rule_reason_
        (0.95, 1.0, 'pool-miss-2', '')
        """
        if self.threshold_rule_ == THRESHOLD_RULE:
            return self
        from .groups import recomputed_groups

        current = replace(self, threshold_rule_=THRESHOLD_RULE)
        current = replace(current, threshold_=current.recomputed_threshold())
        return replace(current, groups_=recomputed_groups(current)) if current.group_labels_ else current

    def threshold_for(self, group: str | None) -> tuple[float, str]:
        """``(threshold, source)`` for a query of ``group``: its own, or the fallback (see :func:`threshold_for`)."""
        return threshold_for(self, group)

    def to_dict(self, *, signing_key: str | bytes | None = None) -> dict[str, Any]:
        """JSON-ready dict with the schema version, a SHA-256 checksum and, with a key, an HMAC signature.

        Unlike :meth:`save`, ``to_dict`` signs only with an explicit ``signing_key``.
        """
        payload: dict[str, Any] = {
            "kind": _KIND,
            "schema_version": self.schema_version_,
            "alpha": self.alpha_,
            "confidence_level": 1.0 - self.alpha_,
            "method": self.method_,
            "epsilon": self.alpha_ if self.method_ == "pac" else None,
            "delta": self.delta_,
            "n": self.n_calibration_,
            "n_misses": self.n_misses_,
            "threshold": _enc(self.threshold_),
            "score_family": self.score_family_,
            "pool_size": self.pool_size_,
            "scores": [_enc(s) for s in self.scores_],
            "fingerprint": self.fingerprint_.to_dict(),
            "created_at": self.created_at_,
            "selection": self.selection_,
            "labels": self.labels_,
            "question_ids": list(self.question_ids_),
        }
        if self.optimisation_recorded_:  # a second record of the tuning questions: see optimisation_recorded_
            payload["n_optimisation"] = int(self.selection_.get("n_optimisation") or 0)
        if self.schema_version_ >= 2:  # written even when unknown, so that a removed field is noticed
            payload["corpus"] = dict(self.corpus_) or None
            payload["gold_ranks"] = list(self.gold_ranks_) if self.gold_ranks_ else None
        elif self.corpus_:
            payload["corpus"] = dict(self.corpus_)
        payload.update(groups_payload(self, _enc))
        if self.group_questions_:  # only when grouped by a function, so older readers see older files
            payload["group_questions"] = list(self.group_questions_)
            if self.group_example_ids_:
                payload["group_example_ids"] = list(self.group_example_ids_)
        payload["risk"] = self.risk_
        if self.threshold_rule_ != PLAIN_RANK_RULE:  # absent: the plain rank of older files (they re-save unchanged)
            payload["threshold_rule"] = self.threshold_rule_
        if self.miss_bound_ is not None:  # only when set, so that older readers see default files unchanged
            payload["miss_bound"] = self.miss_bound_
        if self.risk_ == "recall":
            payload["gold_scores"] = [[_enc(s) for s in g] for g in self.gold_scores_]
        key = resolve_signing_key(signing_key) if signing_key is not None else None
        return with_checksum(sign(payload, key))

    @classmethod
    def from_dict(cls, data: dict[str, Any], *, signing_key: str | bytes | None = None) -> RetrievalCalibration:
        """Verify and rebuild a dict written by :meth:`to_dict`.

        Checks kind, schema version, checksum, the signature (only with an explicit ``signing_key``),
        every field's type and range, that the fields agree (gold ranks with ``pool_size``,
        ``selection`` with ``score_family``, the pool and the fingerprint, one distinct question id per
        score), that a version-2 file has ``corpus`` and ``gold_ranks``, and that the stored threshold
        is the one the stored scores give. Only a signature proves a file unchanged (see the module).

        Raises
        ------
        CalibrationIntegrityError
            Naming every field that is wrong.
        """
        verify_signed(data, _KIND, _READABLE_VERSIONS, signing_key)
        check_fields(RetrievalFile, data, "retrieval calibration")
        try:
            cal = cls(
                threshold_=_dec(data["threshold"]),
                alpha_=float(data["alpha"]),
                method_=str(data["method"]),
                score_family_=str(data["score_family"]),
                pool_size_=int(data["pool_size"]),
                n_calibration_=int(data["n"]),
                n_misses_=int(data["n_misses"]),
                scores_=tuple(_dec(s) for s in data["scores"]),
                fingerprint_=Fingerprint.from_dict(data["fingerprint"]),
                delta_=data.get("delta"),
                created_at_=str(data["created_at"]),
                selection_=dict(data.get("selection") or {}),
                labels_=dict(data.get("labels") or {}),
                question_ids_=tuple(str(q) for q in data.get("question_ids") or ()),
                corpus_=dict(data.get("corpus") or {}),
                group_by_=data.get("group_by"),
                groups_={
                    str(g): {**v, "threshold": _dec(v["threshold"])} for g, v in (data.get("groups") or {}).items()
                },
                group_labels_=tuple(str(g) for g in data.get("group_labels") or ()),
                group_fallback_=str(data.get("group_fallback") or ("pooled" if data.get("groups") else "keep_all")),
                chunk_group_key_=data.get("chunk_group_key"),
                group_questions_=tuple(str(q) for q in data.get("group_questions") or ()),
                group_example_ids_=tuple(data.get("group_example_ids") or ()),
                risk_=str(data.get("risk", "miscoverage")),
                gold_scores_=tuple(tuple(_dec(s) for s in g) for g in data.get("gold_scores") or ()),
                gold_ranks_=tuple(data.get("gold_ranks") or ()),
                threshold_rule_=str(data.get("threshold_rule") or PLAIN_RANK_RULE),
                miss_bound_=None if data.get("miss_bound") is None else float(data["miss_bound"]),
                schema_version_=int(data["schema_version"]),
                grouping_recorded_="grouping" in data or not data.get("groups"),
                optimisation_recorded_="n_optimisation" in data,
            )
        except CalibrationIntegrityError:
            raise
        except (KeyError, TypeError, ValueError) as exc:
            raise CalibrationIntegrityError(f"Calibration file is missing or mangles a field: {exc}.") from exc
        problems = group_question_problems(cal.group_questions_, cal.group_example_ids_, cal.question_ids_)
        if problems:
            raise CalibrationIntegrityError(f"The calibration's records disagree: {'; '.join(problems)}.")
        cal.check_threshold()
        return cal

    def save(self, path: str | Path, *, signing_key: str | bytes | None = None) -> Path:
        """Write JSON (never pickle), atomically, and return the path.

        With ``signing_key`` (or ``$CONFORMAL_RAG_SIGNING_KEY``) the file carries an HMAC-SHA256 signature.
        """
        key = resolve_signing_key(signing_key)
        return write_json(path, self.to_dict(signing_key=key))

    @classmethod
    def load(
        cls, path: str | Path, *, expected: Fingerprint | None = None, signing_key: str | bytes | None = None
    ) -> RetrievalCalibration:
        """Read and verify a file written by :meth:`save`; optionally check its fingerprint.

        With ``signing_key`` (or ``$CONFORMAL_RAG_SIGNING_KEY``) a file without a valid signature is
        refused; without one, :meth:`from_dict`'s checks catch accidental or one-field edits only.

        Raises
        ------
        CalibrationIntegrityError
            The message names the file and what is wrong with it.

        Examples
        --------
        >>> RetrievalCalibration.load("missing.json")  # doctest: +SKIP
        """
        with naming_file(path):
            cal = cls.from_dict(
                read_checked(path, _KIND, _READABLE_VERSIONS), signing_key=resolve_signing_key(signing_key)
            )
        if expected is not None:
            cal.fingerprint_.check_compatible(expected)
        return cal

    def summary(self) -> str:
        """One line for logs and the CLI."""
        q = "+inf (include everything)" if self.is_infinite_ else f"{self.threshold_:.6g}"
        extra = f", delta={self.delta_}" if self.method_ in ("pac", "ltt") else ""
        if self.risk_ == "recall":
            extra += " risk=recall (mean 1 - recall of the gold chunks <= alpha)"
        return (
            f"{self.method_} alpha={self.alpha_}{extra} family={self.score_family_} n={self.n_calibration_} "
            f"misses={self.n_misses_} pool={self.pool_size_} threshold={q}"
        )
