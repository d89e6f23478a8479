"""``BaseSynthesizer``'s tracing for synthesizers that build their own ``Response``.

The conformal synthesizers replace ``synthesize`` (they need the nodes' scores and metadata, not
only their texts), so :class:`TracedSynthesis` redoes its span, events and callback event.
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
    """Mixin (before ``BaseSynthesizer``): ``synthesize``/``asynthesize`` around ``_abuild``, traced as the base class.

    Instrumentation span, ``SynthesizeStartEvent``/``SynthesizeEndEvent`` and a ``CBEventType.SYNTHESIZE``
    callback event, so handlers (``LlamaDebugHandler``, Arize/Langfuse) nest the LLM calls under the
    synthesizer; the sync path uses :func:`~conformal_rag_plugins.runtime.run_sync.run_sync` (works in
    Jupyter). With ``streaming=True`` a ``StreamingResponse`` (``AsyncStreamingResponse`` from
    ``asynthesize``) yields the final answer in one piece, since an answer set is decided only after
    every sample; its ``metadata`` is the ``Response``'s.

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
        return run_sync(self.aget_response(query_str, text_chunks, **response_kwargs))  # type: ignore[attr-defined]

    def _streamed(self, response: Response, *, use_async: bool) -> Any:
        if not getattr(self, "_streaming", False):
            return response
        kind, pieces = (AsyncStreamingResponse, _aone_piece) if use_async else (StreamingResponse, _one_piece)
        return kind(response_gen=pieces(response.response or ""), source_nodes=response.source_nodes,
                    metadata=response.metadata)  # fmt: skip

    @contextmanager
    def _traced(self, query: QueryType, *, use_async: bool) -> Iterator[list[Any]]:
        """Start/end events around a ``SYNTHESIZE`` callback event; on exit the box's last item is the output."""
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
        with self._traced(query, use_async=True) as box:
            box.append(await self._abuild(box[0], list(nodes), list(additional_source_nodes or [])))
        return box[-1]
