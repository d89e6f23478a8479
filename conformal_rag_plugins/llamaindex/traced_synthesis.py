"""What LlamaIndex's ``BaseSynthesizer`` traces, for synthesizers that build their own ``Response``.

``BaseSynthesizer.synthesize`` opens an instrumentation span, dispatches
``SynthesizeStartEvent``/``SynthesizeEndEvent`` and wraps the work in a ``SYNTHESIZE``
callback event. The conformal synthesizers replace ``synthesize`` (they need the nodes'
scores and metadata, not only their texts), so :class:`TracedSynthesis` does the same
around their ``_abuild`` coroutine, and honours ``streaming=True``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import llama_index.core.instrumentation as instrument
from llama_index.core.base.response.schema import AsyncStreamingResponse, Response, StreamingResponse
from llama_index.core.callbacks.schema import CBEventType, EventPayload
from llama_index.core.instrumentation.events.synthesis import SynthesizeEndEvent, SynthesizeStartEvent
from llama_index.core.schema import NodeWithScore, QueryBundle, QueryType

from ..runtime.run_sync import run_sync

dispatcher = instrument.get_dispatcher(__name__)


def _bundle(query: QueryType) -> QueryBundle:
    return query if isinstance(query, QueryBundle) else QueryBundle(query_str=str(query))


def _one_piece(text: str) -> Iterator[str]:
    yield text


async def _aone_piece(text: str) -> AsyncIterator[str]:
    yield text


class TracedSynthesis:
    """Mixin (before ``BaseSynthesizer``): ``synthesize``/``asynthesize`` with the base class's tracing.

    Subclasses implement ``async def _abuild(query_str, nodes, additional_source_nodes) -> Response``.
    Both entry points run inside an instrumentation span, dispatch the synthesize start and end
    events, and report a ``CBEventType.SYNTHESIZE`` callback event with the query and response,
    so LlamaIndex handlers (``LlamaDebugHandler``, Arize/Langfuse integrations) see the
    synthesizer and the LLM calls nested under it. The sync path runs the coroutine with
    :func:`~conformal_rag_plugins.runtime.run_sync.run_sync`, so it also works in Jupyter.

    With ``streaming=True`` the result is a ``StreamingResponse`` (``AsyncStreamingResponse``
    from ``asynthesize``) whose generator yields the final answer in one piece: an answer set
    is decided only after every sample is drawn, so there are no earlier tokens to stream.
    Its ``metadata`` is the same as the non-streaming ``Response``'s.

    Examples
    --------
    >>> from conformal_rag_plugins.llamaindex import AdaptiveContextSynthesizer
    >>> issubclass(AdaptiveContextSynthesizer, TracedSynthesis)
    True
    """

    _callback_manager: Any
    _streaming: bool

    async def _abuild(
        self, query_str: str, nodes: list[NodeWithScore], additional_source_nodes: list[NodeWithScore]
    ) -> Response:
        raise NotImplementedError

    def get_response(self, query_str: str, text_chunks: Sequence[str], **response_kwargs: Any) -> str:
        """Sync ``aget_response``."""
        return run_sync(self.aget_response(query_str, text_chunks, **response_kwargs))  # type: ignore[attr-defined]

    def _streamed(self, response: Response, *, use_async: bool) -> Any:
        if not getattr(self, "_streaming", False):
            return response
        kind, pieces = (AsyncStreamingResponse, _aone_piece) if use_async else (StreamingResponse, _one_piece)
        return kind(response_gen=pieces(response.response or ""), source_nodes=response.source_nodes,
                    metadata=response.metadata)  # fmt: skip

    @contextmanager
    def _traced(self, query: QueryType, *, use_async: bool) -> Iterator[list[Any]]:
        """Start/end events around a ``SYNTHESIZE`` callback event; the caller appends its ``Response``.

        On exit the box holds the (possibly streaming) output the entry point returns.
        """
        dispatcher.event(SynthesizeStartEvent(query=query))
        box: list[Any] = [_bundle(query).query_str]
        with self._callback_manager.event(CBEventType.SYNTHESIZE, payload={EventPayload.QUERY_STR: box[0]}) as event:
            yield box
            event.on_end(payload={EventPayload.RESPONSE: box[-1]})
        box.append(self._streamed(box[-1], use_async=use_async))
        dispatcher.event(SynthesizeEndEvent(query=query, response=box[-1]))

    @dispatcher.span
    def synthesize(
        self,
        query: QueryType,
        nodes: list[NodeWithScore],
        additional_source_nodes: Sequence[NodeWithScore] | None = None,
        **response_kwargs: Any,
    ) -> Any:
        """Build the response for ``query`` from the retrieved ``nodes`` (traced like the base class)."""
        with self._traced(query, use_async=False) as box:
            box.append(run_sync(self._abuild(box[0], list(nodes), list(additional_source_nodes or []))))
        return box[-1]

    @dispatcher.span
    async def asynthesize(
        self,
        query: QueryType,
        nodes: list[NodeWithScore],
        additional_source_nodes: Sequence[NodeWithScore] | None = None,
        **response_kwargs: Any,
    ) -> Any:
        """Async :meth:`synthesize`."""
        with self._traced(query, use_async=True) as box:
            box.append(await self._abuild(box[0], list(nodes), list(additional_source_nodes or [])))
        return box[-1]
