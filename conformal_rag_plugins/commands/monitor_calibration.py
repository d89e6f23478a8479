"""The calibration ``conformal-rag monitor`` watches: a deployed one or one made here as ``calibrate`` would.

A deployed calibration fixes alpha, host and pool; a differing command-line option is refused.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .framework_registry import FRAMEWORKS

#: Defaults of the options a ``--calibration`` or ``--resume`` file may fix instead.
DEFAULTS: dict[str, Any] = {
    "alpha": 0.1,
    "delta": 0.01,
    "statistic": "top1",
    "retriever": "hybrid",
    "fusion": "tuned",
    "framework": FRAMEWORKS[0],
    "pool_size": 50,
    "seed": 0,
}


def refuse_disagreeing(given: dict[str, Any], stored: dict[str, Any], source: str) -> None:
    """Refuse an option given on the command line that differs from what ``source`` fixes."""
    from ..core.errors import ConformalError

    for name, value in given.items():
        if value is None:
            continue
        have = stored[name]
        same = math.isclose(value, have) if isinstance(value, float) and isinstance(have, float) else value == have
        if not same:
            flag = "--" + name.replace("_", "-")
            raise ConformalError(f"{flag} {value} disagrees with {source}, which fixes it to {have}; leave {flag} out.")


def deployed_options(cal: Any, spec: Any, score: str | None, fusion: str | None) -> dict[str, Any]:
    """What a calibration fixes, in the monitor's option names (``score``/``fusion`` as given when they agree)."""
    tuned = cal.selection_.get("rule") == "tuned-hybrid"
    fusion_key = spec[2].key if spec[2] is not None else None
    agree_fusion = fusion is None or (fusion == "tuned" and tuned) or fusion == fusion_key
    return {
        "alpha": float(cal.alpha_),
        "framework": spec[0],
        "retriever": spec[1],
        "pool_size": int(cal.pool_size_),
        "score": score if score == "auto" and tuned else cal.score_family_,
        "fusion": fusion if agree_fusion else ("tuned" if tuned else fusion_key),
    }


@dataclass(frozen=True)
class Here:
    """How to calibrate here, defaults applied: host kind, fusion, score family, alpha, pool and seed."""

    kind: str
    fusion: str
    score: str | None
    alpha: float
    pool_size: int
    seed: int


def calibrate_here(
    framework: str, chunks: Sequence[Any], examples: Sequence[Any], here: Here, *, client: Any, progress: bool
) -> tuple[Any, Any]:
    """The calibration ``conformal-rag calibrate`` makes with these options, and its host when already built."""
    from ..retrieval.options import RetrievalOptions
    from ..tuning.tuned_calibration import FusionConfig
    from .calibrate_cmd import _tuned, calibrate_built_host
    from .hosts import build_host

    kind, fusion, alpha, pool_size, seed = here.kind, here.fusion, here.alpha, here.pool_size, here.seed
    tuned = kind == "hybrid" and fusion == "tuned"
    family = here.score or ("auto" if tuned else "relative")
    if tuned:
        opts = RetrievalOptions(score=family, random_state=seed, progress=progress)
        return _tuned(framework, chunks, examples, client, level=1 - alpha, pool=pool_size, options=opts), None
    config = FusionConfig.parse(fusion) if kind == "hybrid" else None
    bundle = build_host(framework, kind, chunks, pool_size=pool_size, client=client, fusion=config)
    return calibrate_built_host(framework, bundle.host, examples, 1 - alpha, family, pool_size, seed, progress), bundle
