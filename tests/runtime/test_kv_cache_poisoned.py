"""Issue 41 section 6, poisoned caches: the JSON cache reads its rows as strict JSON.

A row nested 100,000 deep raised ``RecursionError`` out of ``JsonCache.get`` (and so out of the judge
and question generation); ``NaN``/``Infinity`` and numbers that overflow to infinity were read as
values. Each is now a bad row: a miss, logged, rewritten by the next put.
"""

from __future__ import annotations

import logging

import pytest

from conformal_rag_plugins.runtime.kv_cache import JsonCache, is_text_record

LOGGER = "conformal_rag_plugins"

POISONED = {
    "100k-deep JSON (RecursionError)": "[" * 100_000 + "]" * 100_000,
    "deep inside a text record": '{"text": "yes", "x": ' + "[" * 100_000 + "]" * 100_000 + "}",
    "NaN beside the text": '{"text": "yes", "score": NaN}',
    "1e999 beside the text": '{"text": "yes", "score": 1e999}',
}


@pytest.mark.parametrize("row", list(POISONED.values()), ids=list(POISONED))
def test_a_poisoned_json_row_is_a_logged_miss_then_rewritten(tmp_path, caplog, row) -> None:
    cache = JsonCache(tmp_path / "llm.sqlite")
    cache.put_text("k", row)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        assert cache.get("k", is_text_record) is None
    assert "treated as a miss" in caplog.text
    assert cache.put("k", {"text": "no"}) and cache.get("k", is_text_record) == {"text": "no"}
