"""Issue 21 part 4: a re-checksummed edit of a field that another field records is refused.

Every edit below recomputes the SHA-256 checksum exactly as ``save`` does
(:func:`conformal_rag_plugins.storage.jsonio.with_checksum`), so the checksum cannot
catch it; the cross-checks between fields must.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from conformal_rag_plugins.core.errors import CalibrationError, CalibrationIntegrityError
from conformal_rag_plugins.core.pools import PoolObservation
from conformal_rag_plugins.core.retrieval_scores import keep_mask
from conformal_rag_plugins.retrieval.calibration import RetrievalCalibration
from conformal_rag_plugins.retrieval.conformalizer import RetrievalConformalizer
from conformal_rag_plugins.retrieval.fingerprint import Fingerprint, corpus_digest
from conformal_rag_plugins.storage.jsonio import with_checksum

# Regression values computed under the plain rank; the pool-miss rule is tested in test_quantile_flagged.py.
pytestmark = pytest.mark.usefixtures("plain_rank_rule")

DENSE = Fingerprint("langchain", "Chroma", "cosine", "all-MiniLM-L6-v2", 384, "1-distance")
HYBRID = Fingerprint(
    "langchain", "ScoredFusionRetriever[Chroma+BM25]", "cosine", "all-MiniLM-L6-v2", 384, "fusion:zscore",
    "hybrid(method=zscore,weight=0.5,k=50)",
)  # fmt: skip
POOL = 50


def pools(n: int, seed: int, pool: int = POOL) -> list[PoolObservation]:
    """Dense-like pools: the gold sits at a geometric rank (about 1 in 20 beyond ``pool``)."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        scores = np.sort(rng.uniform(0.2, 0.9, pool))[::-1]
        rank = int(rng.geometric(0.06))  # P(rank > 50) = 0.94**50 ~ 0.045
        gold = (rank - 1,) if rank <= pool else ()
        out.append(PoolObservation(scores, gold, question_id=f"q{seed}-{i:04d}"))
    return out


def calibrate(score: str = "similarity", fp: Fingerprint = DENSE, **kw: Any) -> RetrievalCalibration:
    cal = RetrievalConformalizer(0.9, score=score, **kw).conformalize_pools(
        pools(200, 1), fingerprint=fp, pool_size=POOL
    )
    return cal.calibration_


def edit(path: Path, change: Callable[[dict[str, Any]], None]) -> Path:
    """Edit the saved JSON and recompute its checksum the way the project does."""
    data = json.loads(path.read_text(encoding="utf-8"))
    change(data)
    body = {k: v for k, v in data.items() if k != "checksum"}
    path.write_text(json.dumps(with_checksum(body), indent=2), encoding="utf-8")
    return path


def refused(path: Path, *words: str) -> str:
    with pytest.raises(CalibrationIntegrityError) as info:
        RetrievalCalibration.load(path)
    msg = str(info.value)
    for w in words:
        assert w in msg, msg
    return msg


def held_out_coverage(cal: RetrievalCalibration, observations: list[PoolObservation]) -> float:
    """The share of held-out questions whose gold is kept from the top-``pool_size_`` candidates."""
    hits = 0
    for o in observations:
        mask = keep_mask(cal.score_family_, o.scores[: cal.pool_size_], cal.threshold_)
        hits += any(p < cal.pool_size_ and mask[p] for p in o.gold_positions)
    return hits / len(observations)


def test_an_untouched_file_round_trips_with_its_records(tmp_path):
    cal = calibrate()
    loaded = RetrievalCalibration.load(cal.save(tmp_path / "cal.json"))
    assert loaded == cal
    assert loaded.gold_ranks_ == cal.gold_ranks_ and len(cal.gold_ranks_) == cal.n_calibration_
    assert all((r is None) == math.isinf(s) for r, s in zip(cal.gold_ranks_, cal.scores_, strict=True))
    assert max(r for r in cal.gold_ranks_ if r is not None) <= POOL


def test_the_issue_example_pool_50_to_1_is_refused(tmp_path):
    cal = calibrate()
    test = pools(2000, 2)
    # why it matters: the same threshold on a 1-candidate pool covers far less than 0.9
    assert held_out_coverage(cal, test) >= 0.88
    shrunk = RetrievalCalibration(
        cal.threshold_, cal.alpha_, cal.method_, cal.score_family_, 1, cal.n_calibration_, cal.n_misses_,
        cal.scores_, cal.fingerprint_,
    )  # fmt: skip
    assert held_out_coverage(shrunk, test) < 0.5
    path = edit(cal.save(tmp_path / "cal.json"), lambda d: d.update(pool_size=1))
    refused(path, str(path), "gold_ranks", "pool_size is 1")


@pytest.mark.parametrize(
    ("change", "words"),
    [
        (lambda d: d.update(pool_size=3), ["gold_ranks", "pool_size is 3"]),
        (lambda d: d["gold_ranks"].__setitem__(0, 51), ["gold rank 51", "pool_size is 50"]),
        (lambda d: d["gold_ranks"].__setitem__(d["gold_ranks"].index(None), 4), ["score is +inf"]),
        (lambda d: d["gold_ranks"].__setitem__(0, None), ["recorded as a miss"]),
        (lambda d: d.update(gold_ranks=d["gold_ranks"][:-1]), ["gold_ranks", "for n = "]),
        (lambda d: d.pop("gold_ranks"), ["gold_ranks: missing", "Re-run the calibration"]),
        (lambda d: d.pop("corpus"), ["corpus: missing", "Re-run the calibration", "conformal-rag calibrate"]),
        (lambda d: d.update(corpus={"size": 3}), ["corpus.ids_sha256"]),
        (lambda d: d["question_ids"].__setitem__(1, d["question_ids"][0]), ["question_ids", "more than once"]),
        (lambda d: d.update(question_ids=d["question_ids"][:-1]), ["question ids for n = "]),
        (lambda d: d.update(score_family="relative"), ["relative score", "< 0"]),
        (lambda d: d.update(score_family="rank"), ["scores", "has rank"]),
        (lambda d: d.update(schema_version=1), ["schema version 1 never wrote", "gold_ranks"]),
    ],
)
def test_a_rechecksummed_edit_of_a_cross_checked_field_is_refused(tmp_path, change, words):
    cal = calibrate()
    assert cal.n_misses_ > 0  # the miss cases above need one
    path = cal.save(tmp_path / "cal.json")
    RetrievalCalibration.load(path)  # the untouched file loads
    refused(edit(path, change), str(path), *words)


def test_a_removed_corpus_digest_is_refused_and_a_present_one_round_trips(tmp_path):
    from dataclasses import replace

    cal = replace(calibrate(), corpus_=corpus_digest(f"c{i}" for i in range(500)))
    path = cal.save(tmp_path / "cal.json")
    assert RetrievalCalibration.load(path).corpus_ == cal.corpus_
    refused(edit(path, lambda d: d.pop("corpus")), "corpus: missing", "regenerate")


@pytest.mark.parametrize(
    ("change", "words"),
    [
        (lambda d: d.update(score_family="similarity"), ["selection.chosen = 'rank'", "score_family = 'similarity'"]),
        (lambda d: d["selection"].update(chosen="similarity"), ["selection.chosen = 'similarity'"]),
        (lambda d: d["selection"].update(n_optimisation=0), ["selection.n_optimisation"]),
    ],
)
def test_auto_selection_agrees_with_the_family(tmp_path, change, words):
    cal = calibrate("auto")
    assert cal.selection_["rule"] == "auto" and cal.selection_["chosen"] == cal.score_family_ == "rank"
    path = cal.save(tmp_path / "cal.json")
    RetrievalCalibration.load(path)
    refused(edit(path, change), *words)


def tuned(cal: RetrievalCalibration) -> RetrievalCalibration:
    """The selection block ``calibrate_tuned`` writes, for a calibration of the chosen host."""
    from dataclasses import replace

    selection = {
        "rule": "tuned-hybrid",
        "seed": 0,
        "n_optimisation": 60,
        "fusion_method": "zscore",
        "dense_weight": 0.5,
        "chosen": cal.score_family_,
        "unit": "chunk",
        "pool_size": POOL,
        "pool_sizes": [POOL, 2 * POOL],
        "units": ["chunk"],
    }
    return replace(cal, selection_=selection)


@pytest.mark.parametrize(
    ("change", "words"),
    [
        (lambda d: d["selection"].update(pool_size=100), ["selection.pool_size = 100", "pool_size = 50"]),
        (lambda d: d.update(pool_size=100), ["pool_size = 100", "k=50"]),
        (lambda d: d["selection"].update(fusion_method="minmax"), ["selection.fusion_method = 'minmax'", "zscore"]),
        (lambda d: d["selection"].update(dense_weight=0.7), ["selection.dense_weight = 0.7", "0.5"]),
        (lambda d: d["selection"].update(unit="parent:max"), ["selection.unit = 'parent:max'"]),
        (lambda d: d["selection"].update(pool_sizes=[100]), ["not among selection.pool_sizes"]),
        (lambda d: d["fingerprint"].update(retriever="hybrid(method=minmax,weight=0.5,k=50)"), ["'zscore'"]),
    ],
)
def test_tuned_selection_agrees_with_pool_and_fingerprint(tmp_path, change, words):
    path = tuned(calibrate(fp=HYBRID)).save(tmp_path / "cal.json")
    RetrievalCalibration.load(path)
    refused(edit(path, change), *words)


def test_a_llamaindex_fusion_fingerprint_pins_the_pool(tmp_path):
    fp = Fingerprint(
        "llamaindex", "QueryFusionRetriever[ChromaVectorStore+BM25Retriever]", "cosine", "m", 384, "fusion:x",
        "fusion(mode=dist_based_score,weights=0.5,0.5,top_k=50,subs=dense(default)+bm25)",
    )  # fmt: skip
    path = tuned(calibrate(fp=fp)).save(tmp_path / "cal.json")
    RetrievalCalibration.load(path)
    refused(edit(path, lambda d: d["selection"].update(dense_weight=0.3)), "selection.dense_weight = 0.3")
    # pool and every record of it edited together: the fingerprint still names top_k=50
    both = edit(path, lambda d: d.update(pool_size=60) or d["selection"].update(pool_size=60, pool_sizes=[60]))
    refused(both, "top_k=50")


def old_file(cal: RetrievalCalibration, **extra: Any) -> dict[str, Any]:
    """A file as schema version 1 wrote it: no gold_ranks, corpus only when known."""
    data = {k: v for k, v in cal.to_dict().items() if k not in ("checksum", "gold_ranks", "corpus")}
    return with_checksum({**data, "schema_version": 1, **extra})


def test_version_1_files_still_load_and_keep_their_checksum(tmp_path):
    cal = calibrate()
    for extra in ({}, {"corpus": corpus_digest(["a", "b"])}):
        data = old_file(cal, **extra)
        path = tmp_path / "old.json"
        path.write_text(json.dumps(data), encoding="utf-8")
        loaded = RetrievalCalibration.load(path)
        assert loaded.schema_version_ == 1 and loaded.gold_ranks_ == ()
        assert loaded.to_dict() == data  # a monitor tied to the old file's checksum still matches
        refused(edit(path, lambda d: d.update(corpus=None)), "schema version 1 never wrote", "corpus")


def test_calibration_refuses_repeated_questions_and_oversized_pools():
    obs = pools(40, 3)
    twice = [*obs, PoolObservation(obs[0].scores, obs[0].gold_positions, question_id=obs[0].question_id)]
    with pytest.raises(CalibrationError, match="more than once"):
        RetrievalConformalizer(0.9, score="similarity").conformalize_pools(twice, fingerprint=DENSE, pool_size=POOL)
    with pytest.raises(CalibrationError, match="beyond pool_size=10"):
        RetrievalConformalizer(0.9, score="similarity").conformalize_pools(obs, fingerprint=DENSE, pool_size=10)
