"""Server-sent events: an incremental parser fed with raw network chunks.

Follows the WHATWG event-stream rules: lines end with CRLF, LF or CR (a CR at the end of
one chunk and an LF at the start of the next are one line ending); `data` lines are
joined with newlines; a blank line dispatches the event; lines starting with `:` are
comments; an event left without its blank line when the stream ends is discarded.
Bytes are decoded incrementally, so a multi-byte UTF-8 character split across chunks
survives; invalid UTF-8 becomes U+FFFD, as the standard says.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import AsyncIterable, AsyncIterator
from dataclasses import dataclass
from typing import TypeAlias

from ..core.errors import StreamInterruptedError

MAX_EVENT_SIZE = 16 * 1024 * 1024
"""Default bound, in characters, of one line or one event's data (`SSEDecoder`)."""

EventFields: TypeAlias = tuple[str, str, str | None, int | None]
"""One event's `(event, data, id, retry)`: a `ServerSentEvent`'s fields (`feed_fields`)."""

_LINE_END = re.compile(r"\r\n|\r|\n")
_MAX_RETRY_DIGITS = 10


@dataclass(frozen=True, slots=True)
class ServerSentEvent:
    """One dispatched event: its type (`message` unless named), data, and last event id."""

    event: str = "message"
    data: str = ""
    id: str | None = None
    retry: int | None = None


class SSEDecoder:
    """Turns chunks of bytes into `ServerSentEvent`s; feed it chunks as they arrive.

    A line, or an event's data, longer than `max_event_size` characters raises
    `StreamInterruptedError` as soon as it is that long, so a stream that never ends its
    line cannot take unbounded memory. Each chunk is parsed in time linear in its size.
    """

    __slots__ = (
        "_data",
        "_data_size",
        "_undecoded",
        "_event",
        "_last_id",
        "_line",
        "_line_size",
        "_retry",
        "_skip_lf",
        "_start",
        "max_event_size",
    )

    def __init__(self, *, max_event_size: int = MAX_EVENT_SIZE) -> None:
        self.max_event_size = max_event_size
        self._line_size = 0  # characters in `_line`
        self._data_size = 0  # characters in `_data`
        self._undecoded = b""  # the start of a UTF-8 character cut off by a chunk's end
        self._line: list[str] = []  # pieces of the current, unfinished line
        self._skip_lf = False  # the previous piece ended with CR: a leading LF is its pair
        self._start = True  # nothing decoded yet: a byte-order mark may come
        self._event = ""
        self._data: list[str] = []
        self._last_id: str | None = None
        self._retry: int | None = None

    @property
    def pending(self) -> bool:
        """Whether a partial line or an undispatched event is buffered."""
        return bool(self._line or self._data or self._event)

    def feed(self, chunk: bytes) -> list[ServerSentEvent]:
        """Parse `chunk`; return the events it completed."""
        return [ServerSentEvent(*fields) for fields in self.feed_fields(chunk)]

    def close(self) -> list[ServerSentEvent]:
        """Flush at the end of the stream; an event without its blank line is discarded."""
        return [ServerSentEvent(*fields) for fields in self.close_fields()]

    def feed_fields(self, chunk: bytes) -> list[EventFields]:
        """`feed` without the event objects: each completed event's `(event, data, id,
        retry)`, the fields of its `ServerSentEvent` in order."""
        if self._undecoded:
            return self._text(self._decode(chunk, final=False))
        text, used = codecs.utf_8_decode(chunk, "replace", False)
        if used != len(chunk):
            self._undecoded = chunk[used:]
        elif (  # one whole `data: ...` event and nothing pending: what most chunks are
            not self._start
            and not self._skip_lf
            and not self._line
            and not self._data
            and not self._event
            and text[:6] == "data: "
            and text[-2:] == "\n\n"
            and text.count("\n") == 2
            and "\r" not in text
            and len(text) - 2 <= self.max_event_size
        ):
            return [("message", text[6:-2], self._last_id, self._retry)]
        return self._text(text)

    def close_fields(self) -> list[EventFields]:
        """`close` without the event objects (see `feed_fields`)."""
        events = self._text(self._decode(b"", final=True))
        self._line.clear()
        self._data.clear()
        self._line_size = self._data_size = 0
        self._event = ""
        return events

    def _decode(self, chunk: bytes, *, final: bool) -> str:
        """What the stdlib's incremental UTF-8 decoder (`errors="replace"`) returns for
        `chunk`: its own buffering, without its layers."""
        if self._undecoded:
            chunk = self._undecoded + chunk
        text, used = codecs.utf_8_decode(chunk, "replace", final)
        self._undecoded = chunk[used:] if used != len(chunk) else b""
        return text

    def _text(self, text: str) -> list[EventFields]:
        if self._start and text:
            self._start = False
            text = text.removeprefix("\ufeff")
        if self._skip_lf and text:
            self._skip_lf = False
            if text[0] == "\n":
                text = text[1:]
        events: list[EventFields] = []
        if "\r" not in text:  # LF-only line ends (nearly every server): split, no regex
            lines = text.split("\n")
            rest = lines.pop()
            data = self._data
            for line in lines:
                if self._line:
                    self._grow(len(line))
                    self._line.append(line)
                    line = "".join(self._line)
                    self._line.clear()
                    self._line_size = 0
                elif len(line) + self._data_size > self.max_event_size:
                    self._grow(len(line))
                # the two commonest lines inline; `_line_done` reads them the same way
                if line.startswith("data: "):
                    self._data_size += len(line) - 5
                    data.append(line[6:])
                elif not line and data:
                    events.append(self._dispatch())  # type: ignore[arg-type]
                else:
                    event = self._line_done(line)
                    if event is not None:
                        events.append(event)
            if rest:
                self._grow(len(rest))
                self._line.append(rest)
            return events
        position = 0
        for match in _LINE_END.finditer(text):
            self._grow(match.start() - position)
            self._line.append(text[position : match.start()])
            line = "".join(self._line)
            self._line.clear()
            self._line_size = 0
            position = match.end()
            if position == len(text) and match.group() == "\r":
                self._skip_lf = True
            event = self._line_done(line)
            if event is not None:
                events.append(event)
        if position < len(text):
            self._grow(len(text) - position)
            self._line.append(text[position:])
        return events

    def _grow(self, size: int) -> None:
        self._line_size += size
        if self._line_size + self._data_size > self.max_event_size:
            raise StreamInterruptedError(
                f"server-sent event larger than {self.max_event_size} characters"
            )

    def _line_done(self, line: str) -> EventFields | None:
        if not line:
            return self._dispatch()
        if line[0] == ":":
            return None
        name, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._data_size += len(value) + 1
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id":
            if "\0" not in value:
                self._last_id = value
        elif (
            name == "retry"
            and value.isascii()
            and value.isdigit()
            and len(value) <= _MAX_RETRY_DIGITS
        ):
            self._retry = int(value)
        return None

    def _dispatch(self) -> EventFields | None:
        if not self._data:
            self._event = ""
            return None
        event = (self._event or "message", "\n".join(self._data), self._last_id, self._retry)
        self._event = ""
        self._data.clear()
        self._data_size = 0
        return event


async def aiter_sse(chunks: AsyncIterable[bytes]) -> AsyncIterator[ServerSentEvent]:
    """The events of a byte stream, each yielded as soon as its blank line arrives."""
    decoder = SSEDecoder()
    async for chunk in chunks:
        for event in decoder.feed(chunk):
            yield event
    for event in decoder.close():
        yield event


__all__ = ["MAX_EVENT_SIZE", "EventFields", "SSEDecoder", "ServerSentEvent", "aiter_sse"]
