"""Move document-level gold labels onto chunks (``metadata["gold_rule"]`` says how).

* ``"answer-in-chunk"``: the chunks containing a reference answer (normalised both sides,
  substring match on word boundaries, so "art" does not match "party"); with overlapping
  chunks all that hold it are gold (any one suffices).
* ``"all-chunks-fallback"``: no chunk contains an answer, or there is none: every chunk of the document.
* ``"unsplit"``: the gold id is already a chunk id (returned unchanged); a document held whole
  in one chunk under another id maps to that chunk.

Gold ids matching neither a chunk nor a split document are kept and counted in
:attr:`GoldReport.n_unknown_ids`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from ..core.normalize import normalize_answer
from ..datasets.examples import CalibrationExample
from .chunk_records import Chunk, chunks_by_parent

RULE_ANSWER_IN_CHUNK = "answer-in-chunk"
RULE_ALL_CHUNKS = "all-chunks-fallback"
RULE_UNSPLIT = "unsplit"


@dataclass(frozen=True)
class GoldReport:
    """How the gold of each example was mapped: counts per ``gold_rule`` and unknown gold ids (kept as they were).

    ``n_fallback`` counts examples where *some* gold document fell back to all of its chunks.
    """

    n_examples: int = 0
    n_answer_in_chunk: int = 0
    n_fallback: int = 0
    n_unsplit: int = 0
    n_unknown_ids: int = 0

    @property
    def fallback_rate(self) -> float:
        """Share of examples with split gold that needed the fallback."""
        mapped = self.n_answer_in_chunk + self.n_fallback
        return self.n_fallback / mapped if mapped else 0.0


def answer_in_text(answers: Iterable[str], text: str) -> bool:
    """Whether a normalised answer occurs in the normalised text, on word boundaries (empty answers never match).

    >>> answer_in_text(["The Normans!"], "...gave their name to the normans of France.")
    True
    >>> answer_in_text(["art"], "a party")
    False
    """
    haystack = f" {normalize_answer(text)} "
    for answer in answers:
        needle = normalize_answer(answer)
        if needle and f" {needle} " in haystack:
            return True
    return False


def map_gold_to_chunks(
    examples: Iterable[CalibrationExample],
    chunks: Sequence[Chunk],
) -> tuple[list[CalibrationExample], GoldReport]:
    """Replace document-level gold ids by the chunk ids that carry the answer (same order).

    Mapped examples get chunk ``gold_ids``, ``metadata["gold_rule"]`` and
    ``metadata["parent_gold_ids"]`` (the original ids).

    >>> chunks = [Chunk("d::chunk0", "Rollo led them.", parent_id="d"), Chunk("d::chunk1", "In 911.", parent_id="d")]
    >>> ex = CalibrationExample("When?", gold_ids=("d",), answers=("911",))
    >>> mapped, report = map_gold_to_chunks([ex], chunks)
    >>> mapped[0].gold_ids, mapped[0].metadata["gold_rule"], report.n_answer_in_chunk
    (('d::chunk1',), 'answer-in-chunk', 1)
    >>> whole, _ = map_gold_to_chunks([replace(ex, gold_ids=("e",))], [Chunk("node-7", "In 911.", parent_id="e")])
    >>> whole[0].gold_ids, whole[0].metadata["gold_rule"]
    (('node-7',), 'unsplit')
    """
    chunk_ids = {c.id for c in chunks}
    by_parent = chunks_by_parent(chunks)
    whole = {p: cs[0].id for p, cs in by_parent.items() if len(cs) == 1 and cs[0].is_split}
    split_docs = {p: cs for p, cs in by_parent.items() if len(cs) > 1 and any(c.is_split for c in cs)}
    out: list[CalibrationExample] = []
    n = n_answer = n_fallback = n_unsplit = n_unknown = 0
    for ex in examples:
        n += 1
        new_ids: list[str] = []
        rules: set[str] = set()
        for gold in ex.gold_ids:
            if gold in chunk_ids:
                new_ids.append(gold)
            elif gold in whole:  # the whole document is one chunk with its own id
                new_ids.append(whole[gold])
            elif gold in split_docs:
                doc_chunks = split_docs[gold]
                hits = [c.id for c in doc_chunks if answer_in_text(ex.answers, c.text)]
                if hits:
                    rules.add(RULE_ANSWER_IN_CHUNK)
                    new_ids.extend(hits)
                else:
                    rules.add(RULE_ALL_CHUNKS)
                    new_ids.extend(c.id for c in doc_chunks)
            else:
                n_unknown += 1
                new_ids.append(gold)
        if not rules:
            n_unsplit += 1
            if tuple(new_ids) == tuple(ex.gold_ids):
                out.append(replace(ex, metadata=ex.metadata | {"gold_rule": RULE_UNSPLIT}))
            else:  # a whole-document chunk under its own id
                meta = ex.metadata | {"gold_rule": RULE_UNSPLIT, "parent_gold_ids": list(ex.gold_ids)}
                out.append(replace(ex, gold_ids=tuple(dict.fromkeys(new_ids)), metadata=meta))
            continue
        if RULE_ALL_CHUNKS in rules:
            rule = RULE_ALL_CHUNKS
            n_fallback += 1
        else:
            rule = RULE_ANSWER_IN_CHUNK
            n_answer += 1
        meta = ex.metadata | {"gold_rule": rule, "parent_gold_ids": list(ex.gold_ids)}
        out.append(replace(ex, gold_ids=tuple(dict.fromkeys(new_ids)), metadata=meta))
    report = GoldReport(n, n_answer, n_fallback, n_unsplit, n_unknown)
    return out, report
