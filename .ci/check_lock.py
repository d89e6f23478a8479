"""Check that the running environment is exactly the lock (``constraints.txt``).

Usage: ``python .ci/check_lock.py constraints.txt``. Fails (exit 1) and names every package
that drifted: installed at another version, missing, or installed but not in the lock. Then
runs ``pip check`` so broken requirements fail too. ``make test`` runs it first.
"""

from __future__ import annotations

import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path

PROJECT = "conformal-rag-plugins"


def canonicalize_name(name: str) -> str:
    """PEP 503 normal form: lower case, runs of ``-_.`` become one ``-``."""
    return re.sub(r"[-_.]+", "-", name).lower()


def read_lock(path: Path) -> dict[str, str]:
    pins = {}
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        name, sep, version = line.partition("==")
        if not sep:
            raise SystemExit(f"{path}: not a pin: {raw!r}")
        pins[canonicalize_name(name)] = version.strip()
    return pins


def installed() -> dict[str, str]:
    found = {}
    for dist in metadata.distributions():
        name = dist.metadata["Name"]
        if name:
            found[canonicalize_name(name)] = dist.version
    return found


def drift(lock: dict[str, str], have: dict[str, str]) -> list[str]:
    problems = []
    for name, version in sorted(lock.items()):
        if name not in have:
            problems.append(f"{name}: locked {version}, not installed")
        elif have[name] != version:
            problems.append(f"{name}: locked {version}, installed {have[name]}")
    for name in sorted(set(have) - set(lock) - {PROJECT}):
        problems.append(f"{name}: installed {have[name]}, not in the lock")
    return problems


def main(lock_path: str = "constraints.txt") -> int:
    path = Path(lock_path)
    problems = drift(read_lock(path), installed())
    if problems:
        print(f"The environment drifted from the lock {path} ({len(problems)} package(s)):", file=sys.stderr)
        for line in problems:
            print(f"  {line}", file=sys.stderr)
        print("Rebuild it: make clean test (or pin the change: edit constraints.in, make lock).", file=sys.stderr)
        return 1
    check = subprocess.run([sys.executable, "-m", "pip", "check"], capture_output=True, text=True)
    if check.returncode != 0:
        print(f"pip check failed:\n{check.stdout}{check.stderr}", file=sys.stderr, end="")
        return 1
    print(f"environment matches the lock {path}: {len(read_lock(path))} pins, pip check clean")
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
