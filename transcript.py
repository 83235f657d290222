"""A readable transcript of a turn or a conversation: `format_transcript`, `print_transcript`.

One line (or block) per message: who spoke, the tool calls with their arguments, each
result with its outcome, and for a whole turn (`ChatResponse`) the calls that wait
(approvals, external work), the finish reason and the usage. Plain text by default;
`print_transcript` adds colour when its stream is a terminal that supports it (not when
`NO_COLOR` is set, nor for `TERM=dumb`; `FORCE_COLOR` forces it). Secrets are redacted as
they are from logs: API keys and card numbers by default (`redact=` other
`RedactionAdvisor` rules, or `None` for the text as it is); images and documents are
shown by type and size, never their bytes.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterable, Sequence
from typing import IO, Any, TypeAlias

from .advisors.redaction import RedactionAdvisor, RedactionRule
from .core.deferred import DeferredCall
from .core.messages import AssistantMessage, Message, SystemMessage, ToolMessage, UserMessage
from .core.parts import DocumentPart, ImagePart, ReasoningPart, TextPart
from .core.prompt import OpenAIMessage, to_messages
from .core.response import ChatResponse

Redact: TypeAlias = RedactionAdvisor | Iterable[str | RedactionRule] | None
"""What `format_transcript` redacts: a `RedactionAdvisor`, its rules, or nothing."""

SECRET_RULES = ("api_key", "card")
"""The rules a transcript applies by default: the secrets logs never show."""

_STYLES = {
    "system": "\x1b[2m",  # dim
    "user": "\x1b[1;36m",  # bold cyan
    "assistant": "\x1b[1;32m",  # bold green
    "call": "\x1b[33m",  # yellow
    "tool": "\x1b[35m",  # magenta
    "error": "\x1b[1;31m",  # bold red
    "meta": "\x1b[2m",
}
_RESET = "\x1b[0m"
_UNSET: Any = object()


def format_transcript(
    source: ChatResponse | Sequence[Message | OpenAIMessage] | Message | OpenAIMessage,
    *,
    color: bool = False,
    redact: Redact = _UNSET,
    max_chars: int | None = 2000,
) -> str:
    """The transcript of `source` as text (one trailing newline).

    `source` is a turn (`ChatResponse`: its messages, then pending approvals, finish
    reason and usage), a conversation (a sequence of messages, OpenAI-style dicts
    included) or one message. `color` adds ANSI colours; `redact` defaults to the
    `SECRET_RULES`; each text is cut to `max_chars` characters (`None`: never).
    """
    redactor = _redactor(SECRET_RULES if redact is _UNSET else redact)
    writer = _Writer(color, redactor, max_chars)
    if isinstance(source, ChatResponse):
        for message in source.messages:
            writer.message(message)
        writer.turn(source)
    else:
        for message in to_messages(source):
            writer.message(message)
    return "".join(line + "\n" for line in writer.lines)


def print_transcript(
    source: ChatResponse | Sequence[Message | OpenAIMessage] | Message | OpenAIMessage,
    *,
    file: IO[str] | None = None,
    color: bool | None = None,
    redact: Redact = _UNSET,
    max_chars: int | None = 2000,
) -> None:
    """Print `format_transcript(source)` to `file` (standard output by default), in colour
    when `color` is `None` and `file` is a terminal that supports it (`supports_color`)."""
    out = file if file is not None else sys.stdout
    if color is None:
        color = supports_color(out)
    out.write(format_transcript(source, color=color, redact=redact, max_chars=max_chars))
    out.flush()


def supports_color(stream: IO[str]) -> bool:
    """Whether to write colour to `stream`: `FORCE_COLOR` set (not empty) says yes;
    `NO_COLOR` set (not empty) or `TERM=dumb` says no; else whether it is a terminal."""
    if os.environ.get("FORCE_COLOR"):
        return True
    if os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty is not None and isatty())


def _redactor(redact: Redact) -> RedactionAdvisor | None:
    if redact is None:
        return None
    if isinstance(redact, RedactionAdvisor):
        return redact
    return RedactionAdvisor(tuple(redact), apply_to=("answer",))


class _Writer:
    def __init__(self, color: bool, redactor: RedactionAdvisor | None, limit: int | None) -> None:
        self.color = color
        self.redactor = redactor
        self.limit = limit
        self.lines: list[str] = []

    def style(self, kind: str, text: str) -> str:
        return f"{_STYLES[kind]}{text}{_RESET}" if self.color else text

    def text(self, text: str) -> str:
        if self.redactor is not None:
            text = self.redactor.redact(text)
        if self.limit is not None and len(text) > self.limit:
            text = f"{text[: self.limit]}... [{len(text) - self.limit} more characters]"
        if not self.color:
            return text
        return text.replace("\x1b", "^[")  # a model's text cannot drive the terminal

    def add(self, label: str, kind: str, body: str) -> None:
        head = self.style(kind, label)
        lines = body.split("\n") if body else [""]
        self.lines.append(f"{head} {lines[0]}".rstrip())
        indent = " " * (len(label) + 1)
        self.lines.extend(f"{indent}{line}".rstrip() for line in lines[1:])

    def message(self, message: Message) -> None:
        if isinstance(message, SystemMessage):
            self.add("system:", "system", self.text(message.content))
        elif isinstance(message, UserMessage):
            self.add("user:", "user", self.content(message.content))
        elif isinstance(message, AssistantMessage):
            for part in message.reasoning:
                if part.text:
                    self.add("thinking:", "meta", self.text(part.text))
            if message.text or not message.tool_calls:
                self.add("assistant:", "assistant", self.text(message.text))
            for call in message.tool_calls:
                arguments = self.text(_arguments(call.arguments))
                self.add("assistant →", "call", f"{call.name}({arguments})  [{call.id}]")
        elif isinstance(message, ToolMessage):
            kind = "error" if message.is_error else "tool"
            outcome = "error" if message.is_error else "ok"
            label = f"tool {message.name} [{message.tool_call_id}] {outcome}:"
            self.add(label, kind, self.content(message.content))

    def content(self, content: str | Sequence[Any]) -> str:
        if isinstance(content, str):
            return self.text(content)
        pieces: list[str] = []
        for part in content:
            if isinstance(part, TextPart):
                pieces.append(self.text(part.text))
            elif isinstance(part, ImagePart):
                pieces.append(
                    f"[image {part.url}]"
                    if part.url is not None
                    else f"[image {part.media_type}, {len(part.data or b'')} bytes]"
                )
            elif isinstance(part, DocumentPart):
                name = f" {part.name}" if part.name else ""
                pieces.append(f"[document{name} {part.media_type}, {len(part.data)} bytes]")
            elif isinstance(part, ReasoningPart):  # pragma: no cover - not in user content
                pieces.append(f"[reasoning] {self.text(part.text)}")
        return " ".join(pieces)

    def deferred(self, waiting: DeferredCall, path: str) -> None:
        """One line per waiting call, its sub-agent's calls after it (ids joined by `/`)."""
        call_id = f"{path}/{waiting.id}" if path else waiting.id
        arguments = self.text(_arguments(waiting.call.arguments))
        self.add(
            f"waiting ({self.text(waiting.kind)}):",
            "error",
            f"{waiting.name}({arguments})  [{call_id}]",
        )
        for child in waiting.nested:
            self.deferred(child, call_id)

    def turn(self, response: ChatResponse) -> None:
        for waiting in response.deferred:
            self.deferred(waiting, "")
        usage = response.usage
        parts = [f"finish: {response.finish_reason}"]
        if usage.requests or usage.input_tokens or usage.output_tokens:
            parts.append(
                f"{usage.input_tokens} tokens in, {usage.output_tokens} out, "
                f"{usage.requests} model call{'s' if usage.requests != 1 else ''}"
            )
        if response.model:
            parts.append(f"model: {response.model}")
        self.lines.append(self.style("meta", "-- " + " · ".join(parts)))


def _arguments(text: str) -> str:
    """Arguments as `name=value` pairs when they are a JSON object, else the raw text."""
    try:
        values = json.loads(text)
    except ValueError:
        return text
    if not isinstance(values, dict):
        return text
    return ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in values.items())


__all__ = ["SECRET_RULES", "format_transcript", "print_transcript", "supports_color"]
