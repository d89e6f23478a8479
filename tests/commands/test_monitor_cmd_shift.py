"""Issue 41 item 5: ``conformal-rag monitor`` with its default host alarms on a harmful shift.

The default host is the tuned hybrid, whose fused scores are normalised per query (z-score or min-max). On
the review's shift its served top-1 did not move, and the monitor stayed silent for 476 queries. The
default now watches the raw dense similarities behind the fusion (``--monitor-scores auto``). The stream
here asks questions whose passages are **hidden** (not in the index) of an index of other SQuAD passages
and distractors: the default must alarm within ``ALARM_BY`` queries (here at query 18), no later than the
served fused scores (on this shift they move too, here also at 18), and stay silent on a shuffled stream of
82 unseen questions about the indexed passages (no shift).
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from conformal_rag_plugins.cli import main
from conformal_rag_plugins.monitor.monitor import ConformalMonitor
from conformal_rag_plugins.retrieval.calibration import RetrievalCalibration

pytestmark = pytest.mark.integration

#: Indexed SQuAD passages, distractors, reference questions, stream questions.
N_VISIBLE, N_DISTRACTORS, N_REFERENCE, N_STREAM = 60, 200, 100, 120
#: The most stream queries the default may take to alarm on the shift (measured: see the production page).
ALARM_BY = 60


def _jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def files(tmp_path_factory, squad_entries, squad_questions) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("monitor_shift")
    squad = [e for e in squad_entries if not e.id.startswith("distractor-")]
    distractors = [e for e in squad_entries if e.id.startswith("distractor-")][:N_DISTRACTORS]
    visible = {e.id for e in squad[:N_VISIBLE]}
    seen = [q for q in squad_questions if q.gold_ids and q.gold_ids[0] in visible]
    hidden = [q for q in squad_questions if q.gold_ids and q.gold_ids[0] not in visible]
    random.Random(0).shuffle(seen)
    random.Random(1).shuffle(hidden)
    assert len(seen) >= N_REFERENCE + 80 and len(hidden) >= N_STREAM  # 182 and 523
    rows = [
        {"id": str(i), "question": q.question, "answers": list(q.gold_texts), "context_id": q.gold_ids[0]}
        for i, q in enumerate(seen[:N_REFERENCE])
    ]
    return {
        "corpus": _jsonl(
            tmp / "corpus.jsonl", [{"id": e.id, "text": e.text} for e in [*squad[:N_VISIBLE], *distractors]]
        ),
        "qa": _jsonl(tmp / "qa.jsonl", rows),
        "shifted": _jsonl(tmp / "shifted.jsonl", [{"question": q.question} for q in hidden[:N_STREAM]]),
        "unshifted": _jsonl(tmp / "unshifted.jsonl", [{"question": q.question} for q in seen[N_REFERENCE:]]),
    }


def _run(files: dict[str, Path], out: Path, stream: str, *extra: str) -> dict:
    argv = ["monitor", "--corpus", str(files["corpus"]), "--stream", str(files[stream]), "--delta", "0.01"]
    assert main([*argv, "--json", str(out), *extra]) == 0
    return json.loads(out.read_text(encoding="utf-8"))


@pytest.mark.parametrize("framework", ["llamaindex", "langchain"])
def test_the_default_host_alarms_on_a_harmful_shift_through_the_dense_similarities(
    files, tmp_path, capsys, framework
) -> None:
    state = tmp_path / "state.json"
    first = ("--qa", str(files["qa"]), "--save-monitor", str(state), "--framework", framework)
    default = _run(files, tmp_path / "default.json", "shifted", *first)
    assert default["retriever"] == "hybrid" and default["score_source"] == "dense" and default["statistic"] == "top1"
    assert default["alarm_query"] is not None and default["alarm_query"] <= ALARM_BY, default["alarm_query"]
    cal_path = tmp_path / "state.calibration.json"
    cal = RetrievalCalibration.load(cal_path)
    assert ConformalMonitor.load(state, cal).score_source == "dense"  # recorded in the saved state
    # the fused scores as served (the old default): normalised per query, they see the shift later or never
    common = ("--calibration", str(cal_path), "--qa", str(files["qa"]))
    served = _run(files, tmp_path / "served.json", "shifted", *common, "--monitor-scores", "served")
    p_mean = sum(served["p_values"]) / len(served["p_values"])
    assert served["score_source"] == "served"
    assert served["alarm_query"] is None or default["alarm_query"] <= served["alarm_query"]
    # no shift: unseen questions about the indexed passages, shuffled
    calm = _run(files, tmp_path / "calm.json", "unshifted", *common)
    assert calm["score_source"] == "dense" and calm["alarm_query"] is None
    assert "statistic of the dense scores" in capsys.readouterr().out
    with capsys.disabled():  # the figures, for the record (pytest -s)
        print(
            f"\n{framework} shift: default (dense behind the fusion) alarms at query {default['alarm_query']}, "
            f"the served fused scores at {served['alarm_query']} (mean p {p_mean:.3f}); "
            f"no shift: {calm['alarm_query']} in {calm['n_stream']} queries"
        )
