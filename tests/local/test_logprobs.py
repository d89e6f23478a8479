"""The likelihood score is a fixed function of (prompt, text) with the real local model (issue 21 part 3).

The score of a sampled answer at calibration time must equal the score of the same text at query
time, whatever the model did in between. llama.cpp's numbers depend on how the prompt prefix in its
KV cache was computed (batches, cache cells), so the old scorer, which reused whatever prefix the
cache held, gave another value after another call history (by up to 0.14 nats on Gemma 3 270M here).
The negative control runs that old scorer under the same histories and must see them differ.
"""

# Also exercises, through the code it calls (see the COVERAGE.md of the module's test folder):
#   conformal_rag_plugins/local/langchain_logprobs.py
#   conformal_rag_plugins/local/llamaindex_logprobs.py

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest

from conformal_rag_plugins.answer_sets.prompts import FEW_SHOT_TEMPLATE
from conformal_rag_plugins.local.logprobs import _last_logprobs, continuation_logprob

pytestmark = pytest.mark.integration


def _prompt(context: str, question: str) -> str:
    return FEW_SHOT_TEMPLATE.replace("{context}", context).replace("{question}", question)


def _prefix_reusing_score(llama: Any, prompt: str, text: str) -> float:
    """The scorer before the fix: keep the longest prefix already in the KV cache (the negative control)."""
    cont = llama.tokenize(text.encode("utf-8"), add_bos=False, special=False)
    tokens = llama.tokenize(prompt.encode("utf-8"), add_bos=True, special=True)
    done = llama.input_ids[: llama.n_tokens].tolist()
    keep = 0
    while keep < min(len(done), len(tokens) - 1) and done[keep] == tokens[keep]:
        keep += 1
    llama.n_tokens = keep
    llama.eval(tokens[keep:])
    total = 0.0
    for k, tok in enumerate(cont):
        total += float(_last_logprobs(llama)[tok])
        if k + 1 < len(cont):
            llama.eval([tok])
    return total / len(cont)


def _histories(llm: Any, llama: Any, prompt: str, other: str, *, slow: bool) -> dict[str, Callable[[], None]]:
    """Ways the model's KV cache can differ before a query-time score of ``prompt``.

    ``slow`` adds the prefix evaluated one token at a time (one decode per prompt token).
    """
    tokens = llama.tokenize(prompt.encode("utf-8"), add_bos=True, special=True)

    def token_by_token() -> None:
        llama.reset()
        for tok in tokens[:-1]:
            llama.eval([tok])

    def split_prefix() -> None:
        llama.reset()
        llama.eval(tokens[: len(tokens) // 2 + 17])

    out = {
        "another question sampled": lambda: llm.complete(other, formatted=True),
        "prefix evaluated in other batches": split_prefix,
    }
    if slow:
        out["this prompt sampled again"] = lambda: llm.complete(prompt, formatted=True)
        out["prefix evaluated token by token"] = token_by_token
    return out


@pytest.mark.parametrize("framework", ["llamaindex", "langchain"])
def test_calibration_and_query_time_scores_are_bit_equal(framework: str, squad_entries) -> None:
    if framework == "llamaindex":
        from conformal_rag_plugins.local.llamaindex_models import local_llm

        llm = local_llm(temperature=1.0, max_new_tokens=8, n_ctx=2048, logprobs=True)
        llama = llm._model

        def sample(prompt: str) -> tuple[str, float | None]:
            response = llm.complete(prompt, formatted=True)
            logprobs = response.raw["choices"][0]["logprobs"]
            return response.text, None if logprobs is None else logprobs["token_logprobs"][0]

        complete = llm
    else:
        from conformal_rag_plugins.local.langchain_models import local_llm

        lc = local_llm(temperature=1.0, max_tokens=8, logprobs=True)
        llama = lc.client

        def sample(prompt: str) -> tuple[str, float | None]:
            gen = lc.generate([prompt]).generations[0][0]
            logprobs = gen.generation_info["logprobs"]
            return gen.text, None if logprobs is None else logprobs["token_logprobs"][0]

        class _Complete:
            @staticmethod
            def complete(prompt: str, formatted: bool = True) -> None:
                lc.invoke(prompt)

        complete = _Complete()

    short = _prompt(squad_entries[0].text[:300], "Who are the Normans?")
    long = _prompt(" ".join(e.text for e in squad_entries[:6])[:2400], "What is this about?")
    assert len(llama.tokenize(long.encode("utf-8"), add_bos=True, special=True)) > llama.n_batch  # several batches
    fixed = " the Normans"
    for prompt, other, slow in ((short, long, True), (long, short, False)):
        # calibration time: a sampled answer scored right after it was drawn, and a fixed text
        text, at_calibration = sample(prompt)
        while not text.strip():  # an empty answer has no likelihood; draw again
            text, at_calibration = sample(prompt)
        fixed_at_calibration = continuation_logprob(llama, prompt, fixed)
        assert at_calibration is not None and math.isfinite(at_calibration)
        negative = {"calibration": _prefix_reusing_score(llama, prompt, fixed)}
        for name, history in _histories(complete, llama, prompt, other, slow=slow).items():
            history()
            assert continuation_logprob(llama, prompt, text) == at_calibration, name  # bit-equal, not approx
            assert continuation_logprob(llama, prompt, fixed) == fixed_at_calibration, name
            history()
            negative[name] = _prefix_reusing_score(llama, prompt, fixed)
        # negative control: the prefix-reusing scorer moves with the history on this model
        assert len(set(negative.values())) > 1, negative
