"""LlamaIndex ``BaseSynthesizer`` that answers with a geometrically growing context inside the conformal set."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from llama_index.core.base.llms.base import BaseLLM
from llama_index.core.base.response.schema import Response
from llama_index.core.prompts import ChatPromptTemplate, PromptTemplate
from llama_index.core.response_synthesizers.base import BaseSynthesizer
from llama_index.core.schema import MetadataMode, NodeWithScore

from ..answer_sets.adaptive_context import AdaptiveResult, approx_token_count
from ..answer_sets.options import AdaptiveSchedule, SamplingOptions, reject_moved_keywords
from ..answer_sets.sample_record import Sample
from ..answer_sets.synthesis import aadaptive_from_sampler, best_first, single_call_sampler
from .answer_sampler import LlamaIndexSampler, SamplerPrompts
from .traced_synthesis import TracedSynthesis


class AdaptiveContextSynthesizer(TracedSynthesis, SamplerPrompts, BaseSynthesizer):
    """Adaptive RAG over the conformal set: 1, 2, 4, ... top chunks until the LLM answers.

    Round ``r`` prompts the LLM once with the ``schedule[r]`` best nodes and stops at the first
    answer that is not "I don't know". The last round shows the whole retrieved set, so an
    abstention means the LLM saw every chunk the conformal retriever kept; an empty set abstains
    with no call, never "Empty Response". Traced like ``BaseSynthesizer`` (span, events,
    ``SYNTHESIZE`` callback); ``streaming=True`` yields the final answer in one piece.

    ``Response.source_nodes`` are the final round's nodes, then ``additional_source_nodes``.
    ``Response.metadata`` holds ``rounds``, ``llm_calls``, ``prompt_tokens``, ``completion_tokens``,
    ``chunks_used``, ``set_size``, ``abstained``, ``schedule``, ``round_answers``, ``chunk_ids``,
    ``history`` and ``token_source``: ``"reported"`` when the LLM returned usage (llama-cpp's
    ``raw["usage"]``, OpenAI-compatible servers), else ``"approximate"`` (``ceil(characters / 4)``),
    ``"mixed"`` if rounds differ.

    Parameters
    ----------
    llm : LlamaIndex LLM
        One call per round, decoded as configured (``temperature=0`` for Pathway's greedy answers).
        Base models get the few-shot completion prompt, chat models the chat prompt.
    sampling : SamplingOptions, optional
        :class:`~conformal_rag_plugins.answer_sets.options.SamplingOptions`: ``timeout``, ``retries`` and
        ``cache`` apply to each round's call (a failed call is a "no answer" round); ``n_samples`` and
        ``max_concurrency`` are unused.
    schedule : AdaptiveSchedule, optional
        :class:`~conformal_rag_plugins.answer_sets.options.AdaptiveSchedule` (default 1, 2, 4, ...);
        separate keywords (``initial=2``) raise a ``TypeError``.
    completion_prompt, chat_prompt : optional
        Replace the default prompts (variables ``{context}``, ``{question}``), as ``update_prompts`` does.
    **kwargs
        ``BaseSynthesizer``'s keywords (``callback_manager``, ``streaming``, ...).

    Examples
    --------
    >>> from llama_index.core.llms import MockLLM
    >>> synth = AdaptiveContextSynthesizer(llm=MockLLM(max_tokens=2))
    >>> synth.get_response("Who led the Norse?", ["Rollo led the Norse.", "Paris is in France."])
    'text text'
    >>> engine = RetrieverQueryEngine(retriever=conformal_retriever, response_synthesizer=synth)  # doctest: +SKIP
    """

    def __init__(
        self,
        llm: BaseLLM,
        *,
        sampling: SamplingOptions | None = None,
        schedule: AdaptiveSchedule | None = None,
        completion_prompt: PromptTemplate | None = None,
        chat_prompt: ChatPromptTemplate | None = None,
        **kwargs: Any,
    ) -> None:
        reject_moved_keywords(type(self).__name__, kwargs)
        super().__init__(llm=llm, **kwargs)
        self.sampling = sampling or SamplingOptions()
        self.schedule = schedule or AdaptiveSchedule()  # checked when it is made
        self.sampler = single_call_sampler(LlamaIndexSampler, llm, self.sampling, completion_prompt, chat_prompt)

    def _prompt_text(self, question: str, context: str) -> str:
        if self.sampler.is_chat:
            messages = self.sampler.chat_prompt.format_messages(context=context, question=question)
            return "\n".join(str(m.content or "") for m in messages)
        return self.sampler.completion_prompt.format(context=context, question=question)

    async def _aresult(self, question: str, texts: Sequence[str], ids: Sequence[str]) -> AdaptiveResult:

        def estimate(context: str, sample: Sample) -> tuple[int, int, str]:
            prompt = self._prompt_text(question, context)
            return approx_token_count(prompt), approx_token_count(sample.text), "approximate"

        return await aadaptive_from_sampler(
            self.sampler, question, texts, ids, schedule=self.schedule, estimate=estimate
        )

    async def _abuild(
        self, query_str: str, nodes: list[NodeWithScore], additional_source_nodes: list[NodeWithScore]
    ) -> Response:
        ordered = best_first(nodes, lambda n: n.score is not None, lambda n: n.score)  # else the retriever's order
        texts = [n.node.get_content(metadata_mode=MetadataMode.NONE) for n in ordered]
        result = await self._aresult(query_str, texts, [n.node.node_id for n in ordered])
        meta = result.to_dict()
        meta["set_size"] = len(ordered)
        sources = ordered[: result.chunks_used] + additional_source_nodes
        return Response(response=result.answer, source_nodes=sources, metadata=meta)

    async def aget_response(self, query_str: str, text_chunks: Sequence[str], **response_kwargs: Any) -> str:
        """Answer from raw text chunks taken as already in score order (best first)."""
        ids = [f"chunk-{i}" for i in range(len(text_chunks))]
        return (await self._aresult(query_str, list(text_chunks), ids)).answer
