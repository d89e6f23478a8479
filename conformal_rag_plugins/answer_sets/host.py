"""What answer-set calibration needs from a framework's host and LLM: a small protocol each adapter implements once.

>>> from types import SimpleNamespace
>>> isinstance(SimpleNamespace(), AnswerSetHost)
False
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any, ClassVar, Protocol, runtime_checkable

from ..datasets.examples import CalibrationExample
from ..retrieval.calibration import RetrievalCalibration
from ..retrieval.options import RetrievalOptions
from .options import SamplingOptions
from .sample_record import Sample
from .sampler import AnswerSampler

EmbedFn = Callable[[list[str]], Any]


@dataclass(frozen=True)
class Embedding:
    """A framework embedding model: a batch call and, asked only when clustering by embedding, ``identity()``."""

    embed: EmbedFn
    identity: Callable[[], dict[str, Any] | None]


@runtime_checkable
class GeneratorSampler(Protocol):
    """Draws the answers of one (question, context), with token log-probabilities when the LLM reports them."""

    async def asample(self, question: str, context: str) -> list[Sample]:
        """``n_samples`` answers for ``question`` given ``context``."""
        ...

    def identity(self) -> dict[str, Any] | None:
        """The LLM and sampling part of the generator record (``None``: not described, queries cannot check)."""
        ...

    def model_label(self) -> str:
        """A stable identifier of the LLM (the calibration's ``model_``)."""
        ...


@runtime_checkable
class AnswerSetHost(Protocol):
    """A host (retriever or store) and an LLM, seen by answer-set calibration.

    ``fetch`` returns a question's scored candidate pool (best first); ``embedding`` is ``None`` for none.
    An optional ``prepare_gold(examples)`` (both adapters' hosts have it) puts document-id gold on the
    host's chunks before either stage is calibrated, by the one gold-id rule.
    """

    def fetch(self, question: str) -> Any:
        """The scored candidate pool of ``question``."""
        ...

    def texts_for(self, ids: list[str]) -> dict[str, str]:
        """The text of each chunk id the host knows."""
        ...

    def calibrate_retrieval(
        self, examples: list[CalibrationExample], *, confidence_level: float, score: str, progress: bool
    ) -> RetrievalCalibration:
        """The host's retrieval calibration on ``examples`` (miscoverage control)."""
        ...

    def sampler(self, options: SamplingOptions) -> GeneratorSampler:
        """The LLM's answer sampler with these options."""
        ...

    def embedding(self, embedder: Any) -> Embedding | None:
        """``embedder`` (the framework's embedding model) as a batch call, ``None`` for none."""
        ...


class LLMReader:
    """The framework-neutral half of an adapter's :class:`AnswerSetHost`; the adapter adds ``fetch`` and its hooks.

    >>> from types import SimpleNamespace
    >>> class Reader(LLMReader):
    ...     embed_method = "embed_documents"
    ...     read_texts = staticmethod(lambda host, ids: {i: host[i] for i in ids})
    >>> reader = Reader(llm=None, host={"c1": "Rollo."})
    >>> reader.texts_for(["c1"])
    {'c1': 'Rollo.'}
    >>> got = reader.embedding(SimpleNamespace(embed_documents=lambda texts: [[1.0] for _ in texts]))
    >>> got.embed(["a", "b"])
    [[1.0], [1.0]]
    """

    sampler_class: ClassVar[type[AnswerSampler]]
    """The adapter's :class:`~.sampler.AnswerSampler`."""
    embed_method: ClassVar[str] = "embed_documents"
    """The batch method of the framework's embedding models."""
    read_texts: ClassVar[Callable[[Any, list[str]], dict[str, str]]]
    """The adapter's ``texts_by_id(host, ids)``: the text of each chunk id the host knows."""
    calibrate_host: ClassVar[Callable[..., RetrievalCalibration]]
    """The adapter's ``calibrate_retriever(host, examples, *, confidence_level, pool_size, options)``."""

    def __init__(self, llm: Any, host: Any = None, pool_size: int | None = None) -> None:
        self.llm, self.host, self.pool_size = llm, host, pool_size

    def texts_for(self, ids: list[str]) -> dict[str, str]:
        """The text of each chunk id the host knows (:attr:`read_texts`)."""
        return self.read_texts(self.host, ids)

    def calibrate_retrieval(
        self, examples: list[CalibrationExample], *, confidence_level: float, score: str, progress: bool
    ) -> RetrievalCalibration:
        """The host's calibration on ``examples`` (:attr:`calibrate_host` with ``pool_size``)."""
        return self.calibrate_host(
            self.host, examples, confidence_level=confidence_level, pool_size=self.pool_size,
            options=RetrievalOptions(score=score, progress=progress),
        )  # fmt: skip

    def sampler(self, options: SamplingOptions) -> AnswerSampler:
        """The adapter's sampler of :attr:`llm` with these options."""
        return self.sampler_class.with_options(self.llm, options)

    @staticmethod
    def describe_embedder(embedder: Any) -> dict[str, Any] | None:
        """Name and dimension of an embedding model (:func:`~.identity.embedding_identity`)."""
        return None

    def embedding(self, embedder: Any) -> Embedding | None:
        """``embedder``'s batch call and its lazy description, ``None`` for none."""
        if embedder is None:
            return None
        return Embedding(getattr(embedder, self.embed_method), partial(self.describe_embedder, embedder))
