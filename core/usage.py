"""Token usage of model calls."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Usage:
    """Tokens consumed by one or more model calls; `+` sums them.

    Every provider reports the same way: `input_tokens` counts all the input, the part
    read from the provider's prompt cache included; `cached_tokens` (also readable as
    `cached_input_tokens`) is that cached part, `cache_write_tokens` the part written to
    the cache by this call (Anthropic bills it apart), `reasoning_tokens` the part of
    `output_tokens` spent reasoning (OpenAI, Gemini). A count the provider does not
    report is 0.
    """

    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    requests: int = 0
    cache_write_tokens: int = 0
    reasoning_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        """Input plus output tokens."""
        return self.input_tokens + self.output_tokens

    @property
    def cached_input_tokens(self) -> int:
        """The input tokens read from the provider's prompt cache (`cached_tokens`)."""
        return self.cached_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cached_tokens + other.cached_tokens,
            self.requests + other.requests,
            self.cache_write_tokens + other.cache_write_tokens,
            self.reasoning_tokens + other.reasoning_tokens,
        )


__all__ = ["Usage"]
