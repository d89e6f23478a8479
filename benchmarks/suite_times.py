"""Time the test tiers: how long ``make check`` (fast tier) and ``make test`` (full suite) take.

Run ``python benchmarks/suite_times.py --tier full --label after`` from the repository root. It runs
pytest on the tier with an empty model-sample cache (``CONFORMAL_RAG_CACHE`` in a new temporary
directory, as on a fresh machine) and writes ``benchmarks/results/suite_times_<label>.{json,md}``:
the wall time, pytest's own time, the outcome counts and the slowest test phases.

``--root DIR`` times another checkout with this interpreter (e.g. an older commit from
``git worktree add``; its package comes first on ``PYTHONPATH``). ``--log FILE`` reads the output of
a run made elsewhere (``make test``, CI) instead of running one; its time is the one pytest reports.
Compare runs made on the same machine only: these machines differ by about two times in speed.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: The pytest arguments of each tier, as in the Makefile's ``check`` and ``test`` targets.
TIERS = {"fast": ["-m", "not integration and not statistical"], "full": []}
_SUMMARY = re.compile(r"^=*\s*(?P<counts>\d+ \w+.*?) in (?P<seconds>[\d.]+)s\b", re.MULTILINE)
_COUNT = re.compile(r"(\d+) (passed|failed|skipped|errors?|deselected|xfailed|xpassed|warnings?)")
_SLOW = re.compile(r"^(?P<seconds>[\d.]+)s (?P<phase>call|setup|teardown)\s+(?P<test>\S+)", re.MULTILINE)


def parse_pytest_output(text: str) -> dict:
    """Outcome counts, pytest's reported seconds and the slowest phases of one pytest run's output.

    Raises
    ------
    ValueError
        The output has no final summary line (the run did not finish).

    Examples
    --------
    >>> out = "0.50s call     tests/test_a.py::test_x\\n=== 3 passed, 1 skipped in 12.30s ==="
    >>> r = parse_pytest_output(out)
    >>> r["counts"], r["pytest_seconds"], r["slowest"][0]["test"]
    ({'passed': 3, 'skipped': 1}, 12.3, 'tests/test_a.py::test_x')
    """
    found = list(_SUMMARY.finditer(text))
    if not found:
        raise ValueError("no pytest summary line (e.g. '3 passed in 12.3s'): the run did not finish")
    last = found[-1]
    counts: dict[str, int] = {}
    for n, what in _COUNT.findall(last.group("counts")):
        key = {"error": "errors", "warning": "warnings"}.get(what, what)
        counts[key] = counts.get(key, 0) + int(n)
    slowest = [
        {"seconds": float(m.group("seconds")), "phase": m.group("phase"), "test": m.group("test")}
        for m in _SLOW.finditer(text)
    ]
    return {"counts": counts, "pytest_seconds": float(last.group("seconds")), "slowest": slowest}


def run_tier(root: Path, tier: str) -> tuple[str, float]:
    """Run one tier of ``root``'s tests with an empty sample cache; its output and wall seconds."""
    env = dict(os.environ)
    env["CONFORMAL_RAG_CACHE"] = tempfile.mkdtemp(prefix="suite-times-cache-")
    if tier == "full":
        env["CONFORMAL_RAG_REQUIRE_BROWSER"] = "1"
    if root != ROOT:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(root), env.get("PYTHONPATH")) if p)
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--durations=15", *TIERS[tier]]
    start = time.perf_counter()
    done = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, check=False)
    return done.stdout + done.stderr, time.perf_counter() - start


def markdown(result: dict) -> str:
    counts = ", ".join(f"{n} {what}" for what, n in result["counts"].items())
    wall = "" if result["wall_seconds"] is None else f"{result['wall_seconds']:.0f} s wall, "
    lines = [
        f"# Test suite times ({result['label']}, {result['tier']} tier)",
        "",
        f"{wall}{result['pytest_seconds']:.0f} s reported by pytest; {counts}.",
        "",
        "| seconds | phase | test |",
        "|---|---|---|",
        *(f"| {s['seconds']:.1f} | {s['phase']} | `{s['test']}` |" for s in result["slowest"]),
        "",
        f"Source: {result['source']}.",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tier", choices=sorted(TIERS), default="fast", help="which tier (default: fast)")
    parser.add_argument("--label", default="now", help="suffix of the result files (default: now)")
    parser.add_argument("--root", type=Path, default=ROOT, help="the checkout to time (default: this one)")
    parser.add_argument("--log", type=Path, help="read this pytest output instead of running the tier")
    args = parser.parse_args(argv)
    if args.log is not None:
        text, wall, source = args.log.read_text(encoding="utf-8", errors="replace"), None, f"the log {args.log.name}"
    else:
        root = args.root.resolve()
        text, wall = run_tier(root, args.tier)
        source = f"`python benchmarks/suite_times.py --tier {args.tier}` on {root.name}"
    try:
        parsed = parse_pytest_output(text)
    except ValueError as exc:
        print(f"suite_times: {exc}", file=sys.stderr)
        return 2
    result = {"label": args.label, "tier": args.tier, "wall_seconds": wall, "source": source, **parsed}
    out = ROOT / "benchmarks" / "results"
    (out / f"suite_times_{args.label}.json").write_text(json.dumps(result, indent=2) + "\n")
    (out / f"suite_times_{args.label}.md").write_text(markdown(result))
    print(markdown(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
