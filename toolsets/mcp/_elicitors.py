"""Elicitation handlers: a console prompt and deferred calls.

Both answer `ElicitationRequest`s (the server's questions to the user) for an
`McpToolset(elicitation=...)`. `ConsoleElicitor` asks at a terminal, field by field;
`DeferredElicitation` defers the call (kind `"elicitation"`), and a resume
(`chain.call(..., decisions={call_id: Result({...})})`) continues it with the answer.
"""

from __future__ import annotations

import logging
import re
import sys
import uuid
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import replace
from typing import Any, TextIO

import anyio
import anyio.to_thread

from ...core.advisor import Advisor, Placement
from ...core.context import ToolContext
from ...core.deferred import Result
from ...core.errors import ChainConfigurationError, InvalidDecisions, ResumeConflict
from ...core.invocation import ToolInvocation, ToolNext, ToolResult
from ._answers import check_answer, choices_of
from ._elicitation import ElicitationAnswer, ElicitationRequest

logger = logging.getLogger("advisorchain.mcp")

_MAX_FIELDS = 50
_MAX_ATTEMPTS = 5
_MAX_SHOWN = 2000
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


ELICITATION = "elicitation"
"""The kind of a call deferred because its server asked the user a question."""


class ElicitationNotWaiting(ResumeConflict, LookupError):
    """A resume answered a question this `DeferredElicitation` does not hold: answered
    before, dropped (over `max_pending`), or asked in another process."""


class InvalidElicitationAnswer(InvalidDecisions):
    """An answer to a deferred elicitation that does not answer it: something other than
    a mapping of the requested fields, or content that does not fit the requested
    schema (lengths, formats)."""


def _shown(text: object, limit: int = _MAX_SHOWN) -> str:
    """Server text as a terminal may show it: no control characters (escape sequences)."""
    return _CONTROL.sub("", str(text))[:limit]


class ConsoleElicitor:
    """Answers a server's questions at a terminal, one field at a time.

    Shows the server's name and message, then asks for each field of the requested
    schema (its title or name, type, whether it is required, its choices and default).
    An answer that does not fit the field (a number that is not one, a value outside
    the choices, a bound, a length, a format) is explained and asked again, up to 5
    times; the whole answer is checked against the schema before it is returned. Type
    `:decline` to decline or `:cancel` to cancel at any prompt; an empty line keeps the
    default or leaves an optional field out; end of input cancels. For a URL request,
    it shows the URL and asks whether you completed it (`y`), or decline/cancel.

    Input is read in a worker thread, so the event loop keeps running; one question at a
    time (concurrent requests wait). `input` and `output` default to the terminal;
    pass streams to test it or to use another console. Server text is shown without
    control characters, and a form of more than 50 fields is cancelled unseen.
    """

    def __init__(self, *, input: TextIO | None = None, output: TextIO | None = None) -> None:
        self.input = input
        self.output = output
        self._prompting: anyio.Lock | None = None

    def __repr__(self) -> str:
        return "ConsoleElicitor()"

    async def __call__(self, request: ElicitationRequest) -> ElicitationAnswer:
        """Ask the person, after any other question of this elicitor has been answered."""
        if self._prompting is None:
            self._prompting = anyio.Lock()
        async with self._prompting:
            try:
                return await self._ask(request)
            except EOFError:
                self._say("  (end of input: cancelled)")
                return ElicitationAnswer("cancel")

    async def _ask(self, request: ElicitationRequest) -> ElicitationAnswer:
        self._say(
            f"\nThe MCP server {_shown(request.server, 200)!r} asks: {_shown(request.message)}"
        )
        if request.url is not None:
            self._say(f"  Open: {_shown(request.url)}")
            for _ in range(_MAX_ATTEMPTS):
                line = await self._read("  Done? [y]es, :decline, :cancel: ")
                if line in (":decline", ":cancel"):
                    return ElicitationAnswer("decline" if line == ":decline" else "cancel")
                if line.lower() in ("y", "yes"):
                    return ElicitationAnswer("accept")
            return ElicitationAnswer("cancel")
        schema = dict(request.schema or {"type": "object", "properties": {}})
        properties: Mapping[str, Any] = schema.get("properties") or {}
        if len(properties) > _MAX_FIELDS:
            self._say(f"  (a form of {len(properties)} fields: cancelled)")
            return ElicitationAnswer("cancel")
        self._say("  (:decline to decline, :cancel to cancel; empty keeps the default)")
        required = set(schema.get("required") or ())
        content: dict[str, Any] = {}
        for name, field in properties.items():
            spec = field if isinstance(field, Mapping) else {}
            answer = await self._field(str(name), spec, name in required)
            if isinstance(answer, ElicitationAnswer):
                return answer
            if answer is not _OMITTED:
                content[str(name)] = answer
        errors = check_answer(content, schema)
        if errors:  # a combination the fields alone allowed (anyOf, allOf): not sent
            self._say("  The answer does not fit: " + "; ".join(errors) + " (cancelled)")
            return ElicitationAnswer("cancel")
        return ElicitationAnswer("accept", content)

    async def _field(
        self, name: str, field: Mapping[str, Any], required: bool
    ) -> Any | ElicitationAnswer:
        kind = field.get("type", "string")
        choices = choices_of(field.get("items") or {}) if kind == "array" else choices_of(field)
        label = _shown(field.get("title") or name, 200)
        notes = [str(kind), "required" if required else "optional"]
        if field.get("description"):
            self._say(f"  {label}: {_shown(field['description'])}")
        if choices is not None:
            self._say("    choices: " + ", ".join(_shown(c, 200) for c in choices))
        if "default" in field:
            notes.append(f"default {_shown(field['default'], 200)}")
        prompt = f"  {label} ({', '.join(notes)}): "
        for _ in range(_MAX_ATTEMPTS):
            line = await self._read(prompt)
            if line in (":decline", ":cancel"):
                return ElicitationAnswer("decline" if line == ":decline" else "cancel")
            if line == "":
                if "default" in field:
                    return field["default"]
                if not required:
                    return _OMITTED
                self._say("    required: type an answer")
                continue
            try:
                value = _parse(line, str(kind), choices)
            except ValueError as exc:
                self._say(f"    {exc}")
                continue
            errors = check_answer({name: value}, {"properties": {name: field}})
            if not errors:
                return value
            self._say("    " + "; ".join(e.removeprefix("content.") for e in errors))
        self._say(f"  (no valid answer for {label!r}: cancelled)")
        return ElicitationAnswer("cancel")

    async def _read(self, prompt: str) -> str:
        out = self.output or sys.stdout
        out.write(prompt)
        out.flush()
        source = self.input or sys.stdin
        line = await anyio.to_thread.run_sync(source.readline, abandon_on_cancel=True)
        if line == "":
            raise EOFError
        return str(line).rstrip("\r\n").strip()

    def _say(self, text: str) -> None:
        out = self.output or sys.stdout
        out.write(text + "\n")
        out.flush()


_OMITTED = object()


def _parse(line: str, kind: str, choices: list[Any] | None) -> Any:
    """A typed line as the field's JSON value (a choice by its number or its value)."""
    if kind == "array":
        return [_choice(part.strip(), choices) for part in line.split(",") if part.strip()]
    if choices is not None:
        return _choice(line, choices)
    if kind == "boolean":
        if line.lower() in ("y", "yes", "true"):
            return True
        if line.lower() in ("n", "no", "false"):
            return False
        raise ValueError("answer yes or no")
    if kind == "integer":
        try:
            return int(line)
        except ValueError:
            raise ValueError("not an integer") from None
    if kind == "number":
        try:
            number = float(line)
        except ValueError:
            raise ValueError("not a number") from None
        return int(number) if number.is_integer() and "." not in line else number
    return line


def _choice(text: str, choices: list[Any] | None) -> Any:
    if choices is None:
        return text
    if text.isdigit() and 1 <= int(text) <= len(choices) and text not in map(str, choices):
        return choices[int(text) - 1]
    for choice in choices:
        if str(choice) == text:
            return choice
    raise ValueError("not one of the choices")


class DeferredElicitation(Advisor):
    """Elicitation as deferred calls: the server's question defers the call, and a resume
    answers it: `chain.call(transcript, decisions={call_id: Result({...})})` accepts with
    that content, `Reject(reason)` declines.

    Give the same object to the toolset and to the chain, nearer the tool than an
    `ApprovalAdvisor` (after it in the list):

        elicitation = DeferredElicitation()
        toolset = McpToolset.stdio(..., elicitation=elicitation)
        chain = Chain([ToolCallingAdvisor(), elicitation], model=model, tools=...)

    Control flow. When a server asks during a tool call, the question is recorded and
    the server is told `cancel` at once (the MCP session cannot wait across a deferred
    turn: servers time their requests out, and the turn may resume much later). When the
    call returns, this link's `call_tool` hook answers it
    `ToolResult.defer("elicitation", {"server", "message", "schema", "url"})`: the turn
    ends with `finish_reason="deferred"`, the call in `response.deferred` with the
    question as its metadata. The resume's `Result(content)` is checked against the
    requested schema before anything runs (`InvalidDecisions`; the finer checks of
    `check_answer`, lengths and formats, raise `InvalidElicitationAnswer` when the call
    is settled); then the tool call is **issued again** and, when the server asks the
    same question (same message and schema), it gets the answer, exactly once. The turn
    then goes on as after any resume.

    Limits, plainly: the re-issued call runs the server's tool again from the start (what
    it did before asking happens twice: use it with tools that ask first); a different
    or a second question in the re-issued call is answered `cancel`; the re-issued call
    goes through the `call_tool` hooks nearer the tool than this link only. Resume in a
    process where the toolset is connected (the question itself travels in the
    transcript). Each question is answered once: the link keeps the ids of the questions
    it deferred (at most `max_pending`, the oldest dropped) and a resume of one it does
    not hold (answered before, dropped, or asked in another process) raises
    `ElicitationNotWaiting` before the call is issued again. A question is tied to its
    call only when it is the one call of that toolset running; with several at once (a
    parallel round), it is answered `cancel`.
    """

    def __init__(self, *, max_pending: int = 1000) -> None:
        if max_pending < 1:
            raise ChainConfigurationError("max_pending must be at least 1")
        self.max_pending = max_pending
        self._open: OrderedDict[str, None] = OrderedDict()
        self._bound = False
        self._asked: dict[str, ElicitationRequest] = {}
        self._supplied: dict[str, tuple[ElicitationRequest, ElicitationAnswer]] = {}
        self._reissuing: set[str] = set()

    def bind(self, placement: Placement) -> Advisor:
        self._bound = True
        return self

    # -- the toolset's handler --------------------------------------------------------------

    async def __call__(self, request: ElicitationRequest) -> ElicitationAnswer:
        """Answer the server now: the given answer on a re-issued call, else `cancel`
        (and the question is recorded, for the call's result to be deferred)."""
        call_id = request.call_id
        if call_id is None or not self._bound:
            logger.warning(
                "MCP server %r: elicitation cancelled: %s",
                request.server,
                "not in a chain (add the DeferredElicitation to the chain's advisors)"
                if not self._bound
                else "it cannot be tied to one tool call (several calls were running)",
            )
            return ElicitationAnswer("cancel")
        supplied = self._supplied.pop(call_id, None)
        if supplied is not None:
            asked, answer = supplied
            if (asked.message, asked.schema, asked.url) == (
                request.message,
                request.schema,
                request.url,
            ):
                return answer
            return ElicitationAnswer("cancel")
        if call_id not in self._reissuing and call_id not in self._asked:
            self._asked[call_id] = request
        return ElicitationAnswer("cancel")

    # -- the chain's link -------------------------------------------------------------------

    async def call_tool(self, invocation: ToolInvocation, next: ToolNext) -> ToolResult:
        """Run the call; if its server asked a question meanwhile, defer it. Settle a
        resumed call by issuing it again with the answer."""
        deferred = invocation.deferred
        if deferred is not None and deferred.kind == ELICITATION:
            return await self._answer(invocation, next, deferred.metadata)
        call_id = invocation.call.id
        self._asked.pop(call_id, None)  # from an earlier call with this id: not this one's
        result = await next(invocation)
        asked = self._asked.pop(call_id, None)
        if asked is None:
            return result
        question_id = f"question_{uuid.uuid4().hex}"
        self._open[question_id] = None
        while len(self._open) > self.max_pending:
            dropped, _ = self._open.popitem(last=False)
            logger.warning("deferred elicitation %s dropped: over max_pending", dropped)
        return ToolResult.defer(
            ELICITATION,
            {
                "question_id": question_id,
                "server": asked.server,
                "message": asked.message,
                "schema": dict(asked.schema) if asked.schema is not None else None,
                "url": asked.url,
            },
            content="Waiting for the user to answer the server's question.",
            accepts=("result", "reject"),
            result_schema=asked.schema,
        )

    async def _answer(
        self, invocation: ToolInvocation, next: ToolNext, metadata: Mapping[str, Any]
    ) -> ToolResult:
        schema = metadata.get("schema")
        question_id = metadata.get("question_id")
        answer = _answer_of(invocation, schema)
        if not isinstance(question_id, str) or question_id not in self._open:
            raise ElicitationNotWaiting(
                f"the question of call {invocation.call.id!r} is not waiting here: it was "
                "answered before, dropped, or asked in another process"
            )
        del self._open[question_id]  # claimed: no await since the look-up
        asked = ElicitationRequest(
            server=str(metadata.get("server", "")),
            message=str(metadata.get("message", "")),
            schema=schema if isinstance(schema, Mapping) else None,
            url=metadata.get("url") if isinstance(metadata.get("url"), str) else None,
            call_id=invocation.call.id,
        )
        call_id = invocation.call.id
        context = invocation.context
        fresh = replace(
            invocation,
            decision=None,
            deferred=None,
            context=ToolContext(
                context,
                call_id=context.call_id,
                tool_name=context.tool_name,
                conversation_id=context.conversation_id,
            ),
        )
        self._supplied[call_id] = (asked, answer)
        self._reissuing.add(call_id)
        try:
            return await next(fresh)
        finally:
            self._supplied.pop(call_id, None)
            self._reissuing.discard(call_id)
            self._asked.pop(call_id, None)


def _answer_of(invocation: ToolInvocation, schema: object) -> ElicitationAnswer:
    """The user's answer in a resume's decision: `Result(content)` accepts (content checked
    against the requested `schema`), anything else declines. Raises
    `InvalidElicitationAnswer` for content that is not a mapping or does not fit."""
    decision = invocation.decision
    if not isinstance(decision, Result):
        return ElicitationAnswer("decline")
    if not isinstance(decision.value, Mapping):
        raise InvalidElicitationAnswer(
            f"the answer for {invocation.call.id!r} must be Result(a mapping of the "
            f"requested fields), not Result({type(decision.value).__name__})"
        )
    content = decision.value
    errors = check_answer(content, schema) if isinstance(schema, Mapping) else []
    if errors:
        raise InvalidElicitationAnswer(
            f"the answer for {invocation.call.id!r} does not fit the requested "
            "schema: " + "; ".join(errors)
        )
    return ElicitationAnswer("accept", dict(content))


__all__ = [
    "ELICITATION",
    "ConsoleElicitor",
    "DeferredElicitation",
    "ElicitationNotWaiting",
    "InvalidElicitationAnswer",
    "check_answer",
]
