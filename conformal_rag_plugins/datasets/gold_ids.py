"""The one gold-id rule, in words, and the one error raised when a gold id follows none of its forms.

The gold ids of a :class:`~.examples.CalibrationExample` may be

1. chunk (node) ids of the store;
2. document ids with ``answers=``: moved onto the chunk(s) of the document that contain a reference answer;
3. document ids without answers: every chunk of the document.

``labelling.gold_ids.gold_on_chunks`` applies the rule for both adapters; this module only says it.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..core.errors import CalibrationError

#: The three forms a gold id may take, as the error message and the docs say them.
GOLD_ID_FORMS = (
    "(1) chunk/node ids of the store, (2) document ids with answers= (moved onto the document's chunks that "
    "contain an answer), or (3) document ids without answers (all of the document's chunks)"
)


def gold_ids_error(
    missing: Sequence[str],
    *,
    n_chunk_ids: int = 0,
    n_document_ids: int = 0,
    document_key: str | None = None,
    documents_listed: bool = True,
    also: str | None = None,
) -> CalibrationError:
    """The one error for gold ids that are neither chunk ids nor document ids of the store.

    Parameters
    ----------
    missing : sequence of str
        The gold ids found in none of the forms.
    n_chunk_ids, n_document_ids : int
        How many of the other distinct gold ids were chunk ids and document ids (what was seen).
    document_key : str, optional
        How this framework finds the document of a chunk (e.g. ``metadata["doc_id"]``).
    documents_listed : bool, default True
        ``False`` when the store cannot list a document's chunks, so document ids cannot be mapped.
    also : str, optional
        Another form accepted here (e.g. parent ids at parent level).

    Examples
    --------
    >>> err = gold_ids_error(["d9"], n_chunk_ids=2, document_key='metadata["doc_id"]')
    >>> print(str(err).split("). ")[0])
    1 gold id(s) are not in the store, neither as chunk ids nor as document ids, e.g. 'd9'
    (the other gold ids: 2 chunk id(s), 0 document id(s)
    """
    shown = ", ".join(repr(m) for m in list(missing)[:5])
    seen = ""
    if n_chunk_ids or n_document_ids:
        seen = f" (the other gold ids: {n_chunk_ids} chunk id(s), {n_document_ids} document id(s))"
    forms = GOLD_ID_FORMS if also is None else f"{GOLD_ID_FORMS}, or {also}"
    parts = [
        f"{len(missing)} gold id(s) are not in the store, neither as chunk ids nor as document ids, "
        f"e.g. {shown}{seen}.",
        f"Gold ids may be {forms}.",
    ]
    if not documents_listed:
        parts.append(
            "This store cannot list the chunks of a document, so document ids cannot be mapped onto chunks here: "
            "give chunk ids (or gold_texts), or use a store that can (Chroma, or the framework's in-memory store)."
        )
    if document_key is not None:
        parts.append(f"The document of a chunk is found by {document_key}.")
    parts.append("Fix the ids in the calibration examples, or index those documents (docs: Gold ids).")
    return CalibrationError(" ".join(parts))
