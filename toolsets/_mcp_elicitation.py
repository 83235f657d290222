"""Elicitation handlers: a console prompt and a deferred, approval-like suspension.

Both answer `ElicitationRequest`s (the server's questions to the user) for an
`McpToolset(elicitation=...)`. `ConsoleElicitor` asks at a terminal, field by field;
`DeferredElicitation` ends the turn waiting for the answer, as a deferred approval does,
and `Chain.resume` continues it with the answer.
"""

from __future__ import annotations

import logging
import re
import sys
import time
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import date, datetime
from functools import partial
from typing import Any, TextIO

import anyio
import anyio.to_thread

from ..core._schema import check_json_schema
from ..core.advisor import Advisor, Placement
from ..core.errors import AdvisorChainError, ChainConfigurationError
from ..core.invocation import ToolInvocation, ToolNext, ToolResult
from ..core.manager import ToolPipeline
from ..core.messages import ToolCall
from ..core.request import ChatRequest
from ..core.resumption import ResumedCall, Resumption
from ..core.suspension import Suspension
from ._mcp_sampling import ElicitationAnswer, ElicitationRequest

logger = logging.getLogger("advisorchain.mcp")

_MAX_FIELDS = 50
_MAX_ATTEMPTS = 5
_MAX_SHOWN = 2000
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
_URI = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:\S+$")


class InvalidElicitationAnswer(AdvisorChainError, ValueError):
    """An answer to a deferred elicitation that does not answer it: a missing or unknown
    call id, something other than an `ElicitationAnswer`, or accepted content that does
    not fit the requested schema. Nothing was claimed: resume again with a fixed answer."""


def check_answer(content: Mapping[str, Any], schema: Mapping[str, Any]) -> list[str]:
    """Errors of an accepted answer's `content` against an elicitation's (flat) schema:
    types, required fields, enums, bounds, lengths, item counts and the `email`, `uri`,
    `date` and `date-time` formats. Empty when it fits."""
    errors = check_json_schema(dict(content), schema, "content")
    properties: Mapping[str, Any] = schema.get("properties") or {}
    for name, value in content.items():
        field = properties.get(name)
        if isinstance(field, Mapping):
            errors += _field_errors(f"content.{name}", value, field)
    return errors


def _field_errors(where: str, value: Any, field: Mapping[str, Any]) -> list[str]:
    errors: list[str] = []
    if isinstance(value, str):
        if "minLength" in field and len(value) < field["minLength"]:
            errors.append(f"{where}: at least {field['minLength']} characters")
        if "maxLength" in field and len(value) > field["maxLength"]:
            errors.append(f"{where}: at most {field['maxLength']} characters")
        problem = _format_problem(value, field.get("format"))
        if problem:
            errors.append(f"{where}: {problem}")
    elif isinstance(value, list):
        if "minItems" in field and len(value) < field["minItems"]:
            errors.append(f"{where}: at least {field['minItems']} choices")
        if "maxItems" in field and len(value) > field["maxItems"]:
            errors.append(f"{where}: at most {field['maxItems']} choices")
        allowed = _choices(field.get("items") or {})
        if allowed is not None and any(item not in allowed for item in value):
            errors.append(f"{where}: each choice must be one of {allowed!r}")
    return errors


def _format_problem(value: str, kind: object) -> str | None:
    try:
        if kind == "email" and not _EMAIL.match(value):
            return "not an e-mail address"
        if kind == "uri" and not _URI.match(value):
            return "not a URI"
        if kind == "date":
            date.fromisoformat(value)
        if kind == "date-time":
            datetime.fromisoformat(value)
    except ValueError:
        return f"not a {kind} (ISO 8601)"
    return None


def _choices(field: Mapping[str, Any]) -> list[Any] | None:
    """The values a field allows: its `enum`, or the `const`s of its `oneOf`/`anyOf`."""
    if isinstance(field.get("enum"), list):
        return list(field["enum"])
    for key in ("oneOf", "anyOf"):
        options = field.get(key)
        if (
            isinstance(options, list)
            and options
            and all(isinstance(o, Mapping) and "const" in o for o in options)
        ):
            return [o["const"] for o in options]
    return None


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
        choices = _choices(field.get("items") or {}) if kind == "array" else _choices(field)
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


@dataclass
class _Question:
    """A question a call asked, and the call's first result (after it was told "cancel")."""

    request: ElicitationRequest
    first: ToolResult


@dataclass
class _Waiting:
    """A suspended turn: its suspension and the question of each waiting call."""

    suspension: Suspension
    questions: dict[str, _Question]


class DeferredElicitation(Advisor):
    """Elicitation as a deferred approval: the server's question suspends the turn, and
    `Chain.resume(id, {call_id: ElicitationAnswer(...)})` continues it with the answer.

    Give the same object to the toolset and to the chain:

        elicitation = DeferredElicitation()
        toolset = McpToolset.stdio(..., elicitation=elicitation)
        chain = Chain([ToolCallingAdvisor(), elicitation], model=model, tools=...)

    Control flow. When a server asks during a tool call, the question is recorded and
    the server is told `cancel` at once (the MCP session cannot wait across a suspended
    turn: servers time their requests out, and the turn may resume much later). When the
    call returns, this link's `call_tool` hook answers it with a `pending` result: the
    turn ends with `finish_reason="approval_pending"` and a `Suspension` whose id
    `questions(id)` maps to the questions, by call id. `Chain.resume(id, answers)` (or
    `resume_stream`) checks that each waiting call has an `ElicitationAnswer` (an
    accepted one must fit the schema; else `InvalidElicitationAnswer`, and nothing is
    claimed), claims the turn (once: a second resume raises `ApprovalNotFound`), and
    settles each call: for `cancel`, the result the server gave the first time (it was
    told `cancel` then); for `accept` and `decline`, the tool call is **issued again**
    and, when the server asks the same question (same message and schema), it gets the
    answer, exactly once. The turn then goes on as after any resume.

    Limits, plainly: the re-issued call runs the server's tool again from the start (what
    it did before asking happens twice: use it with tools that ask first); a different
    or a second question in the re-issued call is answered `cancel`; the re-issued call
    runs the tool directly, not through the chain's `call_tool` hooks again (its approval
    was given before it first ran). The suspended turns are kept in memory (at most
    `max_pending`, the oldest dropped): resume in the same process, with the toolset
    still connected. A question is tied to its call only when it is the one call of that
    toolset running; with several at once (a parallel round), it is answered `cancel`.
    A round whose calls also wait for an approval cannot be resumed here.
    """

    def __init__(self, *, max_pending: int = 1000) -> None:
        if max_pending < 1:
            raise ChainConfigurationError("max_pending must be at least 1")
        self.max_pending = max_pending
        self._bound = False
        self._asked: dict[str, ElicitationRequest] = {}
        self._supplied: dict[str, tuple[ElicitationRequest, ElicitationAnswer]] = {}
        self._reissuing: set[str] = set()
        self._waiting: OrderedDict[str, _Waiting] = OrderedDict()

    def bind(self, placement: Placement) -> Advisor:
        self._bound = True
        return self

    # -- the toolset's handler --------------------------------------------------------------

    async def __call__(self, request: ElicitationRequest) -> ElicitationAnswer:
        """Answer the server now: the stored answer on a re-issued call, else `cancel`
        (and the question is recorded, for the call's result to become pending)."""
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
        """Run the call; if its server asked a question meanwhile, answer it `pending`."""
        call_id = invocation.call.id
        self._asked.pop(call_id, None)  # from an earlier call with this id: not this one's
        result = await next(invocation)
        asked = self._asked.pop(call_id, None)
        if asked is None:
            return result
        return ToolResult(
            content="Waiting for the user to answer the server's question.",
            outcome="pending",
            on_suspend=partial(self._save, call_id, _Question(asked, result)),
        )

    async def _save(self, call_id: str, question: _Question, suspension: Suspension) -> None:
        waiting = self._waiting.get(suspension.id)
        if waiting is None:
            waiting = self._waiting[suspension.id] = _Waiting(suspension, {})
            while len(self._waiting) > self.max_pending:
                dropped, _ = self._waiting.popitem(last=False)
                logger.warning("deferred elicitation %s dropped: over max_pending", dropped)
        waiting.questions[call_id] = question

    def questions(self, pending_id: str) -> dict[str, ElicitationRequest]:
        """The questions the suspended turn `pending_id` waits on, by call id (empty if
        it is not one of this link's)."""
        waiting = self._waiting.get(pending_id)
        if waiting is None:
            return {}
        return {call_id: q.request for call_id, q in waiting.questions.items()}

    async def resume_turn(
        self,
        pending_id: str,
        decisions: Mapping[str, Any],
        request: ChatRequest,
        tools: ToolPipeline,
    ) -> ChatRequest | None:
        """Check the answers, claim the turn and settle its calls (see the class);
        `None` if `pending_id` is not one of this link's."""
        waiting = self._waiting.get(pending_id)
        if waiting is None:
            return None
        answers = _checked(waiting, decisions)
        del self._waiting[pending_id]  # claimed: no await since the look-up
        suspension = waiting.suspension
        base = replace(
            suspension.request,
            messages=suspension.transcript,
            tool_context=request.tool_context or suspension.request.tool_context,
            resumption=None,
        )
        settled: list[ResumedCall] = []
        for call in suspension.calls:
            question = waiting.questions[call.id]
            start = time.perf_counter()
            answer = answers[call.id]
            if answer.action == "cancel":
                result = question.first
            else:
                result = await self._reissue(tools, base, call, question.request, answer)
            settled.append(
                ResumedCall(
                    call=call,
                    message=result.to_message(call),
                    outcome=result.outcome,
                    duration=time.perf_counter() - start,
                )
            )
        resumption = Resumption(id=pending_id, calls=tuple(settled))
        return replace(base.appended(*resumption.messages), resumption=resumption)

    async def _reissue(
        self,
        tools: ToolPipeline,
        request: ChatRequest,
        call: ToolCall,
        asked: ElicitationRequest,
        answer: ElicitationAnswer,
    ) -> ToolResult:
        prepared = tools.prepare(request, call)
        if isinstance(prepared, ToolResult):
            return prepared
        self._supplied[call.id] = (asked, answer)
        self._reissuing.add(call.id)
        try:
            return await tools.manager.invoke(prepared)
        finally:
            self._supplied.pop(call.id, None)
            self._reissuing.discard(call.id)
            self._asked.pop(call.id, None)


def _checked(waiting: _Waiting, decisions: Mapping[str, Any]) -> dict[str, ElicitationAnswer]:
    if not isinstance(decisions, Mapping):
        raise InvalidElicitationAnswer("answers must map each waiting call's id to an answer")
    others = [c.id for c in waiting.suspension.calls if c.id not in waiting.questions]
    if others:
        raise ChainConfigurationError(
            f"call(s) {', '.join(others)} of this turn wait for an approval, not an "
            "elicitation: a round waiting for both cannot be resumed"
        )
    expected = list(waiting.questions)
    unknown = sorted(str(k) for k in decisions if k not in waiting.questions)
    missing = [k for k in expected if k not in decisions]
    if unknown or missing:
        raise InvalidElicitationAnswer(
            "answers must be given for exactly the waiting calls "
            f"({', '.join(expected)}); unknown: {unknown or 'none'}, missing: {missing or 'none'}"
        )
    checked: dict[str, ElicitationAnswer] = {}
    for call_id in expected:
        answer = decisions[call_id]
        if not isinstance(answer, ElicitationAnswer) or answer.action not in (
            "accept",
            "decline",
            "cancel",
        ):
            raise InvalidElicitationAnswer(
                f"the answer for {call_id!r} must be an ElicitationAnswer, "
                f"not {type(answer).__name__}"
            )
        schema = waiting.questions[call_id].request.schema
        if answer.action == "accept" and schema is not None:
            errors = check_answer(dict(answer.content or {}), schema)
            if errors:
                raise InvalidElicitationAnswer(
                    f"the answer for {call_id!r} does not fit the requested schema: "
                    + "; ".join(errors)
                )
        checked[call_id] = answer
    return checked


__all__ = ["ConsoleElicitor", "DeferredElicitation", "InvalidElicitationAnswer", "check_answer"]
