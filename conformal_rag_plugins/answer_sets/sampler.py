"""What every answer sampler does, whatever the framework: cache key, concurrency, retries."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any

from ..runtime.native_models import one_at_a_time
from .concurrent_draws import ConcurrencyLimit, draw_samples
from .identity import SAMPLING_ATTRS, json_settings, prompt_digest
from .options import SamplingOptions
from .sample_cache import SampleCache
from .sample_record import Sample, reports_logprobs

NAME_ATTRS = ("model", "model_path", "model_name")


def model_name(model: Any, name_attrs: Sequence[str] = NAME_ATTRS) -> str | None:
    """The first of ``name_attrs`` that is set on an LLM client (``None`` when none is).

    >>> from types import SimpleNamespace
    >>> model_name(SimpleNamespace(model_path="/models/gemma.gguf"))
    '/models/gemma.gguf'
    """
    value = next((v for v in (getattr(model, a, None) for a in name_attrs) if v), None)
    return None if value is None else str(value)


def model_id(model: Any, name_attrs: Sequence[str] = NAME_ATTRS) -> str:
    """A stable id of an LLM client for cache keys and records: class, name, ``+logprobs`` if it reports them.

    ``+logprobs`` keeps samples with a likelihood from sharing cache entries with those without.

    >>> from types import SimpleNamespace
    >>> model_id(SimpleNamespace(model="gemma", logprobs=True))
    'SimpleNamespace:gemma+logprobs'
    """
    name = next((v for v in (getattr(model, a, None) for a in name_attrs) if v), None)
    return f"{type(model).__name__}:{name}" + ("+logprobs" if reports_logprobs(model) else "")


class AnswerSampler(ABC):
    """Draw ``n_samples`` answers per (question, context), concurrently, with retries and a cache.

    A call that still fails after retries becomes an empty (abstaining) sample. Subclasses implement
    :meth:`_call` and :meth:`_prompt_text`, set the default prompts, and may override the hooks
    :meth:`identity` reports.
    """

    name_attrs: tuple[str, ...] = NAME_ATTRS
    """Attributes naming the model, in order (the first that is set)."""
    kwargs_attrs: tuple[str, ...] = ("generate_kwargs", "additional_kwargs")
    """Attributes of the client holding keyword arguments passed to every call (recorded with the settings)."""
    default_completion_prompt: Any = None
    """The few-shot prompt for base (completion) models when none is given."""
    default_chat_prompt: Any = None
    """The prompt for chat models when none is given."""

    def __init__(
        self,
        model: Any,
        *,
        n_samples: int = 10,
        completion_prompt: Any = None,
        chat_prompt: Any = None,
        max_concurrency: int = 4,
        timeout: float | None = 120.0,
        retries: int = 2,
        cache: SampleCache | None = None,
    ) -> None:
        if n_samples < 1:
            raise ValueError(f"n_samples must be >= 1, got {n_samples}.")
        self.model = model
        self.n_samples = n_samples
        self.completion_prompt = completion_prompt or self.default_completion_prompt
        self.chat_prompt = chat_prompt or self.default_chat_prompt
        self.max_concurrency = max_concurrency
        self.timeout = timeout
        self.retries = retries
        self.cache = cache
        self._limit = ConcurrencyLimit(max_concurrency)

    @classmethod
    def with_options(
        cls,
        model: Any,
        options: SamplingOptions,
        *,
        n_samples: int | None = None,
        completion_prompt: Any = None,
        chat_prompt: Any = None,
    ) -> AnswerSampler:
        """A sampler of ``model`` with the sampling options (``n_samples`` overrides the options' M).

        >>> from types import SimpleNamespace
        >>> class Echo(AnswerSampler):
        ...     async def _call(self, question, context, config=None): return Sample(context)
        ...     def _prompt_text(self): return ""
        >>> Echo.with_options(SimpleNamespace(), SamplingOptions(n_samples=3, max_concurrency=1)).n_samples
        3
        """
        return cls(
            model,
            n_samples=options.n_samples if n_samples is None else n_samples,
            completion_prompt=completion_prompt,
            chat_prompt=chat_prompt,
            max_concurrency=options.max_concurrency,
            timeout=options.timeout,
            retries=options.retries,
            cache=options.cache,
        )

    def model_label(self) -> str:
        """A stable identifier of the LLM for cache keys and the calibration's ``model_``."""
        return self._model_id()

    @abstractmethod
    async def _call(self, question: str, context: str, config: Any = None) -> Sample:
        """One answer from the model; ``config`` is the framework's run config (callbacks, tags), if any."""

    @abstractmethod
    def _prompt_text(self) -> str:
        """The prompt in use, as text (part of the cache key)."""

    def _model_id(self) -> str:
        return model_id(self.model, self.name_attrs)

    def _llm_identity(self) -> dict[str, Any]:
        """Class, name and whether the client reports logprobs (adapters add what identifies a local model)."""
        return {
            "class": type(self.model).__name__,
            "name": model_name(self.model, self.name_attrs) or "unknown",
            "logprobs": reports_logprobs(self.model),
        }

    def _sampling_settings(self) -> dict[str, Any]:
        """The client's sampling settings (:func:`~.identity.json_settings`)."""
        return json_settings(self.model, SAMPLING_ATTRS, self.kwargs_attrs)

    def _prompt_kind(self) -> str:
        """``"chat"`` or ``"completion"``: which of the two prompts is in use."""
        return "completion"

    def identity(self) -> dict[str, Any]:
        """The LLM and sampling part of a generator record (:func:`~.identity.generator_record`).

        >>> from types import SimpleNamespace
        >>> class Echo(AnswerSampler):
        ...     async def _call(self, question, context, config=None): return Sample(context)
        ...     def _prompt_text(self): return "Q: {question}"
        >>> llm = SimpleNamespace(model="m", temperature=0.7)
        >>> got = Echo(llm, n_samples=3, completion_prompt=None, chat_prompt=None).identity()
        >>> got["llm"], got["sampling"]["temperature"], got["sampling"]["n_samples"]
        ({'class': 'SimpleNamespace', 'name': 'm', 'logprobs': False}, 0.7, 3)
        """
        return {
            "llm": self._llm_identity(),
            "sampling": {
                **self._sampling_settings(),
                "n_samples": self.n_samples,
                "prompt": self._prompt_kind(),
                "prompt_sha256": prompt_digest(self._prompt_text()),
            },
        }

    async def asample(self, question: str, context: str, *, config: Any = None) -> list[Sample]:
        """``n_samples`` answers, from the cache when present.

        ``config`` (e.g. LangChain's ``RunnableConfig``, so LLM runs nest under the caller's) goes to
        every model call and is not part of the cache key.
        """
        key = SampleCache.key(
            question,
            context,
            self._model_id(),
            self._prompt_text(),
            getattr(self.model, "temperature", None),
            self.n_samples,
        )
        return await draw_samples(
            lambda: one_at_a_time(self.model, lambda: self._call(question, context, config)),
            n=self.n_samples,
            max_concurrency=self.max_concurrency,
            retries=self.retries,
            timeout=self.timeout,
            cache=self.cache,
            key=key,
            limit=self._limit,
        )
