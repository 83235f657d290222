"""Tool calls that a model wrote as text, turned into real `ToolCall`s.

Small models often answer with a tool call written in their text instead of a structured
one: Qwen writes `<tool_call>{"name": ..., "arguments": {...}}</tool_call>`, others a
fenced ```json block or a bare JSON object, and some a bare object in doubled braces
(`{{"name": ...}}`, a prompt template's escaping copied). This module recognizes those
forms (an object, or a list of objects, with `name` and `arguments` or `parameters`,
optionally wrapped as `{"type": "function", "function": {...}}`) for tools attached to
the request; with `any_name=True` also a call to any other name that has `arguments` (or
`parameters`), so that the tool loop answers it "unknown tool" and the call never reaches
the user as the answer. Anything else stays text.

- `parse_text_tool_calls(text, names)`: a complete text.
- `TextToolCallParser`: the incremental form. It holds back text that might still turn
  into a tool call (an open `<tool_call>`, fence or `{`), so a call never reaches the
  user as text, and releases it as soon as it turns out to be plain text.
- `apply_text_tool_calls(response, names)` / `parse_text_tool_call_stream(events, names)`:
  the same over a `ChatResponse` / a stream of events.

Both an advisor (`SmallModelAdvisor`) and a provider wrapper
(`providers.text_tool_calls.TextToolCallModel`) use it, so it lives in core.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass

from .arguments import ArgumentsError, parse_arguments
from .call_ids import CallIds
from .events import ResponseCompleted, StreamEvent, TextDelta, ToolCallDelta
from .messages import AssistantMessage, ToolCall
from .parts import TextPart, assistant_content
from .request import ChatRequest
from .response import ChatResponse
from .streams import closing_stream

_OPEN_TAG = "<tool_call>"
_CLOSE_TAG = "</tool_call>"
_FENCE = "```"
_FENCE_LANGUAGES = ("", "json", "tool_call")
_CALL_KEYS = ("name", "arguments", "parameters", "function", "type", "id")
"""Keys a tool-call object may have (and so may start with)."""

_HOLD = -1
"""`_Step.end` of a candidate that needs more text before it can be decided."""


@dataclass(frozen=True, slots=True)
class ParsedText:
    """A text split into what stays text and the tool calls written in it."""

    text: str
    calls: tuple[ToolCall, ...]


@dataclass(frozen=True, slots=True)
class _Step:
    """What the scanner decided about the candidate at the current position."""

    end: int  # the index after the decided span, or _HOLD
    calls: tuple[ToolCall, ...] = ()
    plain_fence: bool = False  # the span opened a code fence that is not a tool call
    wait: _Wait | None = None  # for a hold: what new text can decide it (None: any text)


@dataclass(slots=True)
class _Wait:
    """What a held candidate waits for, so that text which cannot decide it is only stored.

    `kind` is `"close"` (the `marker` closing it, searched for in new text only),
    `"space"` (any character that is not whitespace), `"line"` (that, or a newline),
    or `"json"` (the end of the JSON value `scan` has read so far).
    """

    kind: str
    marker: str = ""
    scan: _JsonScan | None = None


class _JsonScan:
    """Finds where a JSON object or array ends, reading its text in pieces.

    Given `ends` (a whole text, read once), `feed` also records in it where each bracket
    it read ends (its index after the closing bracket), `None` for those still open.
    """

    __slots__ = ("depth", "escaped", "in_string")

    def __init__(self) -> None:
        self.depth = 0
        self.in_string = self.escaped = False

    def feed(self, s: str, start: int = 0, ends: dict[int, int | None] | None = None) -> int | None:
        """The index in `s` after the value's end, or `None` if it has not ended yet."""
        depth, in_string, escaped = self.depth, self.in_string, self.escaped
        opened: list[int] = []
        for i in range(start, len(s)):
            c = s[i]
            if in_string:
                if escaped:
                    escaped = False
                elif c == "\\":
                    escaped = True
                elif c == '"':
                    in_string = False
            elif c == '"':
                in_string = True
            elif c in "{[":
                depth += 1
                if ends is not None:
                    opened.append(i)
            elif c in "}]":
                depth -= 1
                if ends is not None:
                    ends[opened.pop()] = i + 1
                if depth == 0:
                    self.depth, self.in_string, self.escaped = depth, in_string, escaped
                    return i + 1
        self.depth, self.in_string, self.escaped = depth, in_string, escaped
        if ends is not None:
            ends.update(dict.fromkeys(opened))
        return None


class TextToolCallParser:
    """Incrementally splits a model's text into plain text and tool calls.

    `feed(text)` returns the pieces that are decided (strings to show, `ToolCall`s), in
    order; text that may still become a tool call is held until it is decided.
    `finish()` decides everything held: an unclosed `<tool_call>` or fence whose JSON is
    complete still counts as a call. Calls name one of `tool_names`; with `any_name`,
    also any other name (an identifier) when the object has `arguments` or `parameters`.
    Feeding a text in any split gives the same pieces, joined, as feeding it whole.
    Time is linear in the text's length however it is split: text that cannot decide
    what is held (the inside of a long call) is only stored until something can. Each
    call gets an id of its own, valid for every provider: the id the model wrote when it
    is (`core.call_ids`), else a new one.
    """

    __slots__ = (
        "_any_name",
        "_buffer",
        "_ids",
        "_in_plain_fence",
        "_names",
        "_pending",
        "_tail",
        "_wait",
    )

    def __init__(self, tool_names: Iterable[str], *, any_name: bool = False) -> None:
        self._names = frozenset(tool_names)
        self._any_name = any_name
        self._buffer = ""
        self._pending: list[str] = []  # text after `_buffer` that cannot decide the hold
        self._tail = ""  # the last characters held, for markers split between pieces
        self._in_plain_fence = False
        self._wait: _Wait | None = None
        self._ids = CallIds()

    def feed(self, text: str) -> list[str | ToolCall]:
        """Add `text`; returns the pieces decided so far."""
        if self._wait is not None and text and not self._wakes(text):
            self._pending.append(text)
            return []
        if not self._buffer and not self._in_plain_fence and not _MARKER_START.search(text):
            return [text] if text else []  # plain text: nothing to hold
        return self._scan(final=False, new=text)

    def finish(self) -> list[str | ToolCall]:
        """Decide and return everything still held (the model has finished)."""
        return self._scan(final=True, new="")

    def _wakes(self, text: str) -> bool:
        """Whether `text`, following what is held, may decide the held candidate."""
        wait = self._wait
        assert wait is not None
        if wait.kind == "close":
            window = self._tail + text
            self._tail = window[-len(wait.marker) :]
            return wait.marker in window
        if wait.kind == "json":
            assert wait.scan is not None
            return wait.scan.feed(text) is not None
        if wait.kind == "line" and "\n" in text:
            return True
        return not text.isspace()

    def _scan(self, *, final: bool, new: str) -> list[str | ToolCall]:
        if self._pending:
            self._pending.append(new)
            s = self._buffer + "".join(self._pending)
            self._pending.clear()
        else:
            s = self._buffer + new
        self._wait = None
        out = _Pieces()
        found = _Candidates(s)
        ends = _JsonEnds(s)
        i = 0
        while i < len(s):
            if self._in_plain_fence:
                close = s.find(_FENCE, i)
                if close < 0:
                    partial = None if final else _partial_start(s, _FENCE, i)
                    end = len(s) if partial is None else partial
                    _emit(out, s[i:end])
                    i = end
                    break
                _emit(out, s[i : close + len(_FENCE)])
                i = close + len(_FENCE)
                self._in_plain_fence = False
                continue
            start = found.next(i, final)
            if start is None:
                _emit(out, s[i:])
                i = len(s)
                break
            _emit(out, s[i:start])
            i = start
            if s.startswith(_OPEN_TAG, start):
                step = self._tagged(s, start, final)
            elif s.startswith(_FENCE, start):
                step = self._fenced(s, start, final)
            elif s[start] == "{":
                step = self._bare(s, start, final, ends)
            else:
                step = _Step(_HOLD)  # a marker cut off at the end of the text
            if step.end == _HOLD:
                self._wait = step.wait
                break
            if step.calls:
                out.calls(step.calls)
            else:
                _emit(out, s[start : step.end])
            self._in_plain_fence = step.plain_fence
            i = step.end
        self._buffer = s[i:]
        if self._wait is not None and self._wait.kind == "close":
            self._tail = self._buffer[-len(self._wait.marker) :]
        out.flush()
        return list(out)

    def _tagged(self, s: str, start: int, final: bool) -> _Step:
        body = start + len(_OPEN_TAG)
        first = _skip_space(s, body)
        if first < len(s) and s[first] not in "{[":
            return _Step(body)  # not JSON: the tag is just text
        close = s.find(_CLOSE_TAG, body)
        if close < 0:
            if not final:
                kind = "space" if first == len(s) else "close"
                return _Step(_HOLD, wait=_Wait(kind, _CLOSE_TAG))
            return _Step(len(s), self._calls_in(s[body:]))
        return _Step(close + len(_CLOSE_TAG), self._calls_in(s[body:close]))

    def _fenced(self, s: str, start: int, final: bool) -> _Step:
        after = start + len(_FENCE)
        newline = s.find("\n", after)
        language = s[after : len(s) if newline < 0 else newline].strip().lower()
        if newline < 0:
            if final:
                return _Step(len(s))
            if any(lang.startswith(language) for lang in _FENCE_LANGUAGES):
                return _Step(_HOLD, wait=_Wait("line"))  # spaces cannot change the language
            return _Step(after, plain_fence=True)
        if language not in _FENCE_LANGUAGES:
            return _Step(after, plain_fence=True)
        first = _skip_space(s, newline + 1)
        if first == len(s):
            return _Step(len(s)) if final else _Step(_HOLD, wait=_Wait("space"))
        if s[first] not in "{[" or (s[first] == "{" and not _may_be_call_object(s, first)):
            return _Step(after, plain_fence=True)
        close = s.find(_FENCE, first)
        if close < 0:
            if not final:
                key_open = s[first] == "{" and s.find('"', _skip_space(s, first + 1) + 1) < 0
                return _Step(_HOLD, wait=None if key_open else _Wait("close", _FENCE))
            return _Step(len(s), self._calls_in(s[first:]))
        return _Step(close + len(_FENCE), self._calls_in(s[first:close]))

    def _bare(self, s: str, start: int, final: bool, ends: _JsonEnds) -> _Step:
        inner = _skip_space(s, start + 1)
        if inner < len(s) and s[inner] == "{":
            return self._doubled(s, start, inner, final, ends)
        if not _may_be_call_object(s, start):
            return _Step(start + 1)
        end = ends.end(start)
        if end is None:
            if final:
                return _Step(start + 1)
            if inner == len(s):
                return _Step(_HOLD, wait=_Wait("space"))
            if s.find('"', inner + 1) < 0:
                return _Step(_HOLD)  # the first key is still being written
            return _json_wait(s, start)
        return _Step(end, self._calls_in(s[start:end]))

    def _doubled(self, s: str, start: int, inner: int, final: bool, ends: _JsonEnds) -> _Step:
        """`{{"name": ...}}`: the call object in doubled braces, all of it one call."""
        if not _may_be_call_object(s, inner):
            return _Step(start + 1)
        end = ends.end(inner)
        if end is None:
            if final:
                return _Step(start + 1)
            key = _skip_space(s, inner + 1)
            if key == len(s) or s.find('"', key + 1) < 0:
                return _Step(_HOLD)  # the first key is still being written
            return _json_wait(s, inner)
        after = _skip_space(s, end)
        if after == len(s):
            if not final:
                return _Step(_HOLD, wait=_Wait("space"))
            calls = self._calls_in(s[inner:end])  # the closing brace never came
            return _Step(len(s), calls) if calls else _Step(start + 1)
        if s[after] != "}":
            return _Step(start + 1)
        calls = self._calls_in(s[inner:end])
        return _Step(after + 1, calls) if calls else _Step(start + 1)

    def _calls_in(self, text: str) -> tuple[ToolCall, ...]:
        """The calls `text` (JSON: one call object or a list of them) holds, else `()`."""
        try:
            value = parse_arguments(text)
        except ArgumentsError:
            return ()
        items = value if isinstance(value, list) else [value]
        try:
            calls = [self._call(item) for item in items]
        except RecursionError:
            return ()
        if not calls or any(c is None for c in calls):
            return ()
        return tuple(c for c in calls if c is not None)

    def _call(self, item: object) -> ToolCall | None:
        if not isinstance(item, dict):
            return None
        if isinstance(item.get("function"), dict):
            item = item["function"]
            assert isinstance(item, dict)
        if not set(item) <= set(_CALL_KEYS):
            return None
        name = item.get("name")
        if name not in self._names and not (
            self._any_name
            and isinstance(name, str)
            and _TOOL_NAME.fullmatch(name)
            and ("arguments" in item or "parameters" in item)
        ):
            return None
        arguments = item.get("arguments", item.get("parameters"))
        if isinstance(arguments, str):
            try:
                arguments = parse_arguments(arguments)
            except ArgumentsError:
                pass  # kept as written: the tool loop reports the bad JSON to the model
        if arguments is None:
            arguments = {}
        if isinstance(arguments, str):
            raw = arguments
        elif isinstance(arguments, dict):
            raw = json.dumps(arguments, separators=(",", ":"), ensure_ascii=False)
        else:
            return None
        call_id = item.get("id")
        return ToolCall(
            id=self._ids.claim(call_id if isinstance(call_id, str) else None),
            name=str(item["name"]),
            arguments=raw,
        )


_MARKER_START = re.compile(r"[<`{]")

_BRACE = re.compile(r'\{\s*(?:\{\s*)?(?:"|\Z)')
"""A `{` that may open a tool call: its first key (or the end of the text so far) follows,
maybe after a second `{` (the doubled-brace form)."""

_TOOL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,63}")
"""What a name must look like to be taken for a call to a tool that is not attached."""


class _Candidates:
    """Where the next possible tool call starts in `s`: each marker is searched for once
    per position it can be found at, not once per candidate."""

    __slots__ = ("_next", "_partial", "_s")

    def __init__(self, s: str) -> None:
        self._s = s
        self._next = {_OPEN_TAG: -2, _FENCE: -2, "{": -2}  # -2: not searched yet, -1: none
        self._partial: dict[str, list[int]] = {}  # marker -> where a prefix of it ends `s`

    def next(self, i: int, final: bool) -> int | None:
        s = self._s
        found = []
        for marker, at in self._next.items():
            if at == -2 or 0 <= at < i:
                if marker == "{":
                    match = _BRACE.search(s, i)
                    at = match.start() if match else -1
                else:
                    at = s.find(marker, i)
                self._next[marker] = at
            if at >= 0:
                found.append(at)
        if not final:
            for marker in (_OPEN_TAG, _FENCE):
                starts = self._partial.get(marker)
                if starts is None:
                    window = range(max(0, len(s) - len(marker) + 1), len(s))
                    starts = self._partial[marker] = [k for k in window if marker.startswith(s[k:])]
                found.extend(k for k in starts if k >= i)
        return min(found) if found else None


class _JsonEnds:
    """`_json_end` for every bracket of `s`, each found by one left-to-right reading.

    A reading from one bracket also ends every bracket it met outside a string (their
    strings start and end at the same places), so those are remembered, not read again.
    """

    __slots__ = ("_ends", "_s")

    def __init__(self, s: str) -> None:
        self._s = s
        self._ends: dict[int, int | None] = {}

    def end(self, start: int) -> int | None:
        if start in self._ends:
            return self._ends[start]
        return _JsonScan().feed(self._s, start, self._ends)


class _Pieces(list[str | ToolCall]):
    """The decided pieces; adjacent text is joined into one string (at the end, once)."""

    def __init__(self) -> None:
        super().__init__()
        self.text: list[str] = []

    def calls(self, calls: Iterable[ToolCall]) -> None:
        self.flush()
        self.extend(calls)

    def flush(self) -> None:
        if self.text:
            self.append("".join(self.text))
            self.text.clear()


def _emit(out: _Pieces, text: str) -> None:
    if text:
        out.text.append(text)


def _json_wait(s: str, start: int) -> _Step:
    """Hold the object that starts at `start` until its JSON ends: the wait reads on
    from where `s` ends."""
    scan = _JsonScan()
    scan.feed(s, start)
    return _Step(_HOLD, wait=_Wait("json", scan=scan))


def _skip_space(s: str, i: int) -> int:
    while i < len(s) and s[i].isspace():
        i += 1
    return i


def _partial_start(s: str, marker: str, i: int) -> int | None:
    """Where a proper prefix of `marker` ends the text (at or after `i`), if one does."""
    for k in range(max(i, len(s) - len(marker) + 1), len(s)):
        if marker.startswith(s[k:]):
            return k
    return None


_LONGEST_KEY = max(map(len, _CALL_KEYS))


def _may_be_call_object(s: str, start: int) -> bool:
    """Whether the object opening at `start` may still be a tool call (judged by its first key)."""
    i = _skip_space(s, start + 1)
    if i == len(s):
        return True
    if s[i] != '"':
        return False
    close = s.find('"', i + 1, i + 2 + _LONGEST_KEY)
    if close < 0:
        key = s[i + 1 : i + 2 + _LONGEST_KEY]
        return len(key) <= _LONGEST_KEY and any(k.startswith(key) for k in _CALL_KEYS)
    return s[i + 1 : close] in _CALL_KEYS


def parse_text_tool_calls(
    text: str, tool_names: Iterable[str], *, any_name: bool = False
) -> ParsedText:
    """Split a complete `text` into plain text and the calls to `tool_names` written in it
    (with `any_name`, to any name: see `TextToolCallParser`)."""
    parser = TextToolCallParser(tool_names, any_name=any_name)
    pieces = parser.feed(text) + parser.finish()
    return ParsedText(
        text="".join(p for p in pieces if isinstance(p, str)),
        calls=tuple(p for p in pieces if isinstance(p, ToolCall)),
    )


def tool_names_for(request: ChatRequest) -> frozenset[str]:
    """The tool names a model may call in `request` (none when `tool_choice` is `"none"`)."""
    if request.options.tool_choice == "none":
        return frozenset()
    return frozenset(t.name for t in request.tools)


def with_text_calls(response: ChatResponse, text: str, calls: tuple[ToolCall, ...]) -> ChatResponse:
    """`response` whose message is `text` (stripped) plus `calls` after its own tool calls
    (those of `calls` whose ids its own calls use get new ones)."""
    if not calls:
        return response
    original = response.message
    own = original.tool_calls
    calls = CallIds(c.id for c in own).calls(calls)
    message = AssistantMessage(
        content=assistant_content([*original.reasoning, TextPart(text=text.strip())]),
        tool_calls=own + calls,
        provider_data=original.provider_data,
    )
    return ChatResponse(
        message=message,
        finish_reason="tool_calls",
        usage=response.usage,
        messages=(*response.messages[:-1], message),
        model=response.model,
        id=response.id,
        deferred=response.deferred,
    )


def apply_text_tool_calls(
    response: ChatResponse, tool_names: Iterable[str], *, any_name: bool = False
) -> ChatResponse:
    """`response` with the tool calls written in its text turned into real ones (none
    when `tool_names` is empty: no tool may be called)."""
    names = frozenset(tool_names)
    if not names or not response.message.text:
        return response
    parsed = parse_text_tool_calls(response.message.text, names, any_name=any_name)
    return with_text_calls(response, parsed.text, parsed.calls)


async def parse_text_tool_call_stream(
    events: AsyncIterator[StreamEvent], tool_names: Iterable[str], *, any_name: bool = False
) -> AsyncIterator[StreamEvent]:
    """`events` with the tool calls written in the text turned into real ones.

    Text that may be a tool call is held back; recognized calls are yielded as
    `ToolCallDelta`s (after the model's own) just before the final `ResponseCompleted`,
    whose response carries them. Other events pass through unchanged.
    """
    parser = TextToolCallParser(tool_names, any_name=any_name)
    text: list[str] = []
    calls: list[ToolCall] = []
    next_index = 0
    async with closing_stream(events) as source:
        async for event in source:
            if isinstance(event, TextDelta):
                for piece in parser.feed(event.text):
                    if isinstance(piece, str):
                        text.append(piece)
                        yield TextDelta(piece)
                    else:
                        calls.append(piece)
            elif isinstance(event, ResponseCompleted):
                for piece in parser.finish():
                    if isinstance(piece, str):
                        text.append(piece)
                        yield TextDelta(piece)
                    else:
                        calls.append(piece)
                completed = with_text_calls(event.response, "".join(text), tuple(calls))
                mine = completed.message.tool_calls[len(event.response.message.tool_calls) :]
                for offset, call in enumerate(mine):
                    yield ToolCallDelta(next_index + offset, call.id, call.name, call.arguments)
                yield ResponseCompleted(completed)
            else:
                if isinstance(event, ToolCallDelta):
                    next_index = max(next_index, event.index + 1)
                yield event


__all__ = [
    "ParsedText",
    "TextToolCallParser",
    "apply_text_tool_calls",
    "parse_text_tool_call_stream",
    "parse_text_tool_calls",
    "tool_names_for",
    "with_text_calls",
]
