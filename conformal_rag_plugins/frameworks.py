"""What the command line, the benchmarks and ``from_documents`` ask of LlamaIndex or LangChain.

:class:`FrameworkAdapter` is the protocol; each adapter package implements it once
(``llamaindex/framework.py``, ``langchain/framework.py``: an object ``FRAMEWORK`` whose methods import
and call the adapter's own functions). The flows here (:func:`calibrate_tuned_chunks`,
:func:`tuned_host_from_entries`) take that object as an argument, so every call below is an import a
reader can follow. The command line looks an object up by name in
``commands/framework_registry.py``; nothing here imports an adapter or a framework.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from .core.errors import CalibrationError, ConformalError

if TYPE_CHECKING:
    from .datasets.examples import CalibrationExample, CorpusEntry
    from .labelling.chunk_records import Chunk
    from .retrieval.fingerprint import Fingerprint
    from .retrieval.pool_calibration import CandidatePool
    from .tuning.fusion_config import FusionConfig


#: A built host and ``fetch(question) -> CandidatePool`` on its own scale.
HostFetch = tuple[Any, "Callable[[str], CandidatePool]"]


@dataclass(frozen=True)
class IndexRequest:
    """What :meth:`FrameworkAdapter.build_hosts` and :meth:`FrameworkAdapter.build_fanout` index and build.

    Attributes
    ----------
    kind : {"dense", "bm25", "hybrid"}
        The host retriever.
    entries : sequence of CorpusEntry
        The chunks embedded in one Chroma collection.
    grid : sequence of FusionConfig
        The fusion settings of a hybrid host (one host, or one fan-out key, per setting).
    pool_sizes : sequence of int
        The fan-out's pool sizes; ``build_hosts`` takes exactly one (:attr:`pool_size`).
    client : chromadb client
        Where the collection is made.
    collection_name : str
        The collection (:func:`collection_name`: one per framework and corpus).
    show_progress : bool, default False
        Show the embedding progress bar (where the framework has one).
    whole_documents : bool, default False
        The ``document`` unit's index, embedded past the window on purpose: no truncation warning.

    Examples
    --------
    >>> from conformal_rag_plugins.datasets.examples import CorpusEntry
    >>> entries = [CorpusEntry("a", "text")]
    >>> request = IndexRequest("bm25", entries, grid=(), pool_sizes=(20,), client=None,
    ...                        collection_name=collection_name("llamaindex", entries))
    >>> request.pool_size, request.collection_name
    (20, 'crp-llamaindex-...')
    """

    kind: str
    entries: Sequence[CorpusEntry]
    grid: Sequence[FusionConfig]
    pool_sizes: Sequence[int]
    client: Any
    collection_name: str
    show_progress: bool = False
    whole_documents: bool = False

    @property
    def pool_size(self) -> int:
        """The one pool size of the hosts ``build_hosts`` makes.

        Raises
        ------
        ValueError
            When the request holds more or fewer than one pool size (a fan-out's request).
        """
        if len(self.pool_sizes) != 1:
            raise ValueError(f"build_hosts makes hosts of one pool size, got pool_sizes={tuple(self.pool_sizes)}.")
        return self.pool_sizes[0]


@runtime_checkable
class TunedHostParts(Protocol):
    """What the tuned-host flows need from one framework: chunk, index, tune and rebuild the hybrid.

    Implemented once per adapter (``llamaindex/tuned_host.py``, ``langchain/tuned_host.py``:
    ``TUNED_HOST``); ``ConformalRetriever.from_documents`` passes it to :func:`tuned_host_from_entries`.
    """

    name: str

    def chunk_entries(
        self, entries: Sequence[CorpusEntry], *, chunk_size: int | None, chunk_overlap: int | None
    ) -> list[Chunk]:
        """Split long corpus entries with the framework's own splitter (chunk ids ``parent#i``)."""
        ...

    def index_chunks(
        self, entries: Sequence[CorpusEntry], *, client: Any, collection_name: str, show_progress: bool = False
    ) -> tuple[Any, Any]:
        """Embed ``entries`` in a Chroma collection: ``(searchable, units)``."""
        ...

    def calibrate_hybrid_retriever(
        self, searchable: Any, units: Any, examples: Sequence[CalibrationExample], **options: Any
    ) -> tuple[Any, Any]:
        """The framework's tuned hybrid: ``(host, calibration)`` (fusion, score family, unit and pool chosen)."""
        ...

    def hybrid_from_calibration(self, searchable: Any, units: Any, calibration: Any) -> Any:
        """The tuned hybrid host a ``calibrate_hybrid_retriever`` calibration was made with (no calibrating)."""
        ...


@runtime_checkable
class FrameworkAdapter(TunedHostParts, Protocol):
    """What the command line, the benchmarks and the flows below need from one framework.

    Implemented once per adapter (``llamaindex/framework.py``, ``langchain/framework.py``: ``FRAMEWORK``).
    ``searchable``: what it searches (a ``VectorStoreIndex`` / a vector store); ``units``: what BM25
    and gold ids read (nodes / chunks or documents).
    """

    def build_llm(self, kind: str, *, temperature: float, max_tokens: int) -> Any:
        """The framework's local Gemma 3 270M (``kind="local"``) or its OpenAI(-compatible) client."""
        ...

    def build_hosts(self, request: IndexRequest) -> dict[FusionConfig | None, HostFetch]:
        """Index once and build the dense, BM25 or hybrid host(s): ``{fusion or None: (host, fetch)}``."""
        ...

    def build_fanout(
        self, request: IndexRequest
    ) -> Callable[[str], dict[tuple[FusionConfig | None, int], CandidatePool]]:
        """One dense and one BM25 search per question serving every fusion setting and pool size of ``request``."""
        ...

    def calibrate_retriever(self, host: Any, examples: Sequence[CalibrationExample], **options: Any) -> Any:
        """The framework's ``calibrate_retriever`` on a built host (``confidence_level=``, ``score=``, ...)."""
        ...

    def unit_candidates(
        self,
        searchable: Any,
        units: Any,
        examples: Sequence[CalibrationExample],
        grid: Sequence[FusionConfig],
        pool_sizes: Sequence[int],
    ) -> Any:
        """The tuned hybrid's candidates (``UnitCandidates``) at chunk level."""
        ...

    def label_with_judge(
        self, host: Any, examples: Sequence[CalibrationExample], model: Any, budget: int, **options: Any
    ) -> tuple[list[CalibrationExample], Any]:
        """Label questions on ``host`` with the LLM judge: ``(labelled examples, LabelReport)``."""
        ...

    def generate_questions(self, chunks: Sequence[Chunk], model: Any, n: int, **options: Any) -> tuple[list, Any]:
        """Generate ``n`` calibration questions from ``chunks``: ``(examples, GenerationReport)``."""
        ...

    def fingerprint_of(self, host: Any) -> Fingerprint:
        """The fingerprint (store, distance, embedding, scale, fusion, pool) of a host."""
        ...

    def rebuildable_host(self, fingerprint: Fingerprint) -> tuple[str, FusionConfig | None] | None:
        """``(retriever kind, fusion)`` of a command-line host this fingerprint describes, else ``None``."""
        ...

    def conformal_retriever(self, kind: str, host: Any, calibration: Any, **options: Any) -> Any:
        """The framework's ``ConformalRetriever`` on ``host`` (``monitor=``, ``parents=``, ...)."""
        ...

    def ask(self, retriever: Any) -> Callable[[str], list[Any]]:
        """How a question is asked of one of the framework's retrievers (``retrieve`` or ``invoke``)."""
        ...

    def bare_query(self, kind: str, host: Any, pool_size: int) -> Callable[[str], Any]:
        """The host's own query (no conformal step) on the same pool, for latency comparisons."""
        ...

    def ids_and_texts(self, results: Sequence[Any]) -> list[tuple[str, str]]:
        """``(id, text)`` of each node or document a retriever returned."""
        ...


#: Method names of a host description (``Fingerprint.retriever``) -> the library's fusion methods.
_MODES = {"dist_based_score": "zscore", "relative_score": "minmax"}


def fusion_in(pattern: re.Pattern[str], retriever: str) -> FusionConfig | None:
    """The fusion a host description names (``pattern``'s groups: method, weight), else ``None``."""
    from .tuning.fusion_config import FusionConfig

    match = pattern.match(retriever)
    if match is None:
        return None
    return FusionConfig(_MODES.get(match.group(1), match.group(1)), float(match.group(2)))


def corpus_key(entries: Sequence[CorpusEntry]) -> str:
    """Short content hash (ids and texts) naming the Chroma collection of a corpus.

    >>> from conformal_rag_plugins.datasets.examples import CorpusEntry
    >>> len(corpus_key([CorpusEntry("a", "text")]))
    12
    """
    h = hashlib.sha1()
    for e in entries:
        h.update(e.id.encode())
        h.update(b"\0")
        h.update(e.text.encode())
    return h.hexdigest()[:12]


def collection_name(framework: str, entries: Sequence[CorpusEntry]) -> str:
    """The Chroma collection of ``entries`` indexed by ``framework`` (one per framework and corpus)."""
    return f"crp-{framework}-{corpus_key(entries)}"


def calibrate_tuned_chunks(
    adapter: TunedHostParts,
    chunks: Sequence[CorpusEntry],
    examples: Sequence[CalibrationExample],
    *,
    client: Any,
    confidence_level: float | None,
    pool_size: int,
    options: Any = None,
    tuning: Any = None,
) -> tuple[Any, Any]:
    """Index ``chunks`` in their own Chroma collection of ``client`` and tune the hybrid: ``(host, calibration)``.

    The one route of ``conformal-rag calibrate`` (tuned hybrid) and of both adapters'
    ``ConformalRetriever.from_documents``, so the two give the same host and threshold on the same
    chunks and questions. ``examples`` carry chunk-level gold (after
    :func:`~conformal_rag_plugins.labelling.chunk_labels.map_gold_to_chunks`).
    """
    name = collection_name(adapter.name, chunks)
    searchable, units = adapter.index_chunks(chunks, client=client, collection_name=name)
    return adapter.calibrate_hybrid_retriever(
        searchable,
        units,
        examples,
        confidence_level=confidence_level,
        pool_size=pool_size,
        options=options,
        tuning=tuning,
    )


def tuned_host_from_entries(
    adapter: TunedHostParts,
    entries: Sequence[CorpusEntry],
    examples: Sequence[CalibrationExample] | None = None,
    *,
    calibration: Any = None,
    confidence_level: float | None = None,
    pool_size: int = 50,
    chunk_size: int | None = None,
    chunk_overlap: int | None = None,
    options: Any = None,
    tuning: Any = None,
    client: Any = None,
    persist_dir: Any = None,
) -> tuple[Any, Any]:
    """``(host, calibration)`` of the tuned hybrid on ``entries``: the body of ``ConformalRetriever.from_documents``.

    ``adapter`` is the framework's tuned-host part (``TUNED_HOST`` of its ``tuned_host.py``, or its
    ``FRAMEWORK``). Chunks the entries with the framework's splitter (MiniLM tokens), moves document-level gold onto
    the chunks (:func:`~conformal_rag_plugins.labelling.chunk_labels.map_gold_to_chunks`), then either
    tunes and calibrates (:func:`calibrate_tuned_chunks`, as ``conformal-rag calibrate``) or, given a
    saved ``calibration``, rebuilds its host after checking that it was made by this framework's
    tuned hybrid on the same chunks. Everything is checked before anything is embedded.
    """
    from .labelling.chunk_labels import map_gold_to_chunks
    from .local.chroma import chroma_client
    from .retrieval.fingerprint import corpus_digest, same_corpus
    from .retrieval.pool_calibration import check_gold_ids
    from .retrieval.serving import serving_calibration

    if (examples is None) == (calibration is None):
        raise ConformalError(
            "Pass examples= (labelled questions: tune and calibrate now) or calibration= (a saved calibration of "
            "these documents: rebuild its host), exactly one of them."
        )
    if client is not None and persist_dir is not None:
        raise ConformalError("Pass client= (a Chroma client) or persist_dir= (a Chroma directory), not both.")
    if not entries:
        raise ConformalError("from_documents needs at least one document.")
    if calibration is not None:
        calibration = serving_calibration(calibration)
        _check_rebuildable(adapter.name, calibration)
    chunks = adapter.chunk_entries(entries, chunk_size=chunk_size, chunk_overlap=chunk_overlap)
    if calibration is not None:
        made = corpus_digest(c.id for c in chunks)
        if calibration.corpus_ and not same_corpus(calibration.corpus_, made):
            raise CalibrationError(
                f"This calibration was made on another collection ({calibration.corpus_.get('size')} chunks, or other "
                f"ids) than these documents give ({made['size']} chunks with chunk_size={chunk_size}, "
                f"chunk_overlap={chunk_overlap}): its threshold does not transfer. Pass the same documents, ids and "
                "chunking, or calibrate again with examples=."
            )
        client = client if client is not None else chroma_client(persist_dir)
        searchable, units = adapter.index_chunks(
            chunks, client=client, collection_name=collection_name(adapter.name, chunks)
        )
        return adapter.hybrid_from_calibration(searchable, units, calibration), calibration
    assert examples is not None
    if not examples:
        raise ConformalError("from_documents needs at least one labelled question in examples=.")
    mapped, _ = map_gold_to_chunks(examples, chunks)  # document ids -> the chunks holding the answer
    check_gold_ids(mapped, {c.id for c in chunks})
    client = client if client is not None else chroma_client(persist_dir)
    return calibrate_tuned_chunks(
        adapter,
        chunks,
        mapped,
        client=client,
        confidence_level=confidence_level,
        pool_size=pool_size,
        options=options,
        tuning=tuning,
    )


def _check_rebuildable(framework: str, calibration: Any) -> None:
    """Refuse a calibration that ``from_documents`` cannot rebuild the host of (another framework or host)."""
    from .core.errors import FingerprintMismatchError

    made_with = calibration.fingerprint_.framework
    if made_with != framework:
        raise FingerprintMismatchError(
            f"This calibration was made with {made_with}, not {framework}: its threshold does not transfer. "
            f"Use {made_with}'s ConformalRetriever.from_documents, or calibrate again with examples=."
        )
    selection = calibration.selection_ or {}
    if selection.get("rule") != "tuned-hybrid" or selection.get("unit", "chunk") != "chunk":
        raise CalibrationError(
            "from_documents rebuilds only the chunk-level tuned hybrid (ConformalRetriever.from_documents, "
            "conformal-rag calibrate, calibrate_hybrid_retriever without parents); this calibration was made on "
            f"another host ({calibration.fingerprint_.retriever!r}): wrap that host in ConformalRetriever yourself."
        )
