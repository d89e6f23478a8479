"""Framework-neutral pieces of answer sampling: prompts, samples, the on-disk sample cache, retries."""

from __future__ import annotations

from ..runtime.retry import call_with_retries
from .cache import SampleCache
from .prompts import CHAT_SYSTEM_PROMPT, CHAT_USER_TEMPLATE, FEW_SHOT_TEMPLATE
from .sample_record import Sample, mean_logprob, reports_logprobs

__all__ = [
    "CHAT_SYSTEM_PROMPT",
    "CHAT_USER_TEMPLATE",
    "FEW_SHOT_TEMPLATE",
    "Sample",
    "SampleCache",
    "call_with_retries",
    "mean_logprob",
    "reports_logprobs",
]
