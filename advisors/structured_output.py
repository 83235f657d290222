"""`StructuredOutputAdvisor`: the turn's answer, validated into a Python value."""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Sequence
from dataclasses import replace
from typing import Any, Generic, Literal, TypeAlias, TypeVar, cast, get_args, get_origin

from pydantic import PydanticSchemaGenerationError, PydanticUserError, TypeAdapter, ValidationError
from pydantic_core import ErrorDetails

from ..core.advisor import Placement
from ..core.arguments import (
    MAX_ARGUMENT_CHARS,
    MAX_ARGUMENT_DEPTH,
    ArgumentsError,
    parse_arguments,
)
from ..core.chain import Chain
from ..core.errors import AdvisorChainError, ChainConfigurationError, OutputSchemaRefused
from ..core.events import AnswerDiscarded
from ..core.messages import AssistantMessage, Message, SystemMessage, UserMessage
from ..core.model import supports_output_schema
from ..core.options import ChatOptions, OutputSchema
from ..core.request import ChatRequest
from ..core.response import ChatResponse
from ..core.turn import Proceed, StreamProceed, TurnAdvisor
from ..core.usage import Usage
from .text_transform import TextTransformAdvisor

T = TypeVar("T")

OutputMode: TypeAlias = Literal["auto", "native", "prompt"]
"""How `StructuredOutputAdvisor` asks for the schema: `native` sets
`ChatOptions.output_schema` (the provider puts it on the wire), `prompt` states it in the
system message, `auto` picks `native` when the chain's model says it supports it."""

INSTRUCTION = (
    "[structured output] When you give your final answer (after any tool calls you need), "
    "reply with one JSON value that matches the JSON schema {name} below, and nothing "
    "else: no other text, no code fences.\n{schema}"
)
"""The system instruction of the `prompt` mode (`{name}`, `{schema}`: compact JSON)."""

MAX_REPORTED_ERRORS = 20
"""At most this many validation errors are sent back to the model (and kept)."""

_MAX_MESSAGE_CHARS = 300
_FENCE = re.compile(r"\A```[\w-]*[ \t]*\n?(?P<body>.*?)\n?```\Z", re.S)
_NAME_CHARS = re.compile(r"[^A-Za-z0-9_-]+")


class StructuredOutputError(AdvisorChainError):
    """The answer still did not validate after every retry (or the model refused).

    `raw_text` is the last answer's text, `errors` its validation errors (pydantic's
    `ErrorDetails`: `type`, `loc`, `msg`; without the input), `attempts` how many answers
    were asked for, `usage` what they all cost, and `messages` the transcript the turn
    added: every attempt, each followed by the feedback the model got, all valid
    history (every tool call answered), so a caller can store it and go on.
    `finish_reason` is the last answer's (`content_filter`: a refusal, not retried).
    """

    def __init__(
        self,
        message: str,
        *,
        raw_text: str,
        errors: Sequence[ErrorDetails],
        attempts: int,
        messages: Sequence[Message],
        usage: Usage | None = None,
        finish_reason: str | None = None,
    ) -> None:
        super().__init__(message)
        self.raw_text = raw_text
        self.errors: tuple[ErrorDetails, ...] = tuple(errors)
        self.attempts = attempts
        self.messages: tuple[Message, ...] = tuple(messages)
        self.usage = usage if usage is not None else Usage()
        self.finish_reason = finish_reason


class StructuredOutputAdvisor(TurnAdvisor, Generic[T]):
    """Validates the turn's final answer as `output_type`; asks again on failure.

    `output_type` is a pydantic model, a dataclass, a TypedDict, `list[...]` of those, or
    any type pydantic validates. The validated value is `response.output` (also on the
    `ResponseCompleted` of a stream); `advisor.output(response)` and
    `response.output_as(T)` return it typed.

    Control flow of a turn (it sits outside the tool loop, so it sees the whole turn):

    1. Ask for the schema: with `mode="native"`, or `"auto"` when the chain's model says
       it honours it (`supports_output_schema(schema, with_tools=...)`, implemented by
       the providers), set `ChatOptions.output_schema` and let the provider put it on the
       wire; otherwise state the schema in the leading system message (once, even on a
       resumed turn). Neither stops the model from calling tools first.
    2. Call `next` (the tool loop and the model). A response that is not an answer to
       validate (it waits for an approval, was answered by tools directly with
       `return_direct`, or still asks for tools) passes on with `output=None`.
    3. Parse the answer's text (bounded like tool arguments: at most 4,000,000
       characters and 100 levels of nesting; a Markdown code fence around it is
       removed) and validate it. Valid: return the response with `output` set.
    4. Invalid: append the answer and a user message naming each error and where it is
       (pydantic's locations, `items.0.price`), and call `next` again, at most `retries`
       more times. On `stream`, the text of the rejected attempt has already been
       streamed: an `AnswerDiscarded` event marks it before the next attempt's events
       (`TurnAdvisor.discard`: this advisor is a `TurnAdvisor`, one `around` for both
       paths).
    5. Still invalid: raise `StructuredOutputError` with the last text, its errors and
       the turn's transcript. A refusal (`finish_reason="content_filter"`) that does not
       validate is raised at once: asking again would not change it.

    A server that refuses the schema on the wire (`core.errors.OutputSchemaRefused`, a
    provider's `OutputSchemaRefusedError`: llama-cpp-python's server answers
    `json_schema` with HTTP 500) under `mode="auto"`
    gets the first attempt again with the schema in the prompt, before anything was
    streamed, and this advisor asks in the prompt from then on; under `mode="native"`
    the error is raised.

    The response of a turn that needed retries holds every attempt and feedback message
    in `messages` and the usage of all of them. A schema whose root is not an object
    (`list[...]`) is asked for wrapped in an object (`{"items": [...]}`), as providers
    require; both the wrapped and the bare value are accepted.

    A chain refuses it inside the tool loop (after `ToolCallingAdvisor`: it would see
    every round) and after a text-rewriting link such as `RedactionAdvisor` (that link
    would rewrite the text after the value was validated from it).
    """

    def __init__(
        self,
        output_type: type[T],
        *,
        retries: int = 3,
        mode: OutputMode = "auto",
        name: str | None = None,
        strict: bool = True,
    ) -> None:
        if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
            raise ValueError("retries must be a non-negative integer")
        if mode not in ("auto", "native", "prompt"):
            raise ValueError("mode must be 'auto', 'native' or 'prompt'")
        self.output_type = output_type
        self.retries = retries
        self.mode: OutputMode = mode
        try:
            self._adapter: TypeAdapter[T] = TypeAdapter(output_type)
            schema = self._adapter.json_schema()
        except PydanticUserError as exc:  # its message says what to change
            raise TypeError(f"cannot validate {output_type!r}: {exc.message}") from None
        except PydanticSchemaGenerationError as exc:
            raise TypeError(f"cannot validate {output_type!r}: {exc.message}") from None
        self._wrap_key = _wrap_key(schema)
        self.output_schema = OutputSchema(
            name=name or _schema_name(output_type),
            schema=_wrapped(schema, self._wrap_key),
            strict=strict,
        )
        self.instruction = INSTRUCTION.format(
            name=self.output_schema.name,
            schema=json.dumps(self.output_schema.schema, separators=(",", ":")),
        )
        self._model: object = None
        self._options: tuple[ChatOptions, ChatOptions] | None = None  # (given, with schema)
        self._refused = False  # the model refused the schema on the wire

    def __repr__(self) -> str:
        return f"StructuredOutputAdvisor({self.output_schema.name}, mode={self.mode!r})"

    def bind(self, placement: Placement) -> StructuredOutputAdvisor[T]:
        """Refuse a place inside the tool loop or after a text-rewriting link; return a
        copy that knows this chain's model (to ask it whether it honours the schema)."""
        if placement.inside_tool_loop:
            raise ChainConfigurationError(
                "StructuredOutputAdvisor must come before the tool loop (ToolCallingAdvisor) "
                "in the chain: it validates the turn's final answer, and inside the loop it "
                "would see every round"
            )
        for earlier in placement.chain.advisors[: placement.index]:
            if isinstance(earlier, TextTransformAdvisor):
                raise ChainConfigurationError(
                    f"{earlier.name} comes before StructuredOutputAdvisor, so it would rewrite "
                    "the answer's text after the output was validated from it: place "
                    f"{earlier.name} after StructuredOutputAdvisor"
                )
        bound = copy.copy(self)
        model: object = placement.chain.model
        while isinstance(model, Chain):
            model = model.model
        bound._model = model
        bound._options = None
        bound._refused = False
        return bound

    def output(self, response: ChatResponse) -> T:
        """`response.output`, typed; `TypeError` if the response has none."""
        if response.output is None:
            raise TypeError(
                "this response has no structured output (a turn waiting for approval, or "
                "answered by tools directly, has none)"
            )
        return cast(T, response.output)

    def validate(self, text: str) -> T:
        """The value `text` holds; `StructuredOutputError` (with no transcript) if none."""
        value, errors = self._validate(text)
        if errors:
            raise StructuredOutputError(
                self._summary(errors), raw_text=text, errors=errors, attempts=1, messages=()
            )
        return cast(T, value)

    async def around(self, request: ChatRequest, proceed: Proceed) -> ChatResponse:
        """The turn's attempts (see the class docstring): each runs the rest of the chain;
        a rejected one is discarded (`AnswerDiscarded` on the stream path) before the next."""
        attempts = _Attempts(self, self._prepared(request))
        while True:
            try:
                response = await proceed(attempts.request)
            except OutputSchemaRefused:
                streamed = isinstance(proceed, StreamProceed) and proceed.streamed
                if not self._fall_back(attempts, streamed=streamed):
                    raise
                attempts.request = self._prepared(request)
                continue
            outcome = attempts.judge(response)
            if isinstance(outcome, ChatResponse):
                return outcome
            await self.discard(proceed, outcome)

    # -- asking ---------------------------------------------------------------------------

    def native(self, request: ChatRequest) -> bool:
        """Whether `request` gets the schema as `ChatOptions.output_schema` (else in the
        prompt): `mode`, and for `auto` what the chain's model says (and whether it
        refused the schema before)."""
        if self.mode != "auto":
            return self.mode == "native"
        if self._refused:
            return False
        return supports_output_schema(
            self._model, self.output_schema, with_tools=bool(request.tools)
        )

    def _fall_back(self, attempts: _Attempts, *, streamed: bool) -> bool:
        """Whether a refusal of the schema on the wire is answered by asking in the
        prompt: under `auto`, on the first attempt, before any of it was streamed."""
        if self.mode != "auto" or streamed or attempts.attempt or attempts.added:
            return False
        if attempts.request.options.output_schema != self.output_schema:
            return False
        self._refused = True
        return True

    def _prepared(self, request: ChatRequest) -> ChatRequest:
        if self.native(request):
            options = request.options
            if options.output_schema == self.output_schema:
                return request
            cached = self._options
            if cached is None or cached[0] is not options:  # usually the chain's, every turn
                cached = self._options = (options, options.merged(output_schema=self.output_schema))
            return replace(request, options=cached[1])
        messages = request.messages
        if messages and isinstance(messages[0], SystemMessage):
            first = messages[0]
            if self.instruction in first.content:
                return request  # a resumed turn's transcript has it already
            system = SystemMessage(content=f"{first.content}\n\n{self.instruction}")
            return request.with_messages((system, *messages[1:]))
        return request.with_messages((SystemMessage(content=self.instruction), *messages))

    # -- judging --------------------------------------------------------------------------

    def _validate(self, text: str) -> tuple[object, list[ErrorDetails]]:
        if len(text) > MAX_ARGUMENT_CHARS:
            message = (
                f"the answer is too long ({len(text)} characters; at most {MAX_ARGUMENT_CHARS})"
            )
            return None, [_error("too_long", message)]
        body = text.strip()
        fenced = _FENCE.match(body)
        if fenced:
            body = fenced["body"].strip()
        if not body:
            return None, [_error("empty", "the answer is empty: it must be one JSON value")]
        key = self._wrap_key
        if key is None and _brackets(body) <= MAX_ARGUMENT_DEPTH:
            # too few brackets to nest too deeply: pydantic reads the JSON itself, once
            try:
                return self._adapter.validate_json(body), []
            except ValidationError as exc:
                return None, self._errors(exc, ())
        try:
            value = parse_arguments(body)
        except ArgumentsError as exc:
            return None, [_error("json_invalid", f"the answer is {exc}")]
        prefix: tuple[str | int, ...] = ()
        if key is not None and isinstance(value, dict) and len(value) == 1 and key in value:
            value, prefix = value[key], (key,)
            body = json.dumps(value)
        try:
            return self._adapter.validate_json(body), []
        except ValidationError as exc:
            return None, self._errors(exc, prefix)

    @staticmethod
    def _errors(exc: ValidationError, prefix: tuple[str | int, ...]) -> list[ErrorDetails]:
        errors = exc.errors(include_url=False, include_input=False)[:MAX_REPORTED_ERRORS]
        if errors and errors[0]["type"] == "json_invalid":
            reason = errors[0]["msg"].removeprefix("Invalid JSON: ")[:_MAX_MESSAGE_CHARS]
            return [_error("json_invalid", f"the answer is not valid JSON ({reason})")]
        for error in errors:
            error["loc"] = (*prefix, *error["loc"])
            error["msg"] = error["msg"][:_MAX_MESSAGE_CHARS]
        return errors

    def _feedback(self, errors: Sequence[ErrorDetails], response: ChatResponse) -> UserMessage:
        lines = [
            f"Your answer does not match the JSON schema {self.output_schema.name}:",
            *(f"- {_where(e['loc'])}: {e['msg']}" for e in errors),
        ]
        if response.finish_reason == "length":
            lines.append("It was cut off at the token limit: give a shorter answer.")
        lines.append("Answer again with only the corrected JSON value.")
        return UserMessage(content="\n".join(lines))

    def _summary(self, errors: Sequence[ErrorDetails]) -> str:
        first = errors[0]
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        return f"{_where(first['loc'])}: {first['msg']}{more}"


class _Attempts:
    """The state of one turn: the request of the next attempt, what was added, usage."""

    __slots__ = ("added", "advisor", "attempt", "request", "usage")

    def __init__(self, advisor: StructuredOutputAdvisor[Any], request: ChatRequest) -> None:
        self.advisor = advisor
        self.request = request
        self.added: list[Message] = []
        self.usage = Usage()
        self.attempt = 0

    def judge(self, response: ChatResponse) -> ChatResponse | AnswerDiscarded:
        """The turn's response if `response` settles it; else the marker of a retry
        (the next attempt's request is ready). Raises once retries are used up."""
        self.attempt += 1
        self.usage = self.usage + response.usage
        if (
            response.tool_calls
            or response.deferred
            or response.finish_reason in ("deferred", "return_direct")
        ):
            return self._final(response, None)
        advisor = self.advisor
        value, errors = advisor._validate(response.text)
        if not errors:
            return self._final(response, value)
        feedback = advisor._feedback(errors, response)
        refused = response.finish_reason == "content_filter"
        if self.attempt > advisor.retries or refused:
            why = "the model refused" if refused else f"after {self.attempt} attempt(s)"
            raise StructuredOutputError(
                f"the answer does not match {advisor.output_schema.name} ({why}): "
                f"{advisor._summary(errors)}",
                raw_text=response.text,
                errors=errors,
                attempts=self.attempt,
                messages=(*self.added, *response.messages),
                usage=self.usage,
                finish_reason=response.finish_reason,
            )
        new = _not_yet_in(self.request.messages, response.messages)
        self.added.extend(response.messages)
        self.added.append(feedback)
        self.request = self.request.appended(*new, feedback)
        return AnswerDiscarded(reason=advisor._summary(errors), attempt=self.attempt)

    def _final(self, response: ChatResponse, value: object) -> ChatResponse:
        if not self.added:
            return replace(response, output=value) if value is not None else response
        return replace(
            response,
            messages=(*self.added, *response.messages),
            usage=self.usage,
            output=value,
        )


def _not_yet_in(transcript: Sequence[Message], added: Sequence[Message]) -> Sequence[Message]:
    """`added` without its first messages that already end `transcript` (a resumed
    turn's response starts with the results its request already carries)."""
    if not added or isinstance(added[0], AssistantMessage):
        return added
    for k in range(min(len(transcript), len(added)), 0, -1):
        if tuple(transcript[-k:]) == tuple(added[:k]):
            return added[k:]
    return added


def _brackets(text: str) -> int:
    return text.count("[") + text.count("{")


def _error(kind: str, message: str) -> ErrorDetails:
    return {"type": kind, "loc": (), "msg": message, "input": None}


def _where(loc: Sequence[str | int]) -> str:
    return ".".join(str(p) for p in loc) if loc else "(the whole answer)"


def _wrap_key(schema: dict[str, Any]) -> str | None:
    """The property a non-object root is wrapped in (providers want an object)."""
    if schema.get("type") == "object" or (
        "properties" in schema and schema.get("type") in (None, "object")
    ):
        return None
    ref = schema.get("$ref")
    if isinstance(ref, str) and len(schema) <= 2:  # a model pydantic put in $defs
        target = schema.get("$defs", {}).get(ref.rsplit("/", 1)[-1], {})
        if isinstance(target, dict) and target.get("type") == "object":
            return None
    return "items" if schema.get("type") == "array" else "value"


def _wrapped(schema: dict[str, Any], key: str | None) -> dict[str, Any]:
    if key is None:
        return schema
    inner = {k: v for k, v in schema.items() if k != "$defs"}
    wrapper: dict[str, Any] = {
        "type": "object",
        "properties": {key: inner},
        "required": [key],
        "additionalProperties": False,
    }
    if "$defs" in schema:
        wrapper["$defs"] = schema["$defs"]
    return wrapper


def _schema_name(output_type: object) -> str:
    origin = get_origin(output_type)
    if origin is not None:
        parts = [getattr(origin, "__name__", "value")]
        parts.extend(getattr(a, "__name__", "value") for a in get_args(output_type))
        raw = "_".join(parts)
    else:
        raw = getattr(output_type, "__name__", "output")
    name = _NAME_CHARS.sub("_", raw).strip("_") or "output"
    return name[:64]


__all__ = [
    "INSTRUCTION",
    "MAX_REPORTED_ERRORS",
    "OutputMode",
    "StructuredOutputAdvisor",
    "StructuredOutputError",
]
