"""Compaction: long conversations in a bounded context (`CompactionAdvisor`), the
transcript rules it keeps (`transcript`) and provider-native context management
(`NativeCompaction`). See docs/compaction.md."""

from ..memory.store import CompactionBoundary, CompactionBoundaryStore
from .advisor import (
    ClearToolResults,
    CompactionAdvisor,
    CompactionError,
    Keep,
    Trigger,
)
from .native import NativeCompaction
from .transcript import INTERRUPTED, estimate_tokens, repair, waiting_calls

__all__ = [
    "INTERRUPTED",
    "ClearToolResults",
    "CompactionAdvisor",
    "CompactionBoundary",
    "CompactionBoundaryStore",
    "CompactionError",
    "Keep",
    "NativeCompaction",
    "Trigger",
    "estimate_tokens",
    "repair",
    "waiting_calls",
]
