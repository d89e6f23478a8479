"""What answer-set calibration needs from a framework's host and LLM: a small protocol each adapter implements once.

Each adapter's answer host (``LlamaIndexAnswerHost``, ``LangChainAnswerHost`` in its
``calibrate_answers.py``) implements :class:`AnswerSetHost` with plain methods: its retriever's pools
and chunk texts, its ``calibrate_retriever``, its :class:`~.sampler.AnswerSampler` and its embedding
model's batch call. :class:`~.conformalizer.AnswerSetConformalizer` calls only these methods.

>>> from types import SimpleNamespace
>>> isinstance(SimpleNamespace(), AnswerSetHost)
False
>>> isinstance(SimpleNamespace(prepare_gold=list), GoldPreparingHost)
True
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from ..datasets.examples import CalibrationExample
from ..retrieval.calibration import RetrievalCalibration
from .options import SamplingOptions
from .sample_record import Sample

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
    """A host (retriever or store) and an LLM, seen by answer-set calibration: what an adapter provides.

    ``fetch`` returns a question's scored candidate pool (best first); ``embedding`` is ``None`` for none.
    A host may also be a :class:`GoldPreparingHost` (both adapters' hosts are).
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


@runtime_checkable
class GoldPreparingHost(Protocol):
    """A host that puts document-id gold on its own chunks, by the one gold-id rule, before either stage."""

    def prepare_gold(self, examples: Sequence[CalibrationExample]) -> Sequence[CalibrationExample]:
        """The examples with their gold on the host's chunks (same questions, same digests)."""
        ...
