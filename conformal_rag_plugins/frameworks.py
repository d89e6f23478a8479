"""The framework registry: what the command line and the benchmarks ask of LlamaIndex or LangChain.

Callers never branch on a framework's name: they use :func:`get_framework`. Each entry lives in
its adapter's ``cli_entry.py`` (a :class:`RegisteredEntry` subclass named in :data:`_ENTRIES`),
imported only when asked for, so importing this module imports neither framework.

Examples
--------
>>> get_framework("haystack")
Traceback (most recent call last):
...
conformal_rag_plugins.core.errors.ConformalError: framework must be one of ('llamaindex', 'langchain'), got 'haystack'.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable, Mapping, Sequence
from functools import cache
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, runtime_checkable

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

    ``searchable``: what it searches (a ``VectorStoreIndex`` / a vector store); ``units``: what BM25
    and gold ids read (nodes / chunks or documents).
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


#: Method names of a host description (``Fingerprint.retriever``) -> the library's fusion methods.
_MODES = {"dist_based_score": "zscore", "relative_score": "minmax"}


#: Operation -> ``module:function`` inside an adapter package that :class:`RegisteredEntry` calls for it.
FORWARDED: Mapping[str, str] = MappingProxyType({
    "chunk_entries": "text_splitting:chunk_entries",
    "calibrate_retriever": "calibrate:calibrate_retriever",
    "calibrate_hybrid_retriever": "hybrid_tuning:calibrate_hybrid_retriever",
    "unit_candidates": "tuned_units:unit_candidates",
    "label_with_judge": "judge_labels:label_with_judge",
    "generate_questions": "question_gen:generate_calibration_questions",
    "fingerprint_of": "fingerprint:fingerprint_of",
})  # fmt: skip


class RegisteredEntry:
    """The framework-neutral half of an entry: operations that only call an adapter function.

    Each calls the function :attr:`functions` names in :attr:`package` (imported on first call); a
    subclass declares ``name``, ``package``, ``models`` and the framework-specific operations
    (``build_hosts`` indexes once, then asks ``hosts_on`` and ``fetch_on``).
    """

    name: str
    #: The adapter package, e.g. ``"conformal_rag_plugins.llamaindex"``.
    package: ClassVar[str]
    #: Operation -> ``module:function`` in :attr:`package`, called with the operation's arguments.
    functions: ClassVar[Mapping[str, str]] = FORWARDED
    #: The offline stack's module with the framework's ``local_llm`` and ``default_llm``.
    models: ClassVar[str]
    #: The keyword of that ``local_llm`` that caps the generated tokens.
    max_tokens_keyword: ClassVar[str] = "max_tokens"

    def _call(self, operation: str, *args: Any, **kwargs: Any) -> Any:
        """Call the adapter function the table names for ``operation``."""
        module, _, attr = self.functions[operation].partition(":")
        return getattr(importlib.import_module(f"{self.package}.{module}"), attr)(*args, **kwargs)

    def chunk_entries(
        self, entries: Sequence[CorpusEntry], *, chunk_size: int | None, chunk_overlap: int | None
    ) -> list[Chunk]:
        return self._call("chunk_entries", entries, chunk_size=chunk_size, chunk_overlap=chunk_overlap)

    def build_llm(self, kind: str, *, temperature: float, max_tokens: int) -> Any:
        llm = importlib.import_module(self.models)
        if kind == "local":
            return llm.local_llm(temperature=temperature, **{self.max_tokens_keyword: max_tokens})
        model = llm.default_llm(temperature=temperature)
        model.max_tokens = max_tokens  # default_llm's 32 tokens are too few for a JSON question
        return model

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
        searchable, units = self.index_chunks(entries, client=client, collection_name=collection_name,
                                              show_progress=show_progress)  # fmt: skip
        hosts = self.hosts_on(kind, searchable, units, grid, pool_size)
        return {fusion: (host, self.fetch_on(host, pool_size)) for fusion, host in hosts.items()}

    def hosts_on(
        self, kind: str, searchable: Any, units: Any, grid: Sequence[FusionConfig], pool_size: int
    ) -> dict[FusionConfig | None, Any]:
        """The dense, BM25 or hybrid host(s) on an index: ``{fusion or None: host}``."""
        raise NotImplementedError

    def fetch_on(self, host: Any, pool_size: int) -> Callable[[str], CandidatePool]:
        """``fetch(question) -> CandidatePool`` of a built host, on its own scale."""
        raise NotImplementedError

    def calibrate_retriever(self, host: Any, examples: Sequence[CalibrationExample], **options: Any) -> Any:
        return self._call("calibrate_retriever", host, examples, **options)

    def calibrate_hybrid_retriever(
        self, searchable: Any, units: Any, examples: Sequence[CalibrationExample], **options: Any
    ) -> tuple[Any, Any]:
        return self._call("calibrate_hybrid_retriever", searchable, units, examples, **options)

    def unit_candidates(
        self,
        searchable: Any,
        units: Any,
        examples: Sequence[CalibrationExample],
        grid: Sequence[FusionConfig],
        pool_sizes: Sequence[int],
    ) -> Any:
        return self._call("unit_candidates", searchable, units, examples, grid, pool_sizes)

    def label_with_judge(
        self, host: Any, examples: Sequence[CalibrationExample], model: Any, budget: int, **options: Any
    ) -> tuple[list[CalibrationExample], Any]:
        return self._call("label_with_judge", host, examples, model, budget, **options)

    def generate_questions(self, chunks: Sequence[Chunk], model: Any, n: int, **options: Any) -> tuple[list, Any]:
        return self._call("generate_questions", chunks, model, n, **options)

    def fingerprint_of(self, host: Any) -> Fingerprint:
        return self._call("fingerprint_of", host)

    @staticmethod
    def fusion_in(pattern: re.Pattern[str], retriever: str) -> FusionConfig | None:
        """The fusion a host description names (``pattern``'s groups: method, weight), else ``None``."""
        from .tuning.tuned_calibration import FusionConfig

        match = pattern.match(retriever)
        if match is None:
            return None
        return FusionConfig(_MODES.get(match.group(1), match.group(1)), float(match.group(2)))


@cache
def _entry(name: str) -> FrameworkAdapter:
    module, _, attr = _ENTRIES[name].partition(":")
    return getattr(importlib.import_module(module), attr)()


def get_framework(name: str) -> FrameworkAdapter:
    """The registered adapter of ``name`` (imported now); ``ConformalError`` if not in :data:`FRAMEWORKS`."""
    if name not in _ENTRIES:
        raise ConformalError(f"framework must be one of {FRAMEWORKS}, got {name!r}.")
    return _entry(name)
