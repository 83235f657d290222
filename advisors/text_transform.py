"""Stream-safe text rewriting: the same result however the text is cut into deltas.

`TextRewriter` rewrites one text fed in pieces. It decides each step on a window of
`hold_back` characters of text not yet emitted (plus up to `lookbehind` characters before
it, for look-behind assertions), and only once that window is complete (or the text has
ended). Each step thus sees exactly the same window whatever the pieces were, so the
output never depends on how the text was cut, and at most `hold_back - 1` characters of
the text are ever held back. A span found in a step is rewritten when it starts within
the first `hold_back - max_match` characters of the window, so any span of at most
`max_match` characters (look-ahead included) is seen whole.

`TextTransformAdvisor` is the base for advisors that rewrite what the caller receives:
the answer's text, streamed deltas included, and the assistant messages of the response.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, replace
from typing import TypeAlias

from ..core.advisor import Advisor, CallNext, StreamNext
from ..core.events import (
    AnswerDiscarded,
    ResponseCompleted,
    StreamEvent,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
    ToolProgress,
)
from ..core.messages import AssistantMessage, Message
from ..core.parts import ReasoningPart, TextPart, map_text
from ..core.request import ChatRequest
from ..core.response import ChatResponse
from ..core.streams import closing_stream


@dataclass(frozen=True, slots=True)
class Span:
    """A part of a text to rewrite: `text[start:end]`; `label` tells `replace` what it is."""

    start: int
    end: int
    label: str = ""


Finder: TypeAlias = Callable[[str, int], Span | None]
"""`find(text, start)`: the leftmost span to rewrite that starts at or after `start`.

It must depend only on its arguments (the rewriter relies on it to be chunking-independent)
and return a non-empty span within `text`, or `None`. `text[:start]` is context that was
already emitted, for look-behind; do not rewrite it."""

Replacer: TypeAlias = Callable[[str, Span], str]
"""`replace(value, span)`: what the span's text `value` becomes (it may raise to refuse)."""


class TextRewriter:
    """Rewrites one text fed in pieces (`feed`, then `finish`), or whole (`rewrite`).

    `feed(piece)` returns the rewritten text that became final; `finish()` returns the
    rest and makes the rewriter ready for another text. The concatenation of what they
    return equals `rewrite(whole text)` for every way of cutting the text, and after each
    `feed` at most `hold_back - 1` characters are held back (`pending`). Cost: each
    character is searched about `hold_back / (hold_back - max_match)` times, so rewriting
    is linear in the text's length when `find` is linear in its window.
    """

    __slots__ = ("_buffer", "_find", "_hold_back", "_lookbehind", "_max_match", "_pos", "_replace")

    def __init__(
        self,
        find: Finder,
        replace: Replacer,
        *,
        hold_back: int = 256,
        max_match: int = 192,
        lookbehind: int = 32,
    ) -> None:
        if not 1 <= max_match < hold_back:
            raise ValueError(
                f"need 1 <= max_match < hold_back, got max_match={max_match}, hold_back={hold_back}"
            )
        if lookbehind < 0:
            raise ValueError("lookbehind must be at least 0")
        self._find = find
        self._replace = replace
        self._hold_back = hold_back
        self._max_match = max_match
        self._lookbehind = lookbehind
        self._buffer = ""  # context (already emitted) + pending text
        self._pos = 0  # where the pending text starts in _buffer

    @property
    def pending(self) -> int:
        """How many characters fed so far are held back (not yet returned)."""
        return len(self._buffer) - self._pos

    def feed(self, text: str) -> str:
        """Add the next piece of the text; the rewritten text that became final."""
        if not text:
            return ""
        self._buffer += text
        out: list[str] = []
        while len(self._buffer) - self._pos >= self._hold_back:
            out.append(self._step())
        cut = self._pos - self._lookbehind
        if cut > 0:
            self._buffer = self._buffer[cut:]
            self._pos -= cut
        return "".join(out)

    def finish(self) -> str:
        """The text ended: the rest, rewritten. The rewriter is then ready for a new text."""
        out: list[str] = []
        while self._pos < len(self._buffer):
            out.append(self._step())
        self._buffer = ""
        self._pos = 0
        return "".join(out)

    def rewrite(self, text: str) -> str:
        """Rewrite a whole text (the rewriter must hold nothing, and holds nothing after)."""
        if self._buffer:
            raise RuntimeError("rewrite() on a TextRewriter that is in the middle of a text")
        return self.feed(text) + self.finish()

    def _step(self) -> str:
        """Decide the next part of the pending text, from one window; return its output.

        The window is `lookbehind` characters of context (fewer at the text's start) and
        `hold_back` pending characters, or the rest of a text that has ended: the same for
        every chunking, since a window is only used once it is complete.
        """
        buffer = self._buffer
        pos = self._pos
        begin = max(0, pos - self._lookbehind)
        end = min(len(buffer), pos + self._hold_back)
        window = buffer[begin:end]
        start = pos - begin
        last = end == len(buffer) and end - pos < self._hold_back  # the text has ended
        limit = start + self._hold_back - self._max_match
        span = self._find(window, start)
        if span is not None:
            if not start <= span.start < span.end <= len(window):
                raise ValueError(
                    f"find() returned {span!r}: not a non-empty span within the window "
                    f"after position {start} (length {len(window)})"
                )
            if last or span.start <= limit:
                value = window[span.start : span.end]
                self._pos = begin + span.end
                return window[start : span.start] + self._replace(value, span)
            cut = min(span.start, limit + 1)
        else:
            cut = len(window) if last else limit + 1
        self._pos = begin + cut
        return window[start:cut]


_SEGMENT_ENDS = (ToolCallStarted, ToolCallFinished, ResponseCompleted)
"""Events after which a model call's text is complete (a tool round, or the response)."""


class TextTransformAdvisor(Advisor):
    """Base for advisors that rewrite the text the caller receives, on both paths.

    Subclasses implement `find` (the next span to rewrite) and `replace` (what it
    becomes); optionally `rewrite_request` (what the model receives), `rewrite_progress`
    (the text of running tools' progress) and `rewrite_exception` (what an exception that
    passes through carries). Control flow, on `call` and `stream` alike: calls `next`
    once with `rewrite_request(request)`, never short-circuits; an exception from `next`
    is passed to `rewrite_exception` and raised again. `call` rewrites the response
    (`rewrite_response`): the text of its `message` and of every assistant message in
    `messages`, each on its own, so memory outside this link stores the rewritten answer.
    `stream` passes every event on except `TextDelta`s, which go through a `TextRewriter`:
    text is held back (at most `hold_back - 1` characters) so that a span cut across
    deltas is still found, and flushed when the model call's text ends (at
    `ToolCallStarted`, `ToolCallFinished` and `ResponseCompleted`, whose response is
    rewritten like `call`'s); other events (tool-call fragments) pass on at once, ahead of
    held-back text. Hence the deltas of each model call concatenate to that call's
    rewritten message text, for any chunking, and equal what `call` returns for the same
    model output. With `rewrites_progress`, `ToolProgress` events are rewritten too: their
    `message`, and the events a chain called as a tool forwards (its text deltas through
    a `TextRewriter` of their own per call, flushed when that call's text ends or the call
    finishes; its tool calls' arguments, tool results and discarded-answer reasons with
    `rewrite_progress`), and so is an `AnswerDiscarded`'s reason (held-back text is
    flushed before it).

    Placed before the tool loop, the link sees the whole turn (each round's text is one
    segment); after it, each model call. Tool-call arguments are never rewritten.
    """

    hold_back: int = 256
    """Most characters of streamed text held back at any time (plus one)."""
    max_match: int = 192
    """Longest span (look-ahead included) that is sure to be seen whole."""
    lookbehind: int = 32
    """Characters before the pending text that `find` sees as context."""

    def find(self, text: str, start: int) -> Span | None:
        """The leftmost span of `text` to rewrite starting at or after `start`, or `None`.

        Must depend on its arguments only; see `Finder`.
        """
        raise NotImplementedError(f"{type(self).__name__} must implement find()")

    def replace(self, value: str, span: Span) -> str:
        """The text that replaces `value` (the text of `span`)."""
        raise NotImplementedError(f"{type(self).__name__} must implement replace()")

    @property
    def rewrites_answer(self) -> bool:
        """Whether the answer is rewritten at all (if not, deltas pass with no hold-back)."""
        return True

    @property
    def rewrites_progress(self) -> bool:
        """Whether `ToolProgress` events are rewritten (default: no)."""
        return False

    def rewriter(self) -> TextRewriter:
        """A fresh `TextRewriter` for the answer's text."""
        return TextRewriter(
            self.find,
            self.replace,
            hold_back=self.hold_back,
            max_match=self.max_match,
            lookbehind=self.lookbehind,
        )

    def progress_rewriter(self) -> TextRewriter:
        """A fresh `TextRewriter` for the text a chain called as a tool streams
        (default: the answer's)."""
        return self.rewriter()

    def rewrite_text(self, text: str) -> str:
        """The answer text `text` rewritten, as the stream would deliver it."""
        return self.rewriter().rewrite(text)

    def rewrite_progress(self, text: str) -> str:
        """A progress message (or a forwarded tool result) as the caller may see it."""
        return self.progress_rewriter().rewrite(text)

    def rewrite_exception(self, exc: Exception) -> None:
        """Rewrite in place what `exc` carries for the caller (default: nothing); it is
        raised again after."""

    def rewrite_request(self, request: ChatRequest) -> ChatRequest:
        """What the rest of the chain receives instead of `request` (default: itself)."""
        return request

    def rewrite_response(self, response: ChatResponse) -> ChatResponse:
        """`response` with the text of `message` and of every assistant message rewritten."""
        if not self.rewrites_answer:
            return response
        done: dict[int, Message] = {}

        def rewritten(message: Message) -> Message:
            if not isinstance(message, AssistantMessage) or not message.content:
                return message
            new = done.get(id(message))
            if new is None:
                content = map_text(message.content, self.rewrite_text)
                new = message if content is message.content else _with_content(message, content)
                done[id(message)] = new
            return new

        return replace(response, messages=tuple(rewritten(m) for m in response.messages))

    async def call(self, request: ChatRequest, next: CallNext) -> ChatResponse:
        """Rewrite the request, call the rest of the chain once, rewrite its response."""
        try:
            response = await next(self.rewrite_request(request))
        except Exception as exc:
            self.rewrite_exception(exc)
            raise
        return self.rewrite_response(response)

    async def stream(self, request: ChatRequest, next: StreamNext) -> AsyncIterator[StreamEvent]:
        """`call` as a stream: text deltas held back and rewritten, the rest passed on."""
        try:
            upstream = next(self.rewrite_request(request))
            if not self.rewrites_answer and not self.rewrites_progress:
                async with closing_stream(upstream) as events:
                    async for event in events:
                        yield event
                return
            rewriter = self.rewriter() if self.rewrites_answer else None
            progress = _ProgressText(self) if self.rewrites_progress else None
            async with closing_stream(upstream) as events:
                async for event in events:
                    if isinstance(event, TextDelta) and rewriter is not None:
                        text = rewriter.feed(event.text)
                        if text:
                            yield TextDelta(text)
                        continue
                    if isinstance(event, ToolProgress) and progress is not None:
                        for rewritten in progress.rewrite(event, ()):
                            yield rewritten
                        continue
                    if isinstance(event, AnswerDiscarded):  # the attempt's text goes first
                        rest = rewriter.finish() if rewriter is not None else ""
                        if rest:
                            yield TextDelta(rest)
                        if progress is not None:
                            event = replace(event, reason=self.rewrite_progress(event.reason))
                    if isinstance(event, _SEGMENT_ENDS):
                        rest = rewriter.finish() if rewriter is not None else ""
                        if rest:
                            yield TextDelta(rest)
                        if progress is not None:
                            ended = () if isinstance(event, ResponseCompleted) else (event.call.id,)
                            for flushed in progress.flush(ended):
                                yield flushed
                        if isinstance(event, ResponseCompleted):
                            event = ResponseCompleted(self.rewrite_response(event.response))
                    yield event
        except Exception as exc:
            self.rewrite_exception(exc)
            raise


class _ProgressText:
    """The `ToolProgress` events of one stream, rewritten: a `TextRewriter` per nested
    call path (the ids of the calls that wrap a forwarded text delta, outermost first)."""

    __slots__ = ("_advisor", "_open")

    def __init__(self, advisor: TextTransformAdvisor) -> None:
        self._advisor = advisor
        self._open: dict[tuple[str, ...], TextRewriter] = {}

    def rewrite(self, event: StreamEvent, path: tuple[str, ...]) -> list[StreamEvent]:
        """What `event`, forwarded at `path` (`()`: this stream's own), becomes."""
        advisor = self._advisor
        if isinstance(event, ToolProgress):
            inner = path + (event.call_id,)
            message = None if event.message is None else advisor.rewrite_progress(event.message)
            if event.event is None:
                return [replace(event, message=message)]
            nested = self.rewrite(event.event, inner)
            if not nested:
                if message is None and event.progress is None and event.total is None:
                    return []
                return [replace(event, message=message, event=None)]
            first = replace(event, message=message, event=nested[0])
            return [first, *(ToolProgress(event.call_id, event=e) for e in nested[1:])]
        if not path:
            return [event]
        if isinstance(event, TextDelta):
            rewriter = self._open.get(path)
            if rewriter is None:
                rewriter = self._open[path] = advisor.progress_rewriter()
            text = rewriter.feed(event.text)
            return [TextDelta(text)] if text else []
        if isinstance(event, (*_SEGMENT_ENDS, AnswerDiscarded)):
            out = self._flush_at(path)
            if isinstance(event, (ToolCallStarted, ToolCallFinished)):
                out += self._unwrap(self.flush(path + (event.call.id,)), len(path))
            if isinstance(event, (ToolCallStarted, ToolCallFinished)):
                # display copies of the nested chain's calls: its model may have put what
                # its own tools returned, unredacted, into the arguments
                arguments = advisor.rewrite_progress(event.call.arguments)
                if arguments != event.call.arguments:
                    call = event.call.model_copy(update={"arguments": arguments})
                    event = replace(event, call=call)
            if isinstance(event, ToolCallFinished):
                content = map_text(event.result.content, advisor.rewrite_progress)
                if content is not event.result.content:
                    result = event.result.model_copy(update={"content": content})
                    event = replace(event, result=result)
            elif isinstance(event, AnswerDiscarded):
                event = replace(event, reason=advisor.rewrite_progress(event.reason))
            elif isinstance(event, ResponseCompleted):
                event = ResponseCompleted(advisor.rewrite_response(event.response))
            out.append(event)
            return out
        return [event]

    def flush(self, prefix: tuple[str, ...]) -> list[StreamEvent]:
        """The text held back for every path under `prefix`, as events of this stream."""
        out: list[StreamEvent] = []
        for path in [p for p in self._open if p[: len(prefix)] == prefix]:
            rest = self._open.pop(path).finish()
            if rest:
                event: StreamEvent = TextDelta(rest)
                for call_id in reversed(path):
                    event = ToolProgress(call_id, event=event)
                out.append(event)
        return out

    def _flush_at(self, path: tuple[str, ...]) -> list[StreamEvent]:
        rewriter = self._open.pop(path, None)
        rest = "" if rewriter is None else rewriter.finish()
        return [TextDelta(rest)] if rest else []

    @staticmethod
    def _unwrap(events: list[StreamEvent], depth: int) -> list[StreamEvent]:
        """`events` of this stream as seen `depth` calls down (their outer wrappers off)."""
        out: list[StreamEvent] = []
        for event in events:
            for _ in range(depth):
                assert isinstance(event, ToolProgress) and event.event is not None
                event = event.event
            out.append(event)
        return out


def _with_content(
    message: AssistantMessage, content: str | tuple[TextPart | ReasoningPart, ...] | None
) -> AssistantMessage:
    return message.model_copy(update={"content": content or None})


__all__ = ["Finder", "Replacer", "Span", "TextRewriter", "TextTransformAdvisor"]
