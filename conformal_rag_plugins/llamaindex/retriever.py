"""LlamaIndex ``BaseRetriever`` that returns the calibrated conformal set."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.callbacks import CallbackManager
from llama_index.core.schema import BaseNode, NodeWithScore, QueryBundle

from ..core.errors import ConformalError
from ..datasets.examples import CalibrationExample
from ..frameworks import tuned_host_from_entries
from ..monitor.monitor import ServedScores
from ..report.held_out import HeldOutEvaluation
from ..retrieval.calibration import RetrievalCalibration
from ..retrieval.options import RetrievalOptions
from ..retrieval.served_checks import ServedPoolCheck
from ..retrieval.serving import DEFAULT_OPTIONS, ServingMixin, ServingOptions, serving_calibration
from ..tuning.options import TuningOptions
from .from_documents import entries_from_documents
from .host import resolve_host
from .node_selection import check_served, host_check, ordered_nodes, select_nodes
from .parent_retrieval import ParentLevel, check_level, resolve_parent_level
from .tuned_host import TUNED_HOST


class ConformalRetriever(HeldOutEvaluation, ServingMixin, BaseRetriever):
    """Return every node whose score passes the calibrated threshold.

    The gold chunk is in the result with probability >= ``calibration.confidence_level_``, unless
    ``options.max_k`` cuts the set (the nodes then say so and a warning is raised).

    Parameters
    ----------
    calibration : RetrievalCalibration or AnswerSetCalibration
        From :func:`calibrate_retriever` on the same host (checked by fingerprint); an end-to-end
        calibration serves its retrieval stage.
    index, retriever : VectorStoreIndex or BaseRetriever
        The host (e.g. a ``QueryFusionRetriever``): pass exactly one.
    options : ServingOptions, optional
        See :class:`~conformal_rag_plugins.retrieval.serving.ServingOptions`
        (``retriever.monitor = ...`` attaches a monitor later).
    parents : docstore, StorageContext, mapping or list of nodes, optional
        Small-to-big: return copies of the chunks' parents, scored from their chunks, with
        ``metadata["conformal_chunks"]`` (``{"id", "score", "text"}`` of those chunks, best first;
        hidden from the LLM). An ``AutoMergingRetriever`` or ``RecursiveRetriever`` host brings its own.
    parent_aggregation : {"max", "sum"}, default "max"

    Examples
    --------
    >>> retriever = ConformalRetriever(index=index, calibration=cal)  # doctest: +SKIP
    >>> engine = RetrieverQueryEngine.from_args(retriever)  # doctest: +SKIP
    """

    options: ServingOptions = DEFAULT_OPTIONS  # class defaults: set per instance by __init__
    parent_level: ParentLevel | None = None
    served_check: ServedPoolCheck | None = None

    def __init__(
        self,
        calibration: RetrievalCalibration | Any,
        *,
        index: Any = None,
        retriever: BaseRetriever | None = None,
        options: ServingOptions | None = None,
        parents: Any = None,
        parent_aggregation: str = "max",
        callback_manager: CallbackManager | None = None,
        verbose: bool = False,
    ) -> None:
        if (index is None) == (retriever is None):
            raise ConformalError("Pass exactly one host: index=... or retriever=...")
        self._given_calibration = calibration  # what evaluate() leaves out: an answer-set one's split and pilot too
        self.calibration = calibration = serving_calibration(calibration)
        self.options = options = options or DEFAULT_OPTIONS
        options.check(calibration)
        host = retriever if retriever is not None else index
        self.parent_level = level = resolve_parent_level(host, parents, parent_aggregation)
        self._host, _ = resolve_host(host if level is None else level.retriever, calibration.pool_size_)
        if options.check_fingerprint:
            check_level(calibration, level)
            fingerprint = None if level is None else level.fingerprint(self._host)
            # every query's pool too: the scale's range, embedding dimensions, chunks new to the collection
            self.served_check = host_check(calibration, self._host, "ConformalRetriever", fingerprint)
        super().__init__(callback_manager=callback_manager, verbose=verbose)

    @classmethod
    def from_documents(
        cls,
        documents: Sequence[BaseNode],
        examples: Sequence[CalibrationExample] | None = None,
        *,
        confidence_level: float | None = None,
        calibration: RetrievalCalibration | None = None,
        options: RetrievalOptions | None = None,
        tuning: TuningOptions | None = None,
        pool_size: int = 50,
        chunk_size: int | None = None,
        chunk_overlap: int | None = None,
        persist_dir: str | Path | None = None,
        client: Any = None,
        serving: ServingOptions | None = None,
    ) -> ConformalRetriever:
        """The tuned hybrid host on your own documents, calibrated, in one call.

        Chunk ``documents`` with LlamaIndex's ``SentenceSplitter`` in MiniLM tokens (no chunk passes the
        embedding window), embed them in Chroma with the bundled MiniLM (cosine, telemetry off), fuse
        with BM25, then choose the fusion setting, score family and pool size (1x, 2x, 4x ``pool_size``)
        that give the fewest context tokens on a seeded optimisation split and calibrate on the rest.
        It is the route of ``conformal-rag calibrate``: on the same documents and questions both give
        the same host and threshold.

        Parameters
        ----------
        documents : sequence of llama_index.core.Document
            The corpus. Their ``id_`` becomes the corpus id: give stable ids (``Document(text=..., id_=...)``), since
            LlamaIndex draws random ones otherwise and a saved calibration then no longer matches. Only the
            text and ``metadata["title"]`` are indexed.
        examples : sequence of CalibrationExample, optional
            Labelled questions. Gold ids may be chunk ids or the documents' ids: a document id moves onto
            the chunk(s) holding a reference answer (``answers=``), else onto all of its chunks.
        confidence_level : float, optional
            Target probability that a gold chunk is returned (default: ``options``', 0.9).
        calibration : RetrievalCalibration, optional
            Instead of ``examples``: a calibration saved from this call (or from ``conformal-rag calibrate
            --framework llamaindex``) on the same documents and chunking. Its host is rebuilt without
            calibrating; a calibration of another framework, host or collection is refused.
        options : RetrievalOptions, optional
            Calibration options (``random_state`` seeds the split, default 0; ``score`` default ``"auto"``).
        tuning : TuningOptions, optional
            The fusion grid, ``pool_sizes`` (default 1x, 2x, 4x ``pool_size``), ``optimisation_fraction``.
        pool_size : int, default 50
            The base pool of candidates per question.
        chunk_size, chunk_overlap : int, optional
            MiniLM tokens per chunk and of overlap (default 254 and 25).
        persist_dir : str or Path, optional
            A Chroma directory to keep the embeddings in (default: in memory). Or
        client : chromadb client, optional
            Your own Chroma client.
        serving : ServingOptions, optional
            The returned retriever's serving options (``max_k``, ``monitor``, ...).

        Returns
        -------
        ConformalRetriever
            Over the tuned hybrid host; ``.calibration`` holds the calibration (``.save(path)`` it, and pass
            ``calibration=RetrievalCalibration.load(path)`` next time).

        Examples
        --------
        >>> from llama_index.core import Document
        >>> from conformal_rag_plugins import CalibrationExample
        >>> docs = [Document(text=text, id_=doc_id) for doc_id, text in my_texts.items()]  # doctest: +SKIP
        >>> examples = [CalibrationExample("Who led the Normans?", gold_ids=("normans",), answers=("Rollo",))]
        >>> retriever = ConformalRetriever.from_documents(docs, examples, confidence_level=0.9)  # doctest: +SKIP
        >>> retriever.calibration.save("calibration.json")  # doctest: +SKIP
        >>> same = ConformalRetriever.from_documents(  # doctest: +SKIP
        ...     docs, calibration=RetrievalCalibration.load("calibration.json"))
        >>> nodes = retriever.retrieve("Who led the Normans?")  # doctest: +SKIP
        """
        host, cal = tuned_host_from_entries(
            TUNED_HOST,
            entries_from_documents(documents),
            examples,
            confidence_level=confidence_level,
            calibration=calibration,
            options=options,
            tuning=tuning,
            pool_size=pool_size,
            chunk_size=chunk_size,
            chunk_overlap=chunk_overlap,
            persist_dir=persist_dir,
            client=client,
        )
        return cls(calibration=cal, retriever=host, **({} if serving is None else {"options": serving}))

    def _held_out_parts(self) -> tuple[Any, Any, Any]:
        """What :meth:`evaluate` (``report.held_out``) needs: the gold rule, one served question, MiniLM tokens."""
        from ..local.tokens import count_tokens
        from .retrieval_host import LlamaIndexHost

        def serve(question: str) -> list[tuple[str, str, Any]]:
            return [(n.node.node_id, n.node.get_content(), n.node.metadata.get("conformal_guaranteed"))
                    for n in self.retrieve(question)]  # fmt: skip

        reader = LlamaIndexHost(self._host, self.calibration.pool_size_, self.parent_level)
        return reader.prepare_gold, serve, count_tokens

    def _parents(self, nodes: list[NodeWithScore]) -> list[NodeWithScore]:
        """The chunks' parents for small-to-big, else the nodes."""
        return nodes if self.parent_level is None else self.parent_level.parent_nodes(nodes)

    def _select(self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None) -> list[NodeWithScore]:
        """Check the host's pool, then serve its conformal set."""
        check_served(self.served_check, nodes, query_bundle)
        query = "" if query_bundle is None else query_bundle.query_str
        return select_nodes(self._parents(nodes), self.calibration, self.options, query=query)

    def pool_scores(self, query: str | QueryBundle) -> ServedScores:
        """The host's pool scores for ``query`` (parents for small-to-big), best first, as the monitor sees them.

        The reference of :meth:`~conformal_rag_plugins.monitor.monitor.ConformalMonitor.from_observations`.

        Examples
        --------
        >>> pools = [retriever.pool_scores(q) for q in questions]  # doctest: +SKIP
        >>> monitor = ConformalMonitor.from_observations(cal, pools, statistic="set_size")  # doctest: +SKIP
        """
        bundle = query if isinstance(query, QueryBundle) else QueryBundle(query_str=query)
        _, scores = ordered_nodes(self._parents(self._host.retrieve(bundle)))
        return ServedScores.of_drop_in(self, scores, bundle.query_str, self.parent_level)

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return self._select(self._host.retrieve(query_bundle), query_bundle)

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return self._select(await self._host.aretrieve(query_bundle), query_bundle)
