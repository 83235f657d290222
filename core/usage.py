"""Token usage of model calls."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Usage:
    """Tokens consumed by one or more model calls; `+` sums them.

    `cached_tokens` are the input tokens the provider read from its prompt cache (part of
    `input_tokens`); `reasoning_tokens` the output tokens spent on reasoning (part of
    `output_tokens`), where the provider reports them.
    """

    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    requests: int = 0
    reasoning_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        """Input plus output tokens."""
        return self.input_tokens + self.output_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cached_tokens + other.cached_tokens,
            self.requests + other.requests,
            self.reasoning_tokens + other.reasoning_tokens,
        )
