"""Terminal output of the demo: the answer as it streams, one line per tool call, totals."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import TextIO

from ..advisors.small_model import format_call
from ..core._streams import closing_stream
from ..core.events import ResponseCompleted, StreamEvent, TextDelta, ToolCallFinished
from ..core.response import ChatResponse
from ..core.usage import Usage


@dataclass(frozen=True, slots=True)
class TurnStats:
    """What one turn cost."""

    question: str
    usage: Usage
    seconds: float
    tool_calls: int
    finish_reason: str


class TerminalRenderer:
    """Writes a turn's events to `out` as they arrive."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self._at_line_start = True

    def line(self, text: str = "") -> None:
        """Print a full line (after ending a streamed line, if one is open)."""
        if not self._at_line_start:
            self.out.write("\n")
        self.out.write(text + "\n")
        self.out.flush()
        self._at_line_start = True

    async def turn(
        self, question: str, events: AsyncIterator[StreamEvent]
    ) -> tuple[ChatResponse, TurnStats]:
        """Render one turn's stream; returns its response and its cost."""
        self.line(f"you> {question}")
        started = time.perf_counter()
        response: ChatResponse | None = None
        calls = 0
        prefix = True  # "assistant> " is written before the next text
        async with closing_stream(events) as stream:
            async for event in stream:
                if isinstance(event, TextDelta):
                    text = event.text.lstrip() if prefix else event.text
                    if text:
                        self.out.write(f"assistant> {text}" if prefix else text)
                        self.out.flush()
                        self._at_line_start = prefix = False
                elif isinstance(event, ToolCallFinished):
                    calls += 1
                    millis = event.duration * 1000
                    self.line(f"  -> {format_call(event.call)}  {event.outcome}  {millis:.1f} ms")
                    prefix = True
                elif isinstance(event, ResponseCompleted):
                    response = event.response
        self.line()
        assert response is not None  # Chain.stream guarantees the final event
        stats = TurnStats(
            question=question,
            usage=response.usage,
            seconds=time.perf_counter() - started,
            tool_calls=calls,
            finish_reason=str(response.finish_reason),
        )
        return response, stats

    def summary(self, turns: Sequence[TurnStats]) -> None:
        """A table of tokens, model calls, tool calls and time per turn, and the totals."""
        self.line("turn  tokens in  tokens out  model calls  tool calls   seconds  question")
        total = Usage()
        seconds = 0.0
        for number, t in enumerate(turns, start=1):
            total += t.usage
            seconds += t.seconds
            self.line(
                f"{number:>4}  {t.usage.input_tokens:>9}  {t.usage.output_tokens:>10}  "
                f"{t.usage.requests:>11}  {t.tool_calls:>10}  {t.seconds:>8.2f}  {t.question[:40]}"
            )
        self.line(
            f" all  {total.input_tokens:>9}  {total.output_tokens:>10}  {total.requests:>11}  "
            f"{sum(t.tool_calls for t in turns):>10}  {seconds:>8.2f}"
        )
