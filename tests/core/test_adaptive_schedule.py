"""Geometric context schedule and "no answer" detection (core.adaptive_schedule)."""

from __future__ import annotations

import itertools
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conformal_rag_plugins.core.adaptive_schedule import geometric_schedule, is_no_answer
from conformal_rag_plugins.core.errors import ConformalError

counts = st.integers(min_value=0, max_value=5000)
initials = st.integers(min_value=1, max_value=50)
factors = st.floats(min_value=1.01, max_value=10.0, allow_nan=False, allow_infinity=False)
rounds = st.one_of(st.none(), st.integers(min_value=1, max_value=12))


@settings(max_examples=300, deadline=None)
@given(n=counts, initial=initials, factor=factors, max_rounds=rounds)
def test_schedule_is_strictly_increasing_and_ends_at_the_whole_set(n, initial, factor, max_rounds) -> None:
    sizes = geometric_schedule(n, initial=initial, factor=factor, max_rounds=max_rounds)
    if n == 0:
        assert sizes == []
        return
    assert sizes[-1] == n
    assert all(isinstance(s, int) for s in sizes)
    assert all(a < b for a, b in itertools.pairwise(sizes))
    assert 1 <= sizes[0] <= n
    if max_rounds is not None:
        assert len(sizes) <= max_rounds
    if max_rounds is None or max_rounds > 1:
        assert sizes[0] == min(initial, n)
    else:
        assert sizes == [n]


@settings(max_examples=200, deadline=None)
@given(n=counts, initial=initials, factor=factors)
def test_schedule_follows_the_geometric_series_until_the_cap(n, initial, factor) -> None:
    sizes = geometric_schedule(n, initial=initial, factor=factor)
    for k, size in enumerate(sizes[:-1]):
        # ceil(initial * factor**k), raised to stay strictly increasing
        assert size >= math.ceil(initial * factor**k - 1e-9)
        if k:
            assert size == max(sizes[k - 1] + 1, math.ceil(initial * factor**k - 1e-9))


@settings(max_examples=200, deadline=None)
@given(n=st.integers(min_value=1, max_value=10_000), initial=initials, factor=st.floats(min_value=2.0, max_value=10.0))
def test_schedule_length_is_logarithmic_and_cost_linear(n, initial, factor) -> None:
    sizes = geometric_schedule(n, initial=initial, factor=factor)
    if n <= initial:
        assert sizes == [n]
        return
    # one round per power of the factor needed to reach n (sizes are rounded up), plus the first round
    expected = 1 + next(k for k in itertools.count() if math.ceil(initial * factor**k - 1e-9) >= n)
    assert len(sizes) == expected
    assert len(sizes) <= 1 + math.ceil(math.log(n / initial, factor) - 1e-9)  # logarithmic in n
    # every round but the last costs less than factor / (factor - 1) times the whole set (+ rounding)
    assert sum(sizes[:-1]) <= n * factor / (factor - 1) + len(sizes)


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({"n_available": 10}, [1, 2, 4, 8, 10]),
        ({"n_available": 8}, [1, 2, 4, 8]),
        ({"n_available": 1}, [1]),
        ({"n_available": 0}, []),
        ({"n_available": 64, "initial": 1, "factor": 2.0}, [1, 2, 4, 8, 16, 32, 64]),
        ({"n_available": 10, "initial": 3, "factor": 1.5}, [3, 5, 7, 10]),
        ({"n_available": 20, "initial": 2, "factor": 3}, [2, 6, 18, 20]),
        ({"n_available": 5, "initial": 1, "factor": 1.1}, [1, 2, 3, 4, 5]),  # +1 keeps it strictly increasing
        ({"n_available": 30, "initial": 10, "factor": 1.1}, [10, 11, 13, 14, 15, 17, 18, 20, 22, 24, 26, 29, 30]),
        ({"n_available": 100, "max_rounds": 3}, [1, 2, 100]),
        ({"n_available": 100, "max_rounds": 1}, [100]),
        ({"n_available": 4, "max_rounds": 10}, [1, 2, 4]),
        ({"n_available": 3, "initial": 7}, [3]),
    ],
)
def test_schedule_examples(kwargs, expected) -> None:
    n = kwargs.pop("n_available")
    assert geometric_schedule(n, **kwargs) == expected


@pytest.mark.parametrize(
    ("args", "kwargs", "message"),
    [
        ((-1,), {}, "n_available must be >= 0"),
        ((2.5,), {}, "n_available must be an integer"),
        ((True,), {}, "n_available must be an integer"),
        ((5,), {"initial": 0}, "initial must be >= 1"),
        ((5,), {"initial": 1.5}, "initial must be an integer"),
        ((5,), {"factor": 1.0}, "factor must be a finite number > 1"),
        ((5,), {"factor": 0.5}, "factor must be a finite number > 1"),
        ((5,), {"factor": float("inf")}, "factor must be a finite number > 1"),
        ((5,), {"factor": float("nan")}, "factor must be a finite number > 1"),
        ((5,), {"factor": "2"}, "factor must be a finite number > 1"),
        ((5,), {"max_rounds": 0}, "max_rounds must be >= 1"),
        ((0,), {"max_rounds": 0}, "max_rounds must be >= 1"),  # validated even for an empty set
    ],
)
def test_schedule_rejects_bad_input(args, kwargs, message) -> None:
    with pytest.raises(ConformalError, match=message):
        geometric_schedule(*args, **kwargs)


@pytest.mark.parametrize(
    "text",
    [
        None,
        "",
        "   ",
        "I don't know",
        "I don't know.",
        "i do not know",
        "I DON'T KNOW!",
        '"I don\'t know."',
        "“I don’t know.”",
        "I dont know",
        "Don't know",
        "I don't know who that was.",
        "Answer: I don't know",
        "Sorry, I don't know.",
        "I'm sorry, but the context does not say.",
        "Unfortunately, the answer is not provided.",
        "The answer cannot be found in the context.",
        "Unknown",
        "unknown.",
        "The answer is unknown",
        "No answer",
        "No answer found.",
        "Not mentioned",
        "Not mentioned in the passage.",
        "The answer is not mentioned in the context.",
        "Not in the context",
        "Not in the context.",
        "not in the provided context",
        "Not provided",
        "The information is not provided",
        "Not found in the context",
        "Cannot be determined",
        "It cannot be determined from the context.",
        "Cannot answer",
        "I cannot answer that question.",
        "The context does not say.",
        "The passage does not mention it",
        "I could not find an answer.",  # Pathway's refusal phrase
        "I couldn't find the answer",
        "N/A",
        "n/a",
        "n.a.",
        "N / A",
        "None",
        "none.",
        "'None'",
        "Not sure",
        "I'm not sure",
        "No information",
        "There is no information about that.",
        "Insufficient information",
        "unanswerable",
    ],
)
def test_no_answer_positives(text) -> None:
    assert is_no_answer(text)


@pytest.mark.parametrize(
    "text",
    [
        "Rollo",
        "1889",
        "No",
        "No.",
        "Yes",
        "None of the above",
        "None of them survived",
        "None of the Normans",
        "no more than ten",
        "Noname",
        "Nobody",
        "No Doubt",
        "Norway",
        "Unknown Soldier",
        "the Tomb of the Unknown Soldier",
        "Na",  # sodium
        "NaCl",
        "Answer",
        "Answer: Rollo",
        "Sorry",
        "Sorry Seems to Be the Hardest Word",
        "Unfortunately, Rollo",
        "It was not until 1066",
        "Not Only But Also",
        "a knowledge of the sea",
        "The king did not know of the plot",
        "They knew nothing",
        "notion of the sublime",
        "in the context of the war",
    ],
)
def test_no_answer_negatives(text) -> None:
    assert not is_no_answer(text)


def test_no_answer_is_stable_under_case_quotes_and_trailing_punctuation() -> None:
    base = "I don't know"
    variants = [
        base.upper(),
        base.lower(),
        f"'{base}'",
        f'"{base}"',
        f"{base}...",
        f"{base}!?",
        f"  {base} ",
        f"({base})",
    ]
    assert all(is_no_answer(v) for v in variants)
    real = "Rollo"
    assert not any(is_no_answer(v) for v in [real.upper(), f"'{real}'", f"{real}.", f"({real})"])
