"""The scale-out route: sampling through an OpenAI-compatible server.

A module-scoped fixture starts llama-cpp-python's own server (``python -m llama_cpp.server``) over
the bundled Gemma 3 270M base model on a free loopback port, exactly as a user would start vLLM or
point at a hosted API. The tests drive it through the raw ``openai`` client, LlamaIndex
``OpenAILike`` + :class:`LlamaIndexSampler`, LangChain ``OpenAI`` + :class:`LangChainSampler`, and
``default_llm()`` configured by environment variables. The 270M base model is weak, so the tests
check mechanics (counts, types, token usage, the concurrency limit, failures, the cache), never
answer quality.
"""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.server]

httpx = pytest.importorskip("httpx")
openai = pytest.importorskip("openai")
pytest.importorskip("llama_cpp")
pytest.importorskip("sse_starlette", reason="llama-cpp-python's server needs the llama-cpp-python[server] extras")
pytest.importorskip("llama_index.llms.openai_like")
pytest.importorskip("langchain_openai")

from conformal_rag_plugins.answer_sets.prompts import FEW_SHOT_TEMPLATE  # noqa: E402
from conformal_rag_plugins.answer_sets.sample_cache import SampleCache  # noqa: E402
from conformal_rag_plugins.answer_sets.sample_record import Sample  # noqa: E402

QUESTION = "Who was the Norse leader?"
CONTEXT_ID = "Normans#0"
API_KEY = "sk-local"
START_TIMEOUT_S = 90.0
MAX_TOKENS = 24
# Generous per-request limits: on a busy 2-core machine a queued request can wait many seconds behind
# the one in progress (the server runs one completion at a time). Idle, a sample takes well under 1 s.
REQUEST_TIMEOUT_S = 120.0
SAMPLER_TIMEOUT_S = 180.0


def _free_port() -> int:
    """A loopback port that nothing listens on (the OS picks it; the socket is closed again)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass(frozen=True)
class Server:
    """A running OpenAI-compatible server on 127.0.0.1."""

    base_url: str
    model: str
    startup_s: float

    @property
    def api_base(self) -> str:
        """What ``OPENAI_BASE_URL`` / ``api_base`` / ``base_url`` take (with ``/v1``)."""
        return f"{self.base_url}/v1"


def _get_json(url: str, timeout: float) -> Any:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback: never a proxy
    with opener.open(url, timeout=timeout) as resp:
        return json.loads(resp.read())


def _post_json(url: str, payload: dict[str, Any], timeout: float) -> Any:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    req = urllib.request.Request(url, json.dumps(payload).encode(), {"Content-Type": "application/json"})
    with opener.open(req, timeout=timeout) as resp:
        return json.loads(resp.read())


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, context: str) -> Iterator[Server]:
    """llama-cpp-python's server over Gemma 3 270M on a free 127.0.0.1 port; always stopped."""
    from conformal_rag_plugins.local.llm import gemma_model_path

    model_path = gemma_model_path()
    port = _free_port()
    base_url = f"http://127.0.0.1:{port}"
    log_path = tmp_path_factory.mktemp("llama-server") / "stderr.log"
    cmd = [
        sys.executable,
        "-m",
        "llama_cpp.server",
        "--model",
        str(model_path),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--n_ctx",
        "2048",
        "--n_threads",
        "2",
    ]
    t0 = time.perf_counter()
    # stderr goes to a file, not a pipe: the server logs every request, and a full pipe would block it.
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=log)
    try:
        models = None
        deadline = t0 + START_TIMEOUT_S
        while time.perf_counter() < deadline and proc.poll() is None:
            try:
                models = _get_json(f"{base_url}/v1/models", timeout=2.0)
                break
            except OSError:
                time.sleep(0.2)
        if models is None:
            state = f"exited with {proc.returncode}" if proc.poll() is not None else f"no answer in {START_TIMEOUT_S} s"
            tail = log_path.read_text(errors="replace")[-4000:]
            pytest.fail(f"llama_cpp.server {state}.\nstderr:\n{tail}")
        startup = time.perf_counter() - t0
        model = str(models["data"][0]["id"])
        # Warm-up: evaluate the few-shot prompt once (about 300 tokens) and decode a few tokens. The
        # server keeps the longest matching prefix in its KV cache, so later requests only decode; the
        # first prompt evaluation and the first decode steps are slow (seconds on a busy machine) and
        # would otherwise land on whichever test runs first.
        prompt = FEW_SHOT_TEMPLATE.format(context=context, question=QUESTION)
        warm = {"model": model, "prompt": prompt, "max_tokens": 8, "temperature": 0.0}
        t1 = time.perf_counter()
        _post_json(f"{base_url}/v1/completions", warm, timeout=180.0)
        warmup = time.perf_counter() - t1
        print(f"\n[openai-server] llama_cpp.server ready in {startup:.2f} s on {base_url}; warm-up call {warmup:.2f} s")
        yield Server(base_url, model, startup)
    finally:
        _stop(proc)


@pytest.fixture(scope="module")
def context() -> str:
    from conformal_rag_plugins.local.corpus import bundled_corpus

    return next(e.text for e in bundled_corpus() if e.id == CONTEXT_ID)


class CountingTransport(httpx.AsyncBaseTransport):
    """Records every HTTP request and the peak number in flight.

    A request counts as in flight until the response headers arrive; llama-cpp-python's server
    sends them only once the (non-streamed) completion is done.
    """

    def __init__(self) -> None:
        self._inner = httpx.AsyncHTTPTransport()
        self.active = 0
        self.peak = 0
        self.paths: list[str] = []
        self.bodies: list[dict[str, Any]] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.paths.append(request.url.path)
        self.bodies.append(json.loads(request.content or b"{}"))
        self.active += 1
        self.peak = max(self.peak, self.active)
        try:
            return await self._inner.handle_async_request(request)
        finally:
            self.active -= 1

    async def aclose(self) -> None:
        await self._inner.aclose()


# ---------------------------------------------------------------------------------------------
# Framework adapters: build a completion-style client of the server and its sampler.


def _llamaindex_llm(api_base: str, model: str, *, http: Any = None, timeout: float = REQUEST_TIMEOUT_S) -> Any:
    from llama_index.llms.openai_like import OpenAILike

    return OpenAILike(
        model=model,
        api_base=api_base,
        api_key=API_KEY,
        is_chat_model=False,
        temperature=1.0,
        max_tokens=MAX_TOKENS,
        additional_kwargs={"stop": ["\n"]},
        timeout=timeout,
        max_retries=0,
        async_http_client=http,
    )


def _langchain_llm(api_base: str, model: str, *, http: Any = None, timeout: float = REQUEST_TIMEOUT_S) -> Any:
    from langchain_openai import OpenAI

    return OpenAI(
        model=model,
        base_url=api_base,
        api_key=API_KEY,
        temperature=1.0,
        max_tokens=MAX_TOKENS,
        model_kwargs={"stop": ["\n"]},
        timeout=timeout,
        max_retries=0,
        http_async_client=http,
    )


def _sampler(framework: str, llm: Any, **kwargs: Any) -> Any:
    if framework == "llamaindex":
        from conformal_rag_plugins.llamaindex.answer_sampler import LlamaIndexSampler

        return LlamaIndexSampler(llm, **kwargs)
    from conformal_rag_plugins.langchain.answer_sampler import LangChainSampler

    return LangChainSampler(llm, **kwargs)


MAKE_LLM: dict[str, Callable[..., Any]] = {"llamaindex": _llamaindex_llm, "langchain": _langchain_llm}
FRAMEWORKS = list(MAKE_LLM)


def _check_server_samples(samples: list[Sample], n: int) -> None:
    """Mechanics every sampling run through the live server must satisfy."""
    assert len(samples) == n
    assert all(isinstance(s, Sample) for s in samples)
    assert not any(s.failed for s in samples)
    assert all(isinstance(s.text, str) and "\n" not in s.text for s in samples)
    assert any(s.text for s in samples), "the base model returned only empty answers"
    # llama-cpp-python's server reports usage on every completion: the samplers must record it.
    assert all(s.prompt_tokens > 100 for s in samples), [s.prompt_tokens for s in samples]
    assert all(0 <= s.completion_tokens <= MAX_TOKENS for s in samples)
    assert sum(s.completion_tokens for s in samples) > 0


# ---------------------------------------------------------------------------------------------
# (a) the raw openai client


N_RAW = 3


def test_raw_openai_client_completions(server: Server, context: str) -> None:
    client = openai.OpenAI(base_url=server.api_base, api_key=API_KEY, timeout=REQUEST_TIMEOUT_S, max_retries=0)
    prompt = FEW_SHOT_TEMPLATE.format(context=context, question=QUESTION)
    assert prompt.endswith(f"Question: {QUESTION}\nAnswer:")
    texts = []
    t0 = time.perf_counter()
    for _ in range(N_RAW):
        resp = client.completions.create(
            model=server.model,
            prompt=prompt,
            max_tokens=MAX_TOKENS,
            temperature=1.0,
            stop=["\n"],
        )
        assert len(resp.choices) == 1
        text = resp.choices[0].text
        assert isinstance(text, str) and "\n" not in text
        texts.append(text)
        assert resp.usage is not None
        assert resp.usage.prompt_tokens > 100
        assert 0 <= resp.usage.completion_tokens <= MAX_TOKENS
        assert resp.usage.total_tokens == resp.usage.prompt_tokens + resp.usage.completion_tokens
    dt = time.perf_counter() - t0
    print(f"\n[openai-server] raw client: {N_RAW} sequential completions in {dt:.2f} s ({N_RAW / dt:.1f}/s): {texts}")
    assert any(t.strip() for t in texts)


# ---------------------------------------------------------------------------------------------
# (b), (c) the framework samplers, 4 samples under a concurrency limit of 2


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_sampler_through_server(server: Server, context: str, framework: str) -> None:
    async def run() -> tuple[list[Sample], CountingTransport, float, Any]:
        transport = CountingTransport()
        async with httpx.AsyncClient(transport=transport, timeout=REQUEST_TIMEOUT_S) as http:
            llm = MAKE_LLM[framework](server.api_base, server.model, http=http)
            sampler = _sampler(framework, llm, n_samples=4, max_concurrency=2, timeout=SAMPLER_TIMEOUT_S, retries=1)
            t0 = time.perf_counter()
            samples = await sampler.asample(QUESTION, context)
            return samples, transport, time.perf_counter() - t0, sampler

    samples, transport, dt, sampler = asyncio.run(run())
    print(f"\n[openai-server] {framework}: 4 samples in {dt:.2f} s ({4 / dt:.1f}/s): {[s.text for s in samples]}")
    _check_server_samples(samples, 4)
    # Completion endpoint with the few-shot prompt (Gemma 270M is a base model), one request per
    # sample (no retries needed), never more than max_concurrency in flight, and actually concurrent.
    if framework == "llamaindex":
        assert sampler.is_chat is False
    assert transport.paths == ["/v1/completions"] * 4
    for body in transport.bodies:
        prompt = body["prompt"]
        if isinstance(prompt, list):  # langchain_openai sends a batch of one
            (prompt,) = prompt
        assert prompt.startswith(FEW_SHOT_TEMPLATE.split("{context}")[0])
        assert prompt.endswith(f"Question: {QUESTION}\nAnswer:")
        assert body["stop"] == ["\n"]
        assert body["temperature"] == 1.0
        assert body["max_tokens"] == MAX_TOKENS
    assert transport.peak == 2


# ---------------------------------------------------------------------------------------------
# (d) failures: a port with nothing listening gives failed empty samples, quickly, no exception


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_dead_server_gives_failed_samples(framework: str, context: str, tmp_path: Path) -> None:
    dead = f"http://127.0.0.1:{_free_port()}/v1"
    llm = MAKE_LLM[framework](dead, "gemma", timeout=1.0)
    cache = SampleCache(tmp_path / "samples.sqlite")
    sampler = _sampler(framework, llm, n_samples=3, max_concurrency=2, timeout=2.0, retries=1, cache=cache)
    t0 = time.perf_counter()
    samples = asyncio.run(sampler.asample(QUESTION, context))
    dt = time.perf_counter() - t0
    assert samples == [Sample("", failed=True)] * 3
    assert dt < 5.0, f"failing took {dt:.1f} s"
    # All-failed draws are not cached, so a later run retries them.
    rows = cache._db.execute("SELECT COUNT(*) FROM samples").fetchone()[0]
    assert rows == 0


# ---------------------------------------------------------------------------------------------
# (e) the sample cache: a repeated call never reaches the server


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_cache_avoids_the_server(server: Server, context: str, framework: str, tmp_path: Path) -> None:
    path = tmp_path / "samples.sqlite"

    async def live() -> tuple[list[Sample], list[Sample], int, int]:
        transport = CountingTransport()
        async with httpx.AsyncClient(transport=transport, timeout=REQUEST_TIMEOUT_S) as http:
            llm = MAKE_LLM[framework](server.api_base, server.model, http=http)
            sampler = _sampler(
                framework, llm, n_samples=3, max_concurrency=2, timeout=SAMPLER_TIMEOUT_S, cache=SampleCache(path)
            )
            first = await sampler.asample(QUESTION, context)
            after_first = len(transport.paths)
            second = await sampler.asample(QUESTION, context)
            return first, second, after_first, len(transport.paths)

    first, second, after_first, after_second = asyncio.run(live())
    _check_server_samples(first, 3)
    assert after_first == 3
    assert after_second == 3, "the cached call reached the server"
    assert second == first

    # A fresh process-like setup: a new cache handle on the same file, the same model name and
    # settings, but the client points at a port with nothing listening. The cache still answers.
    dead_llm = MAKE_LLM[framework](f"http://127.0.0.1:{_free_port()}/v1", server.model, timeout=1.0)
    dead_sampler = _sampler(framework, dead_llm, n_samples=3, max_concurrency=2, timeout=2.0, cache=SampleCache(path))
    t0 = time.perf_counter()
    third = asyncio.run(dead_sampler.asample(QUESTION, context))
    assert third == first
    assert time.perf_counter() - t0 < 2.0

    # A different n is a different key: it misses the cache and, with the server dead, fails.
    dead_sampler4 = _sampler(framework, dead_llm, n_samples=4, timeout=2.0, retries=0, cache=SampleCache(path))
    assert all(s.failed for s in asyncio.run(dead_sampler4.asample(QUESTION, context)))


# ---------------------------------------------------------------------------------------------
# default_llm() configured by environment variables only


def _default_llm(framework: str) -> Any:
    if framework == "llamaindex":
        from conformal_rag_plugins.local.llamaindex_models import default_llm
    else:
        from conformal_rag_plugins.local.langchain_models import default_llm
    return default_llm()


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_default_llm_completion_switch(
    server: Server, context: str, framework: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for var in ("OPENAI_API_BASE", "OPENAI_ORG_ID", "OPENAI_ORGANIZATION"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", API_KEY)
    monkeypatch.setenv("OPENAI_BASE_URL", server.api_base)
    monkeypatch.setenv("CONFORMAL_RAG_OPENAI_MODEL", server.model)

    # Without the switch: the chat class (for instruction-tuned models); nothing is called.
    monkeypatch.delenv("CONFORMAL_RAG_OPENAI_COMPLETION", raising=False)
    chat = _default_llm(framework)
    if framework == "llamaindex":
        assert type(chat).__name__ == "OpenAILike" and chat.metadata.is_chat_model is True
    else:
        assert type(chat).__name__ == "ChatOpenAI"
    monkeypatch.setenv("CONFORMAL_RAG_OPENAI_COMPLETION", "0")
    assert type(_default_llm(framework)) is type(chat)

    # With the switch: the completion class, aimed at OPENAI_BASE_URL with OPENAI_API_KEY.
    monkeypatch.setenv("CONFORMAL_RAG_OPENAI_COMPLETION", "1")
    llm = _default_llm(framework)
    if framework == "llamaindex":
        from llama_index.llms.openai_like import OpenAILike

        assert isinstance(llm, OpenAILike) and llm.metadata.is_chat_model is False
        assert llm.api_base == server.api_base and llm.api_key == API_KEY
        assert llm.additional_kwargs["stop"] == ["\n"]
    else:
        from langchain_openai import OpenAI

        assert isinstance(llm, OpenAI)
        assert llm.openai_api_base == server.api_base
        assert llm.openai_api_key.get_secret_value() == API_KEY
        assert llm.model_kwargs["stop"] == ["\n"]
    assert getattr(llm, "model", None) == server.model or getattr(llm, "model_name", None) == server.model

    sampler = _sampler(framework, llm, n_samples=2, max_concurrency=2, timeout=SAMPLER_TIMEOUT_S, retries=1)
    samples = asyncio.run(sampler.asample(QUESTION, context))
    _check_server_samples(samples, 2)
