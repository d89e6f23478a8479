"""LlamaIndex ``BaseSynthesizer`` that returns a conformal answer set."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from llama_index.core.base.llms.base import BaseLLM
from llama_index.core.base.response.schema import Response
from llama_index.core.prompts import ChatPromptTemplate, PromptTemplate
from llama_index.core.response_synthesizers.base import BaseSynthesizer
from llama_index.core.schema import MetadataMode, NodeWithScore

from ..answer_sets.calibration import AnswerSetCalibration
from ..answer_sets.engine import (
    AnswerSetResult,
    ChunkInput,
    check_synthesizer_calibration,
    chunks_from_metadata,
    query_sampling,
)
from ..answer_sets.options import SamplingOptions, reject_moved_keywords
from ..answer_sets.synthesis import ClusteringEmbedder, asynthesize_answer_set
from .answer_sampler import LlamaIndexSampler, SamplerPrompts, embedder_identity
from .traced_synthesis import TracedSynthesis


def _chunks(nodes: Sequence[NodeWithScore], calibration: AnswerSetCalibration) -> tuple[list[ChunkInput], str]:
    return chunks_from_metadata(
        [(n.node.node_id, n.node.get_content(metadata_mode=MetadataMode.NONE), n.node.metadata) for n in nodes],
        calibration,
    )


class ConformalAnswerSetSynthesizer(TracedSynthesis, SamplerPrompts, BaseSynthesizer):
    """Sample answers per retrieved chunk, cluster them, and keep a calibrated answer set.

    ``Response.response`` is the best-supported answer or "I don't know";
    ``Response.metadata["answer_set"]`` lists every kept answer with its confidence and supporting
    chunk ids, plus ``alpha``, ``abstained``, ``guaranteed`` and token counts. An empty retrieval set
    abstains explicitly, never "Empty Response". Traced like ``BaseSynthesizer`` (span, events,
    ``SYNTHESIZE`` callback); ``streaming=True`` yields the final answer in one piece.

    Every query first checks the LLM (class, name, a local model's file digest), its sampling
    settings, the prompt and, for embedding clustering, ``embed_model`` against the calibration's
    record, raising :class:`~conformal_rag_plugins.core.errors.GeneratorMismatchError` naming each difference.

    Parameters
    ----------
    llm : LlamaIndex LLM
        Base models get a few-shot completion prompt, chat models a chat prompt.
    calibration : AnswerSetCalibration
        End-to-end calibration, e.g. from ``calibrate_answer_sets``.
    sampling : SamplingOptions, optional
        :class:`~conformal_rag_plugins.answer_sets.options.SamplingOptions`; ``n_samples`` must equal
        the calibration's M (default: taken from it); separate keywords raise a ``TypeError``.
    equivalence : str, optional
        Must equal the calibrated clustering method: another rule changes the cluster confidences
        the threshold was calibrated on (calibrate with ``clustering={"method": ...}`` instead).
    embed_model : BaseEmbedding, optional
        Required when the calibration clusters by embedding cosine.
    completion_prompt, chat_prompt : optional
        Replace the default prompts (variables ``{context}``, ``{question}``), as ``update_prompts`` does.
    **kwargs
        ``BaseSynthesizer``'s keywords (``callback_manager``, ``streaming``, ...).

    Examples
    --------
    >>> synth = ConformalAnswerSetSynthesizer(llm=llm, calibration=cal)  # doctest: +SKIP
    >>> RetrieverQueryEngine(retriever, response_synthesizer=synth).query("Who?").metadata  # doctest: +SKIP
    """

    def __init__(
        self,
        llm: BaseLLM,
        calibration: AnswerSetCalibration,
        *,
        sampling: SamplingOptions | None = None,
        equivalence: Any = None,
        embed_model: Any = None,
        completion_prompt: PromptTemplate | None = None,
        chat_prompt: ChatPromptTemplate | None = None,
        **kwargs: Any,
    ) -> None:
        reject_moved_keywords(type(self).__name__, kwargs)
        check_synthesizer_calibration(calibration)
        self.sampling = query_sampling(calibration, sampling)
        super().__init__(llm=llm, **kwargs)
        self.calibration = calibration
        self.equivalence = equivalence
        self.embed_model = embed_model
        self._embedding_identity: list[dict[str, Any] | None] = []  # described once (one probe call)
        self.sampler = LlamaIndexSampler.with_options(
            llm, self.sampling, completion_prompt=completion_prompt, chat_prompt=chat_prompt
        )

    async def _aresult(self, query_str: str, chunks: list[ChunkInput], cut_reason: str = "") -> AnswerSetResult:
        return await asynthesize_answer_set(
            self.calibration, self.sampler, query_str, chunks, cut_reason=cut_reason, equivalence=self.equivalence,
            embedder=ClusteringEmbedder(
                self.embed_model, "get_text_embedding_batch", embedder_identity, self._embedding_identity
            ),
        )  # fmt: skip

    def _response(self, result: AnswerSetResult, nodes: Sequence[NodeWithScore]) -> Response:
        meta = result.to_dict()
        meta["answer_set"] = meta.pop("answers")
        return Response(response=result.response, source_nodes=list(nodes), metadata=meta)

    async def _abuild(
        self, query_str: str, nodes: list[NodeWithScore], additional_source_nodes: list[NodeWithScore]
    ) -> Response:
        chunks, cut_reason = _chunks(nodes, self.calibration)
        result = await self._aresult(query_str, chunks, cut_reason)
        return self._response(result, nodes + additional_source_nodes)

    async def aget_response(self, query_str: str, text_chunks: Sequence[str], **response_kwargs: Any) -> str:
        """Answer from raw text chunks (no retrieval scores: every chunk counts as retrieved, not guaranteed)."""
        chunks = [ChunkInput(f"chunk-{i}", t, 0.0, guaranteed=False) for i, t in enumerate(text_chunks)]
        return (await self._aresult(query_str, chunks, "raw text chunks carry no retrieval scores")).response
