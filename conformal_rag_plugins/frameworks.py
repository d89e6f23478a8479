"""The framework registry: what the command line and the benchmarks ask of LlamaIndex or LangChain.

``conformal-rag`` and ``benchmarks/`` never branch on a framework's name: they call
:func:`get_framework` and use the :class:`FrameworkAdapter` it returns. Each adapter keeps its
entry in one file (``llamaindex/cli_entry.py``, ``langchain/cli_entry.py``), imported only when
that framework is asked for, so importing this module imports neither framework.

Adding a framework means writing its ``cli_entry.py`` with a class that implements
:class:`FrameworkAdapter` and naming it in :data:`_ENTRIES`.

Examples
--------
>>> FRAMEWORKS
('llamaindex', 'langchain')
>>> get_framework("haystack")
Traceback (most recent call last):
...
conformal_rag_plugins.core.errors.ConformalError: framework must be one of ('llamaindex', 'langchain'), got 'haystack'.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from functools import cache
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from .core.errors import ConformalError

if TYPE_CHECKING:
    from .datasets.examples import CalibrationExample, CorpusEntry
    from .labelling.chunk_records import Chunk
    from .retrieval.fingerprint import Fingerprint
    from .retrieval.pool_calibration import CandidatePool
    from .tuning.tuned_calibration import FusionConfig


#: Framework name -> ``module:class`` of its entry (imported on first use).
_ENTRIES: dict[str, str] = {
    "llamaindex": "conformal_rag_plugins.llamaindex.cli_entry:LlamaIndexEntry",
    "langchain": "conformal_rag_plugins.langchain.cli_entry:LangChainEntry",
}

#: The registered framework names, in the order the command line lists them (the first is the default).
FRAMEWORKS: tuple[str, ...] = tuple(_ENTRIES)

#: A built host and ``fetch(question) -> CandidatePool`` on its own scale.
HostFetch = tuple[Any, "Callable[[str], CandidatePool]"]


@runtime_checkable
class FrameworkAdapter(Protocol):
    """What the command line and the benchmarks need from one framework.

    ``searchable`` below is what the framework searches (LlamaIndex: a ``VectorStoreIndex``;
    LangChain: a vector store) and ``units`` what its BM25 side and gold ids are read from
    (LlamaIndex: the nodes; LangChain: the chunks or documents).
    """

    name: str

    def chunk_entries(
        self, entries: Sequence[CorpusEntry], *, chunk_size: int | None, chunk_overlap: int | None
    ) -> list[Chunk]:
        """Split long corpus entries with the framework's own splitter (chunk ids ``parent#i``)."""
        ...

    def build_llm(self, kind: str, *, temperature: float, max_tokens: int) -> Any:
        """The framework's local Gemma 3 270M (``kind="local"``) or its OpenAI(-compatible) client."""
        ...

    def index_chunks(
        self, entries: Sequence[CorpusEntry], *, client: Any, collection_name: str, show_progress: bool = False
    ) -> tuple[Any, Any]:
        """Embed ``entries`` in a Chroma collection: ``(searchable, units)``."""
        ...

    def build_hosts(
        self,
        kind: str,
        entries: Sequence[CorpusEntry],
        *,
        grid: Sequence[FusionConfig],
        pool_size: int,
        client: Any,
        collection_name: str,
        show_progress: bool = False,
    ) -> dict[FusionConfig | None, HostFetch]:
        """Index once and build the dense, BM25 or hybrid host(s): ``{fusion or None: (host, fetch)}``."""
        ...

    def build_fanout(
        self,
        kind: str,
        entries: Sequence[CorpusEntry],
        *,
        grid: Sequence[FusionConfig],
        pool_sizes: Sequence[int],
        client: Any,
        collection_name: str,
        show_progress: bool = False,
        whole_documents: bool = False,
    ) -> Callable[[str], dict[tuple[FusionConfig | None, int], CandidatePool]]:
        """One dense and one BM25 search per question serving every fusion setting and pool size."""
        ...

    def calibrate_retriever(self, host: Any, examples: Sequence[CalibrationExample], **options: Any) -> Any:
        """The framework's ``calibrate_retriever`` on a built host (``confidence_level=``, ``score=``, ...)."""
        ...

    def calibrate_hybrid_retriever(
        self, searchable: Any, units: Any, examples: Sequence[CalibrationExample], **options: Any
    ) -> tuple[Any, Any]:
        """The framework's tuned hybrid: ``(host, calibration)`` (fusion, score family, unit and pool chosen)."""
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


@cache
def _entry(name: str) -> FrameworkAdapter:
    module, _, attr = _ENTRIES[name].partition(":")
    return getattr(importlib.import_module(module), attr)()


def get_framework(name: str) -> FrameworkAdapter:
    """The registered adapter of ``name`` (its framework is imported now, not before).

    Raises
    ------
    ConformalError
        ``name`` is not in :data:`FRAMEWORKS`.
    """
    if name not in _ENTRIES:
        raise ConformalError(f"framework must be one of {FRAMEWORKS}, got {name!r}.")
    return _entry(name)
