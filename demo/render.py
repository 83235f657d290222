"""Terminal output of the demo: the answer as it streams, one line per tool call, totals.

On a terminal, a status line says what the turn is doing while no answer is shown yet
(`... reading your question`, `... calling get_order_status`, `... reading the results`);
it is erased before anything else is written, so it never mixes with the answer, a tool
line, an approval prompt or a log record. Off a terminal (a pipe, a file) it is not shown.
"""

from __future__ import annotations

import io
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import TextIO, cast

from ..advisors.small_model import format_call
from ..core.events import (
    ResponseCompleted,
    StreamEvent,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
)
from ..core.response import ChatResponse
from ..core.streams import closing_stream
from ..core.usage import Usage


@dataclass(frozen=True, slots=True)
class TurnStats:
    """What one turn cost."""

    question: str
    usage: Usage
    seconds: float
    tool_calls: int
    finish_reason: str


STATUS_CLEAR = "\r\x1b[2K"
"""Carriage return and erase line: how the status line is taken away."""


class TerminalRenderer:
    """Writes a turn's events to `out` as they arrive.

    `status` shows the status line (default: when `out` is a terminal). `err` receives
    log records (`log_line`), each on a line of its own: an answer line still open on
    `out` is ended first, so on a terminal the two never share a line.
    """

    def __init__(
        self, out: TextIO, *, status: bool | None = None, err: TextIO | None = None
    ) -> None:
        self.out = out
        self.err = err if err is not None else out
        self.status = _is_tty(out) if status is None else status
        self._at_line_start = True
        self._status_shown = False

    def line(self, text: str = "") -> None:
        """Print a full line (after ending a streamed line, if one is open)."""
        self.clear_status()
        if not self._at_line_start:
            self.out.write("\n")
        self.out.write(text + "\n")
        self.out.flush()
        self._at_line_start = True

    def log_line(self, text: str) -> None:
        """Print a log record on a line of its own, on `err`."""
        self.clear_status()
        if not self._at_line_start:
            self.out.write("\n")
            self.out.flush()
            self._at_line_start = True
        self.err.write(text + "\n")
        self.err.flush()

    def show_status(self, text: str) -> None:
        """Show `text` as the status line (on a terminal, at the start of a line only)."""
        if not self.status or not self._at_line_start:
            return
        self.out.write(f"{STATUS_CLEAR}\x1b[2m... {text}\x1b[0m")
        self.out.flush()
        self._status_shown = True

    def clear_status(self) -> None:
        """Erase the status line, if one is shown."""
        if self._status_shown:
            self.out.write(STATUS_CLEAR)
            self.out.flush()
            self._status_shown = False

    def writer(self) -> TextIO:
        """A stream for others who write on `out` (the approver's prompt): every write
        erases the status line first and leaves the cursor where the text ended."""
        return cast(TextIO, _RendererStream(self))

    async def turn(
        self, question: str, events: AsyncIterator[StreamEvent], *, echo: bool = True
    ) -> tuple[ChatResponse, TurnStats]:
        """Render one turn's stream; returns its response and its cost. `echo=False` when
        the question is on the screen already (typed at the `you>` prompt)."""
        if echo:
            self.line(f"you> {question}")
        started = time.perf_counter()
        response: ChatResponse | None = None
        calls = 0
        prefix = True  # "assistant> " is written before the next text
        self.show_status("reading your question")
        async with closing_stream(events) as stream:
            async for event in stream:
                if isinstance(event, TextDelta):
                    text = event.text.lstrip() if prefix else event.text
                    if text:
                        self.clear_status()
                        self.out.write(f"assistant> {text}" if prefix else text)
                        self.out.flush()
                        self._at_line_start = prefix = False
                elif isinstance(event, ToolCallStarted):
                    self.show_status(f"calling {event.call.name}")
                elif isinstance(event, ToolCallFinished):
                    calls += 1
                    millis = event.duration * 1000
                    self.line(f"  -> {format_call(event.call)}  {event.outcome}  {millis:.1f} ms")
                    prefix = True
                    self.show_status("reading the results")
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


class _RendererStream(io.TextIOBase):
    """`TerminalRenderer.writer()`: writes to the renderer's `out`, status line erased."""

    def __init__(self, renderer: TerminalRenderer) -> None:
        super().__init__()
        self._renderer = renderer

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        renderer = self._renderer
        renderer.clear_status()
        if text:
            renderer.out.write(text)
            renderer._at_line_start = text.endswith("\n")
        return len(text)

    def flush(self) -> None:
        self._renderer.out.flush()

    def isatty(self) -> bool:
        return _is_tty(self._renderer.out)


def _is_tty(stream: TextIO) -> bool:
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty()) if isatty is not None else False
    except (OSError, ValueError):
        return False


__all__ = ["TerminalRenderer", "TurnStats"]
