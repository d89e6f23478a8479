"""When the candidate pool is too small: the miss share against alpha/2, and which pool size helps."""

from __future__ import annotations

from collections.abc import Mapping


def pool_miss_advice(
    n_misses: int,
    n: int,
    alpha: float,
    pool_size: int,
    shares_by_pool: Mapping[int, float] | None = None,
    *,
    miss_bound: float | None = None,
    flagged: bool | None = None,
) -> str | None:
    """A warning when more than ``miss_bound`` (default ``alpha/2``) of ``n`` questions miss the pool, else ``None``.

    ``miss_bound`` is the share a flagged set assumes, so this is the condition its flag rests on;
    ``flagged`` (whether the calibration's threshold is still flagged) says what the misses did to it.
    ``shares_by_pool`` (measured pool size -> miss share) names the smallest pool at or below the
    bound; without it the advice is to try 2x and 4x.

    Examples
    --------
    >>> pool_miss_advice(2, 100, 0.1, 50) is None
    True
    >>> pool_miss_advice(9, 100, 0.1, 50, {50: 0.09, 100: 0.04, 200: 0.02}).split(". ")[-1]
    'A pool of 100 misses 4.0%; use it (pool_size=100 / --pool-size 100).'
    """
    bound = alpha / 2 if miss_bound is None else miss_bound
    if n <= 0 or n_misses <= bound * n:
        return None
    what = f"alpha/2 = {100 * alpha / 2:g}%" if miss_bound is None else f"miss_bound = {100 * bound:g}%"
    head = (
        f"{n_misses} of {n} questions ({100 * n_misses / n:.1f}%) have no gold candidate in the pool of {pool_size}, "
        f"more than {what}: the threshold must be large to cover them, so sets are large."
    )
    if flagged is True:
        head += (
            " The sets are still flagged guaranteed (a pool that honours the bound gives this many misses by "
            "chance), but if the pool really misses more than the bound, the flag overstates coverage."
        )
    elif flagged is False:
        head += " The flag is withdrawn: the sets are not guaranteed."
    larger = sorted((p, s) for p, s in (shares_by_pool or {}).items() if p > pool_size)
    for p, share in larger:
        if share <= bound:
            return f"{head} A pool of {p} misses {100 * share:.1f}%; use it (pool_size={p} / --pool-size {p})."
    if larger:
        p, share = larger[-1]
        return (
            f"{head} Even a pool of {p} misses {100 * share:.1f}%: check the gold labels, or index smaller units "
            "and return their parents."
        )
    return f"{head} Try a larger pool (pool_size={2 * pool_size} or {4 * pool_size}) and compare."
