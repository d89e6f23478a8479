"""LangChain ``BaseRetriever`` that returns the calibrated conformal set."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from langchain_core.callbacks import (
    AsyncCallbackManagerForRetrieverRun,
    CallbackManagerForRetrieverRun,
)
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from langchain_core.vectorstores import VectorStore
from pydantic import ConfigDict, Field, PrivateAttr, model_validator

from ..core.errors import ConformalError
from ..datasets.examples import CalibrationExample
from ..frameworks import tuned_host_from_entries
from ..monitor.monitor import ServedScores
from ..report.held_out import HeldOutEvaluation
from ..retrieval.calibration import RetrievalCalibration
from ..retrieval.dropin_init import validated_init
from ..retrieval.groups import check_group_options
from ..retrieval.options import RetrievalOptions
from ..retrieval.served_checks import ServedPoolCheck, check_host
from ..retrieval.serving import ServingMixin, ServingOptions, check_host_k, ordered_by_score, serving_calibration
from ..tuning.options import TuningOptions
from .document_selection import select_documents
from .fingerprint import fingerprint_of
from .from_documents import entries_from_documents
from .host import afetch_pool, all_ids, doc_id, fetch_pairs, pool_from_pairs
from .parent_retrieval import ParentHost, parent_host
from .tuned_host import TUNED_HOST


class ConformalRetriever(HeldOutEvaluation, ServingMixin, BaseRetriever):
    """Return every chunk whose score passes the calibrated threshold.

    The gold chunk is in the result with probability >= ``calibration.confidence_level_``
    (marginally over exchangeable questions), unless ``k``/``max_k`` cuts the set.

    Parameters
    ----------
    calibration : RetrievalCalibration or AnswerSetCalibration
        From :func:`calibrate_retriever` on the same host (checked by fingerprint); an end-to-end
        calibration serves its retrieval stage.
    vectorstore : VectorStore, optional
        Host with relevance scores; or
    retriever : BaseRetriever, optional
        A host that sets ``metadata['score']``.
    k : int, optional
        Cap the set (also ``invoke(q, k=...)``); it cuts the guarantee when it bites.
    options : ServingOptions, optional
        See :class:`~conformal_rag_plugins.retrieval.serving.ServingOptions`; ``invoke(q, group="x")``
        sets the group per call, ``retriever.monitor = ...`` attaches a monitor later.
    parents, id_key, parent_aggregation : optional
        Small-to-big, as in :func:`calibrate_retriever`: return copies of the *parent* documents with
        the aggregated score and ``metadata['conformal_chunks']`` (``id``, ``score``, ``text`` of their
        chunks, best first). A ``MultiVectorRetriever`` / ``ParentDocumentRetriever`` host is
        parent-level by itself; the calibration must be parent-level too.

    Examples
    --------
    >>> retriever = ConformalRetriever(vectorstore=store, calibration=cal)  # doctest: +SKIP
    >>> chain = retriever | format_docs | prompt | llm  # doctest: +SKIP
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    calibration: RetrievalCalibration
    vectorstore: VectorStore | None = None
    retriever: BaseRetriever | None = None
    k: int | None = Field(default=None, ge=1)
    options: ServingOptions = Field(default_factory=ServingOptions)
    parents: Any = None
    id_key: str | None = None
    parent_aggregation: str = "max"
    _parent: ParentHost | None = PrivateAttr(default=None)
    _served: ServedPoolCheck | None = PrivateAttr(default=None)
    # the calibration given, which evaluate() reads: an answer-set one's split and pilot questions are not held out
    _given_calibration: Any = PrivateAttr(default=None)

    def __init__(self, **data: Any) -> None:
        validated_init(super().__init__, data, "ConformalRetriever")
        self._given_calibration = data.get("calibration")

    @model_validator(mode="before")
    @classmethod
    def _retrieval_stage(cls, data: Any) -> Any:
        cal = data.get("calibration") if isinstance(data, dict) else None
        if cal is not None and hasattr(cal, "retrieval_stage"):
            data = {**data, "calibration": serving_calibration(cal)}
        return data

    @model_validator(mode="after")
    def _validate(self) -> ConformalRetriever:
        if (self.vectorstore is None) == (self.retriever is None):
            raise ConformalError("Pass exactly one host: vectorstore=... or retriever=...")
        self.options.for_call(self.k)  # a k below min_k is refused now
        self.options.check(self.calibration)
        self._parent = parent_host(self._host, parents=self.parents, id_key=self.id_key, how=self.parent_aggregation)
        if self._parent is not None:
            self._parent.check_pool_size(self.calibration.pool_size_)
        if self.options.check_fingerprint:
            fp = fingerprint_of(self._host) if self._parent is None else self._parent.fingerprint()
            served = check_host(self.calibration, fp, lambda: all_ids(self._host), "ConformalRetriever", stacklevel=5)
            if self._parent is None:  # every query's chunks too: the scale's range, chunks new to the collection
                self._served = served
        check_host_k(self.retriever, self.calibration)
        return self

    @classmethod
    def from_documents(
        cls,
        documents: Sequence[Document],
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

        Chunk ``documents`` with LangChain's ``RecursiveCharacterTextSplitter`` in MiniLM tokens (no chunk passes the
        embedding window), embed them in Chroma with the bundled MiniLM (cosine, telemetry off), fuse
        with BM25, then choose the fusion setting, score family and pool size (1x, 2x, 4x ``pool_size``)
        that give the fewest context tokens on a seeded optimisation split and calibrate on the rest.
        It is the route of ``conformal-rag calibrate --framework langchain``: on the same documents and
        questions both give the same host and threshold.

        Parameters
        ----------
        documents : sequence of langchain_core.documents.Document
            The corpus. Their ``id`` becomes the corpus id (a document without one gets an id derived from its
            text, the same on every run). Only the text and ``metadata["title"]`` are indexed.
        examples : sequence of CalibrationExample, optional
            Labelled questions. Gold ids may be chunk ids or the documents' ids: a document id moves onto
            the chunk(s) holding a reference answer (``answers=``), else onto all of its chunks.
        confidence_level : float, optional
            Target probability that a gold chunk is returned (default: ``options``', 0.9).
        calibration : RetrievalCalibration, optional
            Instead of ``examples``: a calibration saved from this call (or from ``conformal-rag calibrate
            --framework langchain``) on the same documents and chunking. Its host is rebuilt without
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
        >>> from langchain_core.documents import Document
        >>> from conformal_rag_plugins import CalibrationExample
        >>> docs = [Document(text, id=doc_id) for doc_id, text in my_texts.items()]  # doctest: +SKIP
        >>> examples = [CalibrationExample("Who led the Normans?", gold_ids=("normans",), answers=("Rollo",))]
        >>> retriever = ConformalRetriever.from_documents(docs, examples, confidence_level=0.9)  # doctest: +SKIP
        >>> retriever.calibration.save("calibration.json")  # doctest: +SKIP
        >>> same = ConformalRetriever.from_documents(  # doctest: +SKIP
        ...     docs, calibration=RetrievalCalibration.load("calibration.json"))
        >>> chunks = retriever.invoke("Who led the Normans?")  # doctest: +SKIP
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
        from .retrieval_host import LangChainHost

        def serve(question: str) -> list[tuple[str | None, str, Any]]:
            return [(doc_id(d), d.page_content, d.metadata.get("conformal_guaranteed")) for d in self.invoke(question)]

        return LangChainHost(self._host, self.calibration.pool_size_, self._parent).prepare_gold, serve, count_tokens

    @property
    def _host(self) -> VectorStore | BaseRetriever:
        host = self.vectorstore if self.vectorstore is not None else self.retriever
        assert host is not None
        return host

    def _select(
        self,
        docs: list[Document],
        scores: Any,
        k: int | None,
        *,
        checked: bool = False,
        query: str = "",
        group: Any = None,
    ) -> list[Document]:
        """One query's conformal set, pool checked first; ``checked=True``: scores NaN-free, best first."""
        if self._served is not None:  # stacklevel 5: one frame below _get_relevant_documents
            self._served([doc_id(d) for d in docs], scores, stacklevel=5)
        check_group_options(self.calibration, group, None)
        options = self.options.for_call(k, self.k, group=group)
        return select_documents(docs, scores, self.calibration, options, checked=checked, query=query)

    def _fetch(self, query: str, callbacks: Any = None) -> tuple[list[Document], np.ndarray]:
        """The host's top ``pool_size`` documents best first and their scores."""
        if self._parent is not None:
            return self._parent.fetch(query, self.calibration.pool_size_, callbacks=callbacks)
        pairs = fetch_pairs(self._host, query, self.calibration.pool_size_, callbacks=callbacks)
        # a missing or NaN score: pool_from_pairs raises the CalibrationError naming it
        return ordered_by_score([d for d, _ in pairs], [s for _, s in pairs], lambda: pool_from_pairs(pairs))

    def pool_scores(self, query: str, *, group: str | None = None) -> ServedScores:
        """The host's pool scores for ``query`` (parents for small-to-big), best first, as the monitor sees them.

        ``group`` as in ``invoke(query, group=...)``.

        Examples
        --------
        >>> pools = [retriever.pool_scores(q) for q in questions]  # doctest: +SKIP
        >>> monitor = ConformalMonitor.from_observations(cal, pools, statistic="set_size")  # doctest: +SKIP
        """
        check_group_options(self.calibration, group, None)
        return ServedScores.of_drop_in(self, self._fetch(query)[1], query, self._parent, group)

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, k: int | None = None, **kwargs: Any
    ) -> list[Document]:
        docs, scores = self._fetch(query, run_manager.get_child())
        return self._select(docs, scores, k, checked=True, query=query, group=kwargs.get("group"))

    async def _aget_relevant_documents(
        self,
        query: str,
        *,
        run_manager: AsyncCallbackManagerForRetrieverRun,
        k: int | None = None,
        **kwargs: Any,
    ) -> list[Document]:
        child, size = run_manager.get_child(), self.calibration.pool_size_
        if self._parent is not None:
            docs, scores = await self._parent.afetch(query, size, callbacks=child)
        else:
            pool, docs = await afetch_pool(self._host, query, size, callbacks=child)
            scores = pool.scores
        return self._select(docs, scores, k, checked=True, query=query, group=kwargs.get("group"))
