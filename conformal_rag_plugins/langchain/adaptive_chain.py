"""LangChain Runnable that answers with a geometrically growing context inside the conformal set."""

from __future__ import annotations

from typing import Any

from langchain_core.documents import Document
from langchain_core.language_models import BaseLanguageModel
from langchain_core.prompts import ChatPromptTemplate, PromptTemplate
from langchain_core.runnables import RunnableConfig, RunnableSerializable
from pydantic import ConfigDict, PrivateAttr, model_validator

from ..answer_sets.adaptive_context import AdaptiveResult, approx_token_count
from ..answer_sets.options import AdaptiveSchedule, SamplingOptions, reject_moved_keywords
from ..answer_sets.sample_record import Sample
from ..answer_sets.synthesis import aadaptive_from_sampler, best_first, single_call_sampler
from .answer_sampler import LangChainSampler
from .host import doc_id
from .synthesizer import ChainRun, ConformalAnswerSetSynthesizer


def _parse(value: Any) -> tuple[str, list[Document]]:
    if isinstance(value, dict) and "documents" in value and "context" not in value:
        value = {**value, "context": value["documents"]}
    question, docs = ConformalAnswerSetSynthesizer._parse(value)
    return question, [d if isinstance(d, Document) else Document(page_content=str(d)) for d in docs]


def _own_tokenizer(model: BaseLanguageModel) -> bool:
    """Whether the model has its own tokenizer (the default ``get_num_tokens`` downloads GPT-2's)."""
    overridden = type(model).get_num_tokens is not BaseLanguageModel.get_num_tokens
    return overridden or getattr(model, "custom_get_token_ids", None) is not None


class AdaptiveContextSynthesizer(ChainRun, RunnableSerializable[dict[str, Any], AdaptiveResult]):
    """Adaptive RAG over the conformal set as an LCEL Runnable: 1, 2, 4, ... top documents until the LLM answers.

    Input ``{"question": str, "documents": list[Document]}`` (or ``"context"``, as for
    :class:`~conformal_rag_plugins.langchain.ConformalAnswerSetSynthesizer`); documents are ordered by
    ``metadata["score"]`` when they all carry one, else kept in the retriever's order. Round ``r``
    calls the model once with the ``schedule[r]`` best documents and stops at the first answer that
    is not "I don't know"; the last round shows the whole set, so an abstention means the model saw
    every document. Runs as a chain run, the model calls as its child runs.

    Output: an :class:`~conformal_rag_plugins.answer_sets.adaptive_context.AdaptiveResult`. Token counts
    are ``"reported"`` from ``AIMessage.usage_metadata`` or ``LLMResult.llm_output["token_usage"]``;
    else ``"tokenizer"`` (the model's own ``get_num_tokens``, e.g. llama-cpp's) or, when the model has
    no tokenizer of its own, ``"approximate"`` (``ceil(characters / 4)``).

    Parameters
    ----------
    llm : BaseLanguageModel
        One call per round with the model's own decoding settings (``temperature=0`` for greedy).
        Chat models get the chat prompt, completion LLMs the few-shot prompt.
    sampling : SamplingOptions, optional
        :class:`~conformal_rag_plugins.answer_sets.options.SamplingOptions`: ``timeout``, ``retries`` and
        ``cache`` apply to each round's call (a failed call is a "no answer" round); ``n_samples`` and
        ``max_concurrency`` are unused.
    schedule : AdaptiveSchedule, optional
        :class:`~conformal_rag_plugins.answer_sets.options.AdaptiveSchedule` (default 1, 2, 4, ...);
        separate fields (``initial=2``) raise a ``TypeError``.
    completion_prompt, chat_prompt : optional
        Replace the default prompts (variables ``{context}`` and ``{question}``).

    Examples
    --------
    >>> from langchain_core.language_models import FakeListChatModel
    >>> synth = AdaptiveContextSynthesizer(llm=FakeListChatModel(responses=["I don't know", "Rollo"]))
    >>> docs = [Document("Paris is in France."), Document("Rollo led the Norse."), Document("Far away.")]
    >>> result = synth.invoke({"question": "Who led the Norse?", "documents": docs})
    >>> result.answer, result.rounds, result.chunks_used
    ('Rollo', 2, 2)
    >>> wider = AdaptiveContextSynthesizer(llm=FakeListChatModel(responses=["x"]), schedule=AdaptiveSchedule(initial=2))
    >>> wider.schedule
    AdaptiveSchedule(initial=2, factor=2.0, max_rounds=None, separator='\\n')
    >>> chain = {"documents": retriever, "question": RunnablePassthrough()} | synth  # doctest: +SKIP
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    llm: BaseLanguageModel
    sampling: SamplingOptions | None = None
    schedule: AdaptiveSchedule | None = None
    completion_prompt: PromptTemplate | None = None
    chat_prompt: ChatPromptTemplate | None = None
    _sampler: LangChainSampler = PrivateAttr()

    def __init__(self, **data: Any) -> None:
        # AdaptiveSchedule checks itself when it is made, so a bad value raises ConformalError
        # there rather than pydantic's ValidationError here
        reject_moved_keywords(type(self).__name__, data)
        super().__init__(**data)

    @model_validator(mode="after")
    def _setup(self) -> AdaptiveContextSynthesizer:
        self.sampling = self.sampling or SamplingOptions()
        self.schedule = self.schedule or AdaptiveSchedule()
        self._sampler = single_call_sampler(
            LangChainSampler, self.llm, self.sampling, self.completion_prompt, self.chat_prompt
        )
        return self

    @property
    def sampler(self) -> LangChainSampler:
        """The single-call sampler (its ``completion_prompt`` / ``chat_prompt`` can be replaced)."""
        return self._sampler

    def _estimate(self, question: str, context: str, sample: Sample) -> tuple[int, int, str]:
        prompt = self._sampler.prompt.invoke({"context": context, "question": question}).to_string()
        if _own_tokenizer(self.llm):
            try:
                return self.llm.get_num_tokens(prompt), self.llm.get_num_tokens(sample.text), "tokenizer"
            except Exception:  # a tokenizer that cannot run offline: fall back to the estimate
                pass
        return approx_token_count(prompt), approx_token_count(sample.text), "approximate"

    async def _build(self, value: dict[str, Any], child: RunnableConfig) -> AdaptiveResult:
        question, docs = _parse(value)
        ordered = best_first(docs, lambda d: "score" in d.metadata, lambda d: d.metadata["score"])
        return await aadaptive_from_sampler(
            self._sampler,
            question,
            [d.page_content for d in ordered],
            [doc_id(d) or f"doc-{i}" for i, d in enumerate(ordered)],
            schedule=self.schedule,
            estimate=lambda context, sample: self._estimate(question, context, sample),
            config=child,
        )
