"""Small runtime pieces every layer may use: paths, retries, run-sync, caches, LLM JSON, atomic writes, OpenAI settings.

It imports nothing else from the library, so every layer can depend on it without cycles.
"""

from __future__ import annotations

from .atomic import atomic_path, atomic_write_text, check_output_dir, check_output_file
from .json_output import iter_balanced_objects, parse_json_object
from .kv_cache import JsonCache, default_cache_path, open_cache
from .openai_settings import completion_mode, openai_settings
from .paths import default_cache_dir
from .retry import call_with_retries
from .run_sync import run_sync

__all__ = [
    "JsonCache",
    "atomic_path",
    "atomic_write_text",
    "call_with_retries",
    "check_output_dir",
    "check_output_file",
    "completion_mode",
    "default_cache_dir",
    "default_cache_path",
    "iter_balanced_objects",
    "open_cache",
    "openai_settings",
    "parse_json_object",
    "run_sync",
]
