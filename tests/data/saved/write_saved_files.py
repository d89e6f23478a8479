"""Write the saved files of ``tests/data/saved`` with the code of the checkout it runs in.

Run from a checkout's root, ``PYTHONPATH=. python tests/data/saved/write_saved_files.py OUT_DIR``.
It writes, with no model, a tiny synthetic per-group retrieval calibration, the answer-set
calibration built on it and a drift monitor (with a stream, labels and an alarm) on it, each
named after its schema version. The files under ``tests/data/saved`` were written by this
script at the commits ``README.md`` names; it also runs on the older package layout
(``conformal_rag_plugins.calibration``, before the concept packages), so the old files can
be written again the same way.
"""

from __future__ import annotations

import inspect
import json
import math
import sys
from pathlib import Path

import numpy as np

try:
    from conformal_rag_plugins.answer_sets.calibration import SCHEMA_VERSION as ANSWER_SET_VERSION
    from conformal_rag_plugins.answer_sets.calibration import AnswerSetCalibration
    from conformal_rag_plugins.monitor.monitor import MONITOR_SCHEMA_VERSION, ConformalMonitor
    from conformal_rag_plugins.retrieval.calibration import SCHEMA_VERSION as RETRIEVAL_VERSION
    from conformal_rag_plugins.retrieval.conformalizer import RetrievalConformalizer
    from conformal_rag_plugins.retrieval.fingerprint import Fingerprint
except ImportError:  # the layout before the concept packages (commit 298efd1)
    from conformal_rag_plugins.calibration.answer_sets import SCHEMA_VERSION as ANSWER_SET_VERSION
    from conformal_rag_plugins.calibration.answer_sets import AnswerSetCalibration
    from conformal_rag_plugins.calibration.conformalizer import RetrievalConformalizer
    from conformal_rag_plugins.calibration.fingerprint import Fingerprint
    from conformal_rag_plugins.calibration.monitor import MONITOR_SCHEMA_VERSION, ConformalMonitor
    from conformal_rag_plugins.calibration.retrieval import SCHEMA_VERSION as RETRIEVAL_VERSION
from conformal_rag_plugins.core.pools import PoolObservation

#: Pool size of the synthetic host.
POOL = 5
#: The fingerprint every file records (a LangChain Chroma store with MiniLM, as the demo's).
FINGERPRINT = Fingerprint("langchain", "Chroma", "cosine", "all-MiniLM-L6-v2", 384, "1-distance")


def observations(n: int = 40, seed: int = 7) -> list[PoolObservation]:
    """``n`` questions, each a pool of ``POOL`` sorted scores with its gold at a random rank; every 9th misses."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        scores = np.round(np.sort(rng.uniform(0.2, 0.9, POOL))[::-1], 6)
        gold = () if i % 9 == 8 else (int(rng.integers(POOL)),)
        out.append(PoolObservation(scores.copy(), gold))
    return out


def retrieval_calibration():
    """A split calibration at 0.8 with two groups (``"a"``, ``"b"``) of 20 questions each."""
    obs = observations()
    groups = ["a" if i % 2 == 0 else "b" for i in range(len(obs))]
    conformalizer = RetrievalConformalizer(0.8, score="relative")
    return conformalizer.conformalize_pools(obs, fingerprint=FINGERPRINT, pool_size=POOL, groups=groups).calibration_


def answer_set_calibration(retrieval):
    """A Bonferroni answer-set calibration at 0.6 on ``retrieval``'s questions (frequency scores of 4 samples)."""
    n = len(retrieval.scores_)
    gen = [-1.0 if i % 3 else -0.5 for i in range(n - 2)] + [math.inf, -0.25]
    extra = {}
    if "generator" in inspect.signature(AnswerSetCalibration.from_stages).parameters:  # recorded since late 2026-11
        llm = {"class": "FakeLLM", "name": "fake-llm", "temperature": 1.0}
        extra["generator"] = {"llm": llm, "sampling": {"n_samples": 4, "prompt": "few-shot"}}
    return AnswerSetCalibration.from_stages(
        retrieval,
        gen,
        alpha=0.4,
        method="bonferroni",
        n_samples=4,
        model="fake-llm",
        clustering={"method": "rougeL", "tau": 0.7},
        **extra,
    )


def monitor(retrieval):
    """A ``top1`` drift monitor on ``retrieval`` with a drifted stream (it alarms) and four labels (two per group)."""
    rng = np.random.default_rng(11)
    mon = ConformalMonitor(retrieval, reference=[float(round(v, 6)) for v in rng.uniform(0.6, 0.9, 30)], delta=0.05)
    for i in range(60):
        top = 0.75 if i < 10 else 0.3  # the scores fall after the tenth query
        mon.observe([top, top - 0.1])
    if hasattr(mon, "restart"):  # schema 2: restarts after an alarm, at delta / 2**k (schema 3: the bag continues)
        mon.restart()
        for _ in range(5):
            mon.observe([0.3, 0.2])
    grouped = getattr(mon, "grouped", False)  # schema 2: a per-group monitor records each label's group
    for (covered, r), group in zip(((True, 0.1), (False, math.inf), (True, 0.05), (None, 0.2)), "abab", strict=True):
        mon.observe_label(covered, nonconformity=r, **({"group": group} if grouped else {}))
    return mon


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    ret = retrieval_calibration()
    ret.save(out / f"retrieval_v{RETRIEVAL_VERSION}.json")
    answer_set_calibration(ret).save(out / f"answer_sets_v{ANSWER_SET_VERSION}_retrieval_v{RETRIEVAL_VERSION}.json")
    monitor(ret).save(out / f"monitor_v{MONITOR_SCHEMA_VERSION}.json")
    for path in sorted(out.glob("*.json")):
        print(path, json.loads(path.read_text(encoding="utf-8"))["schema_version"])


def main_monitor_on(out: Path, calibration: Path) -> None:
    """Only the monitor, on a saved retrieval calibration (a monitor schema bump, the retrieval schema unchanged)."""
    from conformal_rag_plugins.retrieval.calibration import RetrievalCalibration

    out.mkdir(parents=True, exist_ok=True)
    path = out / f"monitor_v{MONITOR_SCHEMA_VERSION}.json"
    monitor(RetrievalCalibration.load(calibration)).save(path)
    print(path, json.loads(path.read_text(encoding="utf-8"))["schema_version"])


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[2] == "--monitor-on":
        main_monitor_on(Path(sys.argv[1]), Path(sys.argv[3]))
    else:
        main(Path(sys.argv[1]))
