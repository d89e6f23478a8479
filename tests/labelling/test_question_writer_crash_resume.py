"""A run killed with SIGKILL part-way resumes from its caches: after the restart no LLM call is repeated
that had been cached before the kill (only calls in flight at that moment may repeat), and the result
equals that of an uninterrupted run in a fresh cache.

Each case runs a real driver subprocess over 20 items with a fake LLM that sleeps a little per call
and appends one line per completed call (a hash of its prompt) to a log file.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

N_ITEMS = 20
MAX_CONCURRENCY = 2  # so at most this many calls are in flight when the driver is killed
KILL_AFTER = 8  # logged calls

DRIVER = textwrap.dedent(
    '''
    """Crash-resume driver: python driver.py MODE CACHE_DIR CALL_LOG RESULT."""
    import asyncio, hashlib, json, os, re, sys
    from typing import Any

    MODE, CACHE_DIR, CALL_LOG, RESULT = sys.argv[1:5]
    N, CONCURRENCY, DELAY = int(os.environ["N_ITEMS"]), int(os.environ["MAX_CONCURRENCY"]), 0.05


    def text(i: int) -> str:
        return (f"Item {i:02d}: the harbour of Zorvik{i} was rebuilt by the engineer Talmar{i} "
                f"after the great storm, and the town grew rich on its trade in salt and wool.")


    async def fake_llm(prompt: str) -> str:
        """Deterministic in the prompt; logs each completed call, one flushed line."""
        await asyncio.sleep(DELAY)
        with open(CALL_LOG, "a", encoding="utf-8") as log:
            log.write(hashlib.sha256(prompt.encode("utf-8")).hexdigest()[:16] + "\\n")
            log.flush()
        if MODE == "judge":
            asked = int(re.findall(r"Zorvik(\\d+)\\?", prompt)[-1])  # the question
            shown = int(re.findall(r"Item (\\d+):", prompt)[-1])  # the chunk to judge
            return "Yes" if asked == shown else "No"
        i = re.findall(r"Talmar(\\d+)", prompt)[-1]
        if MODE == "questions":
            return json.dumps({"question": f"Who rebuilt the harbour of Zorvik{i}?", "answer": f"Talmar{i}"})
        return f"Talmar{i}"


    def questions() -> Any:
        from llama_index.core.base.llms.types import CompletionResponse, CompletionResponseGen, LLMMetadata
        from llama_index.core.llms import CustomLLM
        from llama_index.core.llms.callbacks import llm_completion_callback
        from llama_index.core.schema import TextNode

        from conformal_rag_plugins.labelling.options import QuestionOptions
        from conformal_rag_plugins.llamaindex import generate_calibration_questions

        class FakeLLM(CustomLLM):
            model: str = "fake-crash"

            @property
            def metadata(self) -> LLMMetadata:
                return LLMMetadata(model_name=self.model, is_chat_model=False)

            @llm_completion_callback()
            def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
                raise NotImplementedError

            @llm_completion_callback()
            async def acomplete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
                return CompletionResponse(text=await fake_llm(prompt))

            @llm_completion_callback()
            def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponseGen:
                raise NotImplementedError

        nodes = [TextNode(id_=f"n{i}", text=text(i), metadata={"parent_id": f"doc{i}"}) for i in range(N)]
        examples, _ = generate_calibration_questions(
            nodes, FakeLLM(), N, cache=os.path.join(CACHE_DIR, "llm.sqlite"),
            options=QuestionOptions(max_concurrency=CONCURRENCY),
        )
        return [[e.question, list(e.answers), list(e.gold_ids)] for e in examples]


    def judge() -> Any:
        from langchain_core.documents import Document
        from langchain_core.language_models import BaseChatModel
        from langchain_core.messages import AIMessage
        from langchain_core.outputs import ChatGeneration, ChatResult
        from langchain_core.retrievers import BaseRetriever

        from conformal_rag_plugins.datasets.examples import CalibrationExample
        from conformal_rag_plugins.labelling.options import JudgeOptions
        from conformal_rag_plugins.langchain import label_with_judge

        class FakeJudge(BaseChatModel):
            model_name: str = "fake-crash-judge"

            @property
            def _llm_type(self) -> str:
                return "fake-crash"

            def _generate(self, messages, stop=None, run_manager=None, **kwargs):
                raise NotImplementedError

            async def _agenerate(self, messages, stop=None, run_manager=None, **kwargs):
                prompt = "\\n".join(str(m.content) for m in messages)
                return ChatResult(generations=[ChatGeneration(message=AIMessage(content=await fake_llm(prompt)))])

        class Ranking(BaseRetriever):
            """Two distractors, then the chunk with the answer, then two more."""

            def _get_relevant_documents(self, query, *, run_manager=None):
                i = int(re.findall(r"Zorvik(\\d+)", query)[-1])
                order = [(i + 7) % N, (i + 3) % N, i, (i + 1) % N, (i + 2) % N]
                return [Document(page_content=text(j), id=f"n{j}", metadata={"id": f"n{j}", "score": 1.0 - r / 10})
                        for r, j in enumerate(order)]

        examples = [CalibrationExample(f"Who rebuilt the harbour of Zorvik{i}?", answers=(f"Talmar{i}",))
                    for i in range(N)]
        labelled, _ = label_with_judge(Ranking(), examples, FakeJudge(), budget=4, pool_size=5,
                                       cache=os.path.join(CACHE_DIR, "llm.sqlite"),
                                       options=JudgeOptions(max_concurrency=CONCURRENCY))
        return [[e.question, list(e.gold_ids), e.metadata["gold_rank"]] for e in labelled]


    def samples() -> Any:
        from langchain_core.language_models import BaseChatModel
        from langchain_core.messages import AIMessage
        from langchain_core.outputs import ChatGeneration, ChatResult

        from conformal_rag_plugins.answer_sets.sample_cache import SampleCache
        from conformal_rag_plugins.langchain.answer_sampler import LangChainSampler

        class FakeChat(BaseChatModel):
            model_name: str = "fake-crash-sampler"

            @property
            def _llm_type(self) -> str:
                return "fake-crash"

            def _generate(self, messages, stop=None, run_manager=None, **kwargs):
                raise NotImplementedError

            async def _agenerate(self, messages, stop=None, run_manager=None, **kwargs):
                prompt = "\\n".join(str(m.content) for m in messages)
                return ChatResult(generations=[ChatGeneration(message=AIMessage(content=await fake_llm(prompt)))])

        sampler = LangChainSampler(FakeChat(), n_samples=1, max_concurrency=CONCURRENCY,
                                   cache=SampleCache(os.path.join(CACHE_DIR, "samples.sqlite")))

        async def all_items():
            return await asyncio.gather(*(sampler.asample(f"Who rebuilt the harbour of Zorvik{i}?", text(i))
                                          for i in range(N)))

        return [[s.text for s in draw] for draw in asyncio.run(all_items())]


    result = {"questions": questions, "judge": judge, "samples": samples}[MODE]()
    with open(RESULT, "w", encoding="utf-8") as out:
        json.dump(result, out)
    '''
)


def _env() -> dict[str, str]:
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.update(N_ITEMS=str(N_ITEMS), MAX_CONCURRENCY=str(MAX_CONCURRENCY), TOKENIZERS_PARALLELISM="false")
    return env


def _start(tmp_path: Path, mode: str, cache_dir: Path, log: Path, result: Path) -> subprocess.Popen[str]:
    cache_dir.mkdir(exist_ok=True)
    return subprocess.Popen(
        [sys.executable, str(tmp_path / "driver.py"), mode, str(cache_dir), str(log), str(result)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
    )


def _finish(proc: subprocess.Popen[str], timeout: float = 120.0) -> None:
    _, err = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, err


def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").split() if path.exists() else []


@pytest.mark.parametrize("mode", ["questions", "judge", "samples"])
def test_killed_run_resumes_from_its_caches_without_repeating_cached_calls(tmp_path: Path, mode: str) -> None:
    (tmp_path / "driver.py").write_text(DRIVER)
    crashed, fresh = tmp_path / "crashed", tmp_path / "fresh"
    before, after, full = tmp_path / "calls_before.log", tmp_path / "calls_after.log", tmp_path / "calls_full.log"

    # the reference: an uninterrupted run in its own cache (started first, it overlaps the crash run)
    reference = _start(tmp_path, mode, fresh, full, tmp_path / "full.json")

    proc = _start(tmp_path, mode, crashed, before, tmp_path / "killed.json")
    deadline = time.monotonic() + 60.0
    while len(_lines(before)) < KILL_AFTER:
        assert proc.poll() is None, proc.communicate()[1]
        assert time.monotonic() < deadline, "the driver made too few calls"
        time.sleep(0.005)
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    assert not (tmp_path / "killed.json").exists()

    _finish(_start(tmp_path, mode, crashed, after, tmp_path / "resumed.json"))
    _finish(reference)

    calls_before, calls_after, calls_full = _lines(before), _lines(after), _lines(full)
    assert KILL_AFTER <= len(calls_before) < len(calls_full)  # killed part-way
    assert len(set(calls_full)) == len(calls_full)  # an uninterrupted run asks each prompt once
    assert len(set(calls_before)) == len(calls_before) and len(set(calls_after)) == len(calls_after)
    repeated = set(calls_before) & set(calls_after)
    # only a call whose answer was not yet stored at the kill may be asked again
    assert len(repeated) <= MAX_CONCURRENCY, repeated
    assert set(calls_before) | set(calls_after) == set(calls_full)
    assert len(calls_after) == len(calls_full) - len(calls_before) + len(repeated)

    resumed = json.loads((tmp_path / "resumed.json").read_text())
    assert resumed == json.loads((tmp_path / "full.json").read_text())
    assert len(resumed) == N_ITEMS
    if mode == "judge":  # the judge found each answer at rank 3, after two distractors
        assert all(rank == 3 for _, _, rank in resumed)
    else:  # every item made it, with its own answer
        assert set(re.findall(r"Talmar\d+", json.dumps(resumed))) == {f"Talmar{i}" for i in range(N_ITEMS)}
