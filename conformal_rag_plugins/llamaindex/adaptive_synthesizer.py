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

    Round ``r`` prompts the LLM once with the ``schedule[r]`` best nodes (overlapping prompts:
    each round repeats the best chunks and adds the next ones) and stops at the first answer
    that is not "I don't know" (:func:`~conformal_rag_plugins.core.adaptive_schedule.is_no_answer`).
    The schedule (:func:`~conformal_rag_plugins.core.adaptive_schedule.geometric_schedule`) always ends
    with the whole retrieved set, so an abstention ("I don't know") means the LLM saw every
    chunk the conformal retriever kept. An empty set abstains with no call, never "Empty Response".

    ``Response.source_nodes`` are the nodes of the final round's context (the answer's
    lineage), then any ``additional_source_nodes``. Traced like the base class, with
    ``streaming=True`` supported (see :class:`TracedSynthesis`). ``Response.metadata`` holds ``rounds``,
    ``llm_calls``, ``prompt_tokens``, ``completion_tokens``, ``chunks_used``, ``set_size``,
    ``abstained``, ``schedule``, ``round_answers``, ``chunk_ids``, ``history`` and
    ``token_source``: ``"reported"`` when the LLM returned usage (llama-cpp's ``raw["usage"]``,
    OpenAI-compatible servers), else ``"approximate"`` (``ceil(characters / 4)`` of the formatted
    prompt and of the answer), ``"mixed"`` if rounds differ.

    Parameters
    ----------
    llm : LlamaIndex LLM
        One call per round, decoded as the LLM is configured: pass a greedy LLM
        (``temperature=0``) for Pathway's behaviour. Base models get the few-shot completion
        prompt, chat models the chat prompt (override with
        ``update_prompts({"completion_prompt": ..., "chat_prompt": ...})``).
    sampling : SamplingOptions, optional
        :class:`~conformal_rag_plugins.answer_sets.options.SamplingOptions`: its ``timeout``, ``retries``
        and ``cache`` apply to each round's one call (a failed call is a "no answer" round);
        ``n_samples`` and ``max_concurrency`` are not used.
    schedule : AdaptiveSchedule, optional
        :class:`~conformal_rag_plugins.answer_sets.options.AdaptiveSchedule` (default 1, 2, 4, ... chunks);
        separate keywords (``initial=2``) raise a ``TypeError`` naming the option object.
    completion_prompt, chat_prompt : optional
        Replace the default prompts (variables ``{context}`` and ``{question}``).
    **kwargs
        ``callback_manager``, ``streaming`` and the rest of ``BaseSynthesizer``'s keywords.

    Examples
    --------
    >>> from llama_index.core.llms import MockLLM
    >>> synth = AdaptiveContextSynthesizer(llm=MockLLM(max_tokens=2))
    >>> synth.get_response("Who led the Norse?", ["Rollo led the Norse.", "Paris is in France."])
    'text text'
    >>> AdaptiveContextSynthesizer(llm=MockLLM(), schedule=AdaptiveSchedule(initial=2, factor=3.0)).schedule.initial
    2
    >>> engine = RetrieverQueryEngine(  # doctest: +SKIP
    ...     retriever=ConformalRetriever(index=index, calibration=cal),
    ...     response_synthesizer=AdaptiveContextSynthesizer(llm=local_llm(temperature=0.0)),
    ... )
    >>> engine.query("Who was the Norse leader?").metadata["rounds"]  # doctest: +SKIP
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
        """One call per round (:func:`~conformal_rag_plugins.answer_sets.synthesis.aadaptive_from_sampler`)."""

        def estimate(context: str, sample: Sample) -> tuple[int, int, str]:
            prompt = self._prompt_text(question, context)
            return approx_token_count(prompt), approx_token_count(sample.text), "approximate"

        return await aadaptive_from_sampler(
            self.sampler, question, texts, ids, schedule=self.schedule, estimate=estimate
        )

    async def _abuild(
        self, query_str: str, nodes: list[NodeWithScore], additional_source_nodes: list[NodeWithScore]
    ) -> Response:
        """Answer ``query_str`` from ``nodes`` (best first by score) with a growing context; empty -> abstain."""
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
