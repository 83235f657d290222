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

from ..core._streams import closing_stream
from ..core.advisor import Advisor, CallNext, StreamNext
from ..core.events import (
    ResponseCompleted,
    StreamEvent,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
)
from ..core.messages import AssistantMessage, Message
from ..core.parts import ReasoningPart, TextPart, map_text
from ..core.request import ChatRequest
from ..core.response import ChatResponse


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
    becomes); optionally `rewrite_request` (what the model receives). Control flow, on
    `call` and `stream` alike: calls `next` once with `rewrite_request(request)`, never
    short-circuits. `call` rewrites the response (`rewrite_response`): the text of its
    `message` and of every assistant message in `messages`, each on its own, so memory
    outside this link stores the rewritten answer. `stream` passes every event on except
    `TextDelta`s, which go through a `TextRewriter`: text is held back (at most
    `hold_back - 1` characters) so that a span cut across deltas is still found, and
    flushed when the model call's text ends (at `ToolCallStarted`, `ToolCallFinished` and
    `ResponseCompleted`, whose response is rewritten like `call`'s); other events (tool-call
    fragments) pass on at once, ahead of held-back text. Hence the deltas of each model
    call concatenate to that call's rewritten message text, for any chunking, and equal
    what `call` returns for the same model output.

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

    def rewriter(self) -> TextRewriter:
        """A fresh `TextRewriter` for the answer's text."""
        return TextRewriter(
            self.find,
            self.replace,
            hold_back=self.hold_back,
            max_match=self.max_match,
            lookbehind=self.lookbehind,
        )

    def rewrite_text(self, text: str) -> str:
        """The answer text `text` rewritten, as the stream would deliver it."""
        return self.rewriter().rewrite(text)

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
        response = await next(self.rewrite_request(request))
        return self.rewrite_response(response)

    async def stream(self, request: ChatRequest, next: StreamNext) -> AsyncIterator[StreamEvent]:
        """`call` as a stream: text deltas held back and rewritten, the rest passed on."""
        upstream = next(self.rewrite_request(request))
        if not self.rewrites_answer:
            async with closing_stream(upstream) as events:
                async for event in events:
                    yield event
            return
        rewriter = self.rewriter()
        async with closing_stream(upstream) as events:
            async for event in events:
                if isinstance(event, TextDelta):
                    text = rewriter.feed(event.text)
                    if text:
                        yield TextDelta(text)
                    continue
                if isinstance(event, _SEGMENT_ENDS):
                    rest = rewriter.finish()
                    if rest:
                        yield TextDelta(rest)
                    if isinstance(event, ResponseCompleted):
                        event = ResponseCompleted(self.rewrite_response(event.response))
                yield event


def _with_content(
    message: AssistantMessage, content: str | tuple[TextPart | ReasoningPart, ...] | None
) -> AssistantMessage:
    return message.model_copy(update={"content": content or None})
