"""Chunk a corpus with the chosen framework's splitter and move the gold labels onto chunks."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from ..core.errors import CalibrationError
from ..datasets.examples import CalibrationExample, CorpusEntry
from ..labelling.chunk_labels import GoldReport, map_gold_to_chunks
from ..labelling.chunk_records import Chunk


@dataclass(frozen=True)
class ChunkedCorpus:
    """Chunks, the questions with chunk-level gold, the :class:`GoldReport` and the chunking counts."""

    chunks: list[Chunk]
    questions: list[CalibrationExample]
    gold: GoldReport
    n_entries: int
    n_split_entries: int
    chunk_size: int
    chunk_overlap: int
    max_chunk_tokens: int

    def report(self) -> dict[str, Any]:
        """JSON-ready summary (no chunks, no questions)."""
        return {
            "n_entries": self.n_entries,
            "n_chunks": len(self.chunks),
            "n_split_entries": self.n_split_entries,
            "chunk_size": self.chunk_size,
            "chunk_overlap": self.chunk_overlap,
            "max_chunk_tokens": self.max_chunk_tokens,
            "gold": asdict(self.gold) | {"fallback_rate": self.gold.fallback_rate},
        }


def chunk_corpus(
    framework: str,
    entries: Sequence[CorpusEntry],
    questions: Sequence[CalibrationExample],
    *,
    chunk_size: int | None = None,
    chunk_overlap: int | None = None,
) -> ChunkedCorpus:
    """Split entries longer than the embedding window with ``framework``'s own splitter.

    LlamaIndex ``SentenceSplitter`` / LangChain ``RecursiveCharacterTextSplitter``, both counting
    MiniLM word pieces (defaults 254 tokens, overlap 25). Gold document ids become the chunk ids
    holding a reference answer.
    """
    from ..local.tokens import count_tokens, default_chunk_overlap, default_chunk_size
    from .framework_registry import get_framework

    size = default_chunk_size() if chunk_size is None else chunk_size
    overlap = min(default_chunk_overlap(), size // 2) if chunk_overlap is None else chunk_overlap
    if not 1 <= size <= default_chunk_size():
        raise CalibrationError(
            f"chunk_size must be between 1 and {default_chunk_size()} tokens (all-MiniLM-L6-v2 truncates longer "
            f"chunks), got {size}."
        )
    if not 0 <= overlap < size:
        raise CalibrationError(f"chunk_overlap must be in [0, chunk_size={size}), got {overlap}.")
    chunks = get_framework(framework).chunk_entries(entries, chunk_size=size, chunk_overlap=overlap)
    mapped, gold = map_gold_to_chunks(questions, chunks)
    return ChunkedCorpus(
        chunks=chunks,
        questions=mapped,
        gold=gold,
        n_entries=len(entries),
        n_split_entries=len({c.parent_id for c in chunks if c.is_split}),
        chunk_size=size,
        chunk_overlap=overlap,
        max_chunk_tokens=max((count_tokens(c.text) for c in chunks), default=0),
    )
