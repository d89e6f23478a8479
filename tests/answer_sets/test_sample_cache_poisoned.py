"""Issue 41 section 6, poisoned caches: a sample row is served only when every value in it is one a sampler writes.

Python's JSON parser reads ``NaN`` and ``Infinity``, turns ``1e999`` into ``inf`` and fails with
``RecursionError`` on deep nesting. Before the fix a row with ``logprob: NaN`` or ``"Infinity"`` was
served (its likelihood then broke frequency ties), ``prompt_tokens: 1e999`` raised ``OverflowError``
and a 100k-deep row ``RecursionError`` out of the sampler. Each is now a miss: drawn afresh,
rewritten, with a warning.
"""

from __future__ import annotations

import asyncio
import logging

import pytest

from conformal_rag_plugins.answer_sets.concurrent_draws import draw_samples
from conformal_rag_plugins.answer_sets.sample_cache import SampleCache
from conformal_rag_plugins.answer_sets.sample_record import Sample

LOGGER = "conformal_rag_plugins"
M = 2


def _row(**fields: str) -> str:
    """``M`` copies of one sample record whose fields are raw JSON text."""
    record = "{" + ", ".join(['"text": "INJECTED"', *(f'"{k}": {v}' for k, v in fields.items())]) + "}"
    return "[" + ", ".join([record] * M) + "]"


POISONED_ROWS = {
    "logprob NaN": _row(logprob="NaN"),
    "logprob Infinity": _row(logprob="Infinity"),
    "logprob -Infinity": _row(logprob="-Infinity"),
    'logprob "Infinity" (a string)': _row(logprob='"Infinity"'),
    'logprob "nan" (a string)': _row(logprob='"nan"'),
    "logprob above 0": _row(logprob="3.5"),
    "prompt_tokens 1e999 (OverflowError)": _row(prompt_tokens="1e999"),
    "completion_tokens NaN": _row(completion_tokens="NaN"),
    "prompt_tokens negative": _row(prompt_tokens="-5"),
    "prompt_tokens 2.5": _row(prompt_tokens="2.5"),
    "failed is a string": _row(failed='"no"'),
    "100k-deep JSON (RecursionError)": "[" * 100_000 + "]" * 100_000,
    "deep inside a record": "["
    + ", ".join(['{"text": "x", "extra": ' + "[" * 100_000 + "]" * 100_000 + "}"] * M)
    + "]",
}


class CountingLLM:
    def __init__(self) -> None:
        self.calls = 0

    async def __call__(self) -> Sample:
        self.calls += 1
        return Sample("Rollo", 10, 2, logprob=-0.25)


def _draw(cache: SampleCache, llm: CountingLLM) -> list[Sample]:
    return asyncio.run(draw_samples(llm, n=M, max_concurrency=1, retries=0, timeout=None, cache=cache, key="k"))


@pytest.mark.parametrize("row", list(POISONED_ROWS.values()), ids=list(POISONED_ROWS))
def test_a_poisoned_sample_row_is_a_miss_and_is_rewritten(tmp_path, caplog, row) -> None:
    cache = SampleCache(tmp_path / "samples.sqlite")
    cache.put_text("k", row)
    llm = CountingLLM()
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        got = _draw(cache, llm)
    assert [(s.text, s.logprob) for s in got] == [("Rollo", -0.25)] * M and llm.calls == M  # nothing served
    assert "treated as a miss" in caplog.text
    assert [s.text for s in cache.get("k", M)] == ["Rollo"] * M  # rewritten
    cache.close()


def test_a_well_formed_row_with_logprobs_and_tokens_is_still_served(tmp_path) -> None:
    cache = SampleCache(tmp_path / "samples.sqlite")
    cache.put_text("k", _row(logprob="-0.5", prompt_tokens="12", completion_tokens="3"))
    llm = CountingLLM()
    got = _draw(cache, llm)
    assert llm.calls == 0 and [(s.text, s.logprob, s.prompt_tokens) for s in got] == [("INJECTED", -0.5, 12)] * M
