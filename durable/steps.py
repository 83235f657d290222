"""The engine-neutral seam between a chain's links and a durable-execution engine.

A durable runner (Temporal, DBOS) runs a chain's links as workflow code and every I/O as a
*step* (a Temporal activity, a DBOS step): something the engine records, retries and never
runs again on replay. This module is what the runners share; it knows no engine.

Control flow. The worker owns the real things: the chain as its factory builds it, with the
real model and tools, the tool-context values, and the effects ledger. The workflow side
builds the same chain and rebuilds it with `durable_chain(chain, runner, run_id=...)`:

- its model becomes a `DurableModel` (a `WrapperModel`): `call` runs the step
  `advisorchain.model.call`, `stream` the step `advisorchain.model.stream`;
- each tool given to the chain becomes a `DurableTool`: the same definition, flags and
  argument validation (so the transcript is the in-process one), whose execution runs the
  step `advisorchain.tool.call` (`advisorchain.mcp.call` for an MCP tool);
- a `MemoryAdvisor` reads and writes its store through steps (`DurableMemoryStore`), a
  `ToolSearchAdvisor` embeds through steps (`DurableEmbedder`, see `durable.search`);
- the links (approval, tool loop, budget, structured output, ...) stay as they are and run
  as workflow code: they decide, the steps do.

MCP toolsets the worker holds (`toolsets=` of a runner, by name) are listed by each turn:
the runner's `DurableToolsets.tools()` runs `advisorchain.mcp.list` per toolset and gives
the turn their tools (`chain.call(..., tools=...)`), whose calls run as `advisorchain.mcp.call`.

The runner's `StepRunner.run_step(name, payload, result_type)` hands the step to the engine;
the engine calls, on a worker, `StepExecutor.execute(name, payload)`, which looks the model
or tool up by name in the worker's registry and does the work. Tools that a link contributes
(`Advisor.tools`) are not rebuilt: they run as workflow code.

Step names are stable (they name activities and steps in recorded histories):

- `advisorchain.model.call`: one model call (`ModelCallInput` -> `ModelCallOutput`);
- `advisorchain.model.stream`: one streamed model call, its deltas published live through
  the executor's `publish` and returned in order (`ModelCallInput` -> `ModelCallOutput`);
- `advisorchain.tool.call`: one tool execution (`ToolCallInput` -> `ToolCallOutput`);
- `advisorchain.mcp.list`: the tools an MCP toolset offers (`McpListInput` -> `McpListOutput`,
  at most `MAX_LISTED_TOOLS` tools and `MAX_LISTING_BYTES`);
- `advisorchain.mcp.call`: one MCP tool call (`ToolCallInput` -> `ToolCallOutput`);
- `advisorchain.memory.load`: a conversation's messages (`MemoryLoadInput` -> `MemoryLoadOutput`);
- `advisorchain.memory.save`: append a turn's messages (`MemorySaveInput` -> `MemorySaveOutput`);
- `advisorchain.embeddings.embed`: embeddings for tool search (`EmbedInput` -> `EmbedOutput`,
  at most `MAX_EMBED_TEXTS` vectors of `MAX_EMBED_DIMENSION` float32 values).

Payloads are pydantic models with a `version` (`SCHEMA_VERSION`); messages travel as the JSON
of `core.messages.dump_messages`. A payload of a newer version than this code reads is
refused (`UnsupportedPayloadVersion`), an older one is read as it was written: a history
recorded by this version replays after the next.

Effects once. A tool that is neither `read_only` nor `idempotent` has effects: before it
runs, the executor claims `(run_id, call_id)` in its `EffectsLedger`; `done` answers with the
recorded result without running it, `unknown` (claimed before, never completed: a crash
between) answers with `UNKNOWN_OUTCOME` for the model, never running it again. Read-only and
idempotent tools may run again on a retry.
"""

from __future__ import annotations

import base64
import hashlib
import itertools
import json
import struct
import time
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Collection,
    Iterator,
    Mapping,
    Sequence,
)
from dataclasses import dataclass, fields, replace
from typing import Any, Literal, Protocol, TypeVar, runtime_checkable

import pydantic_core
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ..advisors.approval import ApprovalAdvisor, InMemoryApprovalStore
from ..advisors.approval.types import arguments_fingerprint
from ..advisors.memory import MemoryAdvisor
from ..advisors.tool_search import ToolSearchAdvisor
from ..core.advisor import Advisor
from ..core.chain import Chain
from ..core.context import ToolContext
from ..core.deferred import Approve, DecisionKind, DeferredCall, Reject, Result
from ..core.errors import AdvisorChainError, ChainConfigurationError
from ..core.events import (
    AnswerDiscarded,
    ReasoningDelta,
    ResponseCompleted,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
    ToolCallFinished,
    ToolCallStarted,
    ToolProgress,
)
from ..core.invocation import ToolResult
from ..core.messages import (
    Message,
    ToolCall,
    ToolMessage,
    dump_messages,
    load_messages,
)
from ..core.model import ChatModel, WrapperModel
from ..core.options import ChatOptions, OutputSchema
from ..core.request import ChatRequest
from ..core.response import ChatResponse
from ..core.scrub import describe_exception
from ..core.tools import Tool, ToolContent
from ..core.usage import Usage
from ..providers.http.retry import RetryPolicy
from .search import durable_search, search_embedders

SCHEMA_VERSION = 1
"""The version of every payload this code writes (and the newest it reads)."""

STEP_MODEL_CALL = "advisorchain.model.call"
STEP_MODEL_STREAM = "advisorchain.model.stream"
STEP_TOOL_CALL = "advisorchain.tool.call"
STEP_MCP_LIST = "advisorchain.mcp.list"
STEP_MCP_CALL = "advisorchain.mcp.call"
STEP_MEMORY_LOAD = "advisorchain.memory.load"
STEP_MEMORY_SAVE = "advisorchain.memory.save"
STEP_EMBED = "advisorchain.embeddings.embed"

STEP_NAMES = (
    STEP_MODEL_CALL,
    STEP_MODEL_STREAM,
    STEP_TOOL_CALL,
    STEP_MCP_LIST,
    STEP_MCP_CALL,
    STEP_MEMORY_LOAD,
    STEP_MEMORY_SAVE,
    STEP_EMBED,
)
"""Every step name, as engines register them."""

UNKNOWN_OUTCOME = (
    "Error: the outcome of this call is unknown: it was started before a worker failed and "
    "is not run again. It may or may not have taken effect: do not assume either; check "
    "before trying again."
)
"""What the model reads for a call with effects that started and never completed, on
every engine (the ledger's `unknown` and a step's `unknown` status read the same)."""

DEFAULT_MODEL = "model"
"""The registry key of a chain's own model."""

MAX_LISTED_TOOLS = 10_000
"""The most tools one `advisorchain.mcp.list` step answers (as many as `McpToolset` lists)."""
MAX_LISTED_TOOL_BYTES = 64 * 1024
"""The largest listed tool: the JSON of its name, description, schema and metadata."""
MAX_LISTING_BYTES = 8 * 1024 * 1024
"""The largest listing one `advisorchain.mcp.list` step answers (its tools' JSON)."""
MAX_EMBED_TEXTS = 32
"""The most texts (and vectors) of one `advisorchain.embeddings.embed` step."""
MAX_EMBED_DIMENSION = 4096
"""The most values of one vector an `advisorchain.embeddings.embed` step answers."""
_FLOAT32_MAX = 3.4028234663852886e38


class UnsupportedPayloadVersion(AdvisorChainError, ValueError):
    """A step payload written by a newer version of advisorchain than this one (pydantic
    reports it inside its `ValidationError`, a `ValueError` too)."""


def call_fingerprint(name: str, arguments: str) -> str:
    """A digest of a call (tool name and arguments, key order not counting): what a claim
    is bound to. Arguments that are not JSON count as their raw text."""
    try:
        canonical = json.dumps(
            json.loads(arguments), sort_keys=True, separators=(",", ":"), ensure_ascii=False
        )
    except (ValueError, RecursionError):
        canonical = "raw:" + arguments
    text = name + "\x00" + canonical
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


class UnknownStep(AdvisorChainError, LookupError):
    """A step name, model or tool the worker's registry does not know."""


class StepLimitExceeded(AdvisorChainError, ValueError):
    """What a step would answer is past the seam's bounds (a toolset's listing, an
    embedder's vectors: data from outside): refused on the worker, so workflow code and
    the engine's history never hold it."""


# -- payloads ---------------------------------------------------------------------------------


class StepPayload(BaseModel):
    """The base of every step's input and output: frozen, no unknown fields, versioned."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    version: int = SCHEMA_VERSION

    @field_validator("version")
    @classmethod
    def _readable(cls, value: int) -> int:
        if value > SCHEMA_VERSION:
            raise UnsupportedPayloadVersion(
                f"a step payload of version {value}; this advisorchain reads up to "
                f"{SCHEMA_VERSION}: upgrade the worker"
            )
        return value


class ToolSpec(StepPayload):
    """A tool's definition, as the model is told it."""

    name: str
    description: str
    parameters: dict[str, Any]


class ModelCallInput(StepPayload):
    """One model call: the model's registry key, the transcript (`dump_messages` JSON), the
    options (`options_to_json`) and the tools' definitions."""

    run_id: str
    model: str = DEFAULT_MODEL
    messages: str
    options: dict[str, Any] = {}
    tools: tuple[ToolSpec, ...] = ()
    conversation_id: str | None = None


class ModelCallOutput(StepPayload):
    """A model's answer (`response_to_json`); for a stream, its deltas in order
    (`event_to_json`) and the attempt that produced them."""

    response: dict[str, Any]
    events: tuple[dict[str, Any], ...] = ()
    attempt: int = 1


class ToolCallInput(StepPayload):
    """One tool execution: the tool's name, the call, its validated arguments in JSON form,
    and what its `ToolContext` carries besides the worker's values."""

    run_id: str
    tool: str
    call_id: str
    arguments: dict[str, Any]
    conversation_id: str | None = None
    decision: dict[str, Any] | None = None
    state: Any = None
    effects: Literal["read_only", "idempotent", "effects"] = "effects"


class ToolCallOutput(StepPayload):
    """What a tool execution produced: `ok` (its content, as a `ToolMessage`'s JSON),
    `error` (the exception's type name and scrubbed message), `deferred` (`ToolResult.defer`'s
    kind, metadata, accepted decisions, state and result schema) or `unknown`."""

    status: Literal["ok", "error", "deferred", "unknown"]
    content: str | None = None
    error_type: str | None = None
    error_message: str | None = None
    kind: str | None = None
    metadata: dict[str, Any] | None = None
    accepts: tuple[DecisionKind, ...] = ()
    state: Any = None
    result_schema: dict[str, Any] | None = None


class ListedTool(ToolSpec):
    """A tool as `advisorchain.mcp.list` lists it: its definition, the flags the links read
    in workflow code (approval, effects, order, timeout) and its metadata."""

    requires_approval: bool = False
    read_only: bool = False
    idempotent: bool = False
    sequential: bool = False
    timeout: float | None = None
    metadata: dict[str, Any] = {}


class McpListInput(StepPayload):
    """The tools of the MCP toolset registered under `toolset`; `known` is the fingerprint
    of the listing the workflow holds (none yet: `None`)."""

    toolset: str
    known: str | None = None


class McpListOutput(StepPayload):
    """An MCP toolset's tools and the listing's fingerprint; `unchanged` (and no tools) when
    the fingerprint is the input's `known` one."""

    fingerprint: str
    tools: tuple[ListedTool, ...] = Field(default=(), max_length=MAX_LISTED_TOOLS)
    unchanged: bool = False


class MemoryLoadInput(StepPayload):
    """A conversation's stored messages, from the memory store registered under `store`."""

    store: str
    conversation_id: str


class MemoryLoadOutput(StepPayload):
    """Messages, as `dump_messages` JSON."""

    messages: str


class MemorySaveInput(StepPayload):
    """Messages to append to a conversation (`dump_messages` JSON)."""

    store: str
    conversation_id: str
    messages: str


class MemorySaveOutput(StepPayload):
    """How many messages were appended."""

    appended: int


class EmbedInput(StepPayload):
    """Texts to embed with the embedder registered under `embedder`."""

    embedder: str
    texts: tuple[str, ...] = Field(max_length=MAX_EMBED_TEXTS)


class EmbedOutput(StepPayload):
    """One vector per text, in order, each `dimension` float32 values packed little-endian
    in base64 (`pack_vectors`): a quarter of the size of JSON floats in a history."""

    dimension: int = Field(ge=0, le=MAX_EMBED_DIMENSION)
    vectors: tuple[str, ...] = Field(max_length=MAX_EMBED_TEXTS)

    @model_validator(mode="after")
    def _sized(self) -> EmbedOutput:
        size = 4 * ((4 * self.dimension + 2) // 3)  # base64 of `dimension` float32s
        if any(len(v) != size for v in self.vectors):
            raise ValueError(f"a vector is not {self.dimension} packed float32 values")
        return self


P = TypeVar("P", bound=StepPayload)


# -- the runner (workflow side) and the ledger (worker side) ----------------------------------


@runtime_checkable
class StepRunner(Protocol):
    """Runs a step through an engine, from workflow code: a Temporal activity, a DBOS step.

    `run_step` returns the step's output validated as `result_type`; a step the engine gave
    up on raises the engine's error (the turn fails, the workflow records it).
    """

    async def run_step(self, name: str, payload: StepPayload, result_type: type[P]) -> P:
        """Run step `name` with `payload` on a worker; its output."""
        ...


@dataclass(frozen=True, slots=True)
class Claim:
    """What the ledger says of a call with effects: `claimed` (run it now, then
    `complete`), `done` (it ran: `result` is what `complete` recorded), `unknown` (claimed
    before and never completed: it may have taken effect) or `conflict` (the id was claimed
    by a different call: another tool or other arguments)."""

    status: Literal["claimed", "done", "unknown", "conflict"]
    result: str | None = None


@runtime_checkable
class EffectsLedger(Protocol):
    """Claimed/done marks per (run id, call id), durable across workers
    (`advisorchain.durable.ledger` has SQLite and PostgreSQL ones)."""

    async def claim(self, run_id: str, call_id: str, fingerprint: str) -> Claim:
        """Claim the call atomically: `claimed` exactly once across workers; bound to
        `fingerprint` (`call_fingerprint`), so another call under the id is a `conflict`."""
        ...

    async def complete(self, run_id: str, call_id: str, result: str) -> None:
        """Record that the claimed call finished with `result` (a step output's JSON)."""
        ...


@runtime_checkable
class ToolSource(Protocol):
    """A toolset a worker holds for the step `advisorchain.mcp.list`: an `McpToolset`
    (connected), or anything with a `name` (its registry key) and `tools()`."""

    name: str

    async def tools(self) -> list[Tool]:
        """Its tools now."""
        ...


# -- conversions ------------------------------------------------------------------------------


def messages_to_json(messages: Sequence[Message]) -> str:
    """Messages as the JSON text payloads carry."""
    return dump_messages(messages).decode()


def messages_from_json(text: str) -> tuple[Message, ...]:
    """Messages from `messages_to_json` text."""
    return load_messages(text)


def options_to_json(options: ChatOptions) -> dict[str, Any]:
    """`ChatOptions` as JSON values (the fields that are set)."""
    values: dict[str, Any] = {}
    for field in fields(options):
        name = field.name
        value = getattr(options, name)
        if name == "output_schema" and options.output_schema is not None:
            values[name] = options.output_schema.to_dict()
        elif name == "extra":
            if value:
                values[name] = pydantic_core.to_jsonable_python(dict(value))
        elif value is not None:
            values[name] = list(value) if isinstance(value, tuple) else value
    return values


def options_from_json(values: Mapping[str, Any]) -> ChatOptions:
    """The `ChatOptions` that `options_to_json` wrote."""
    kwargs = dict(values)
    if "output_schema" in kwargs:
        kwargs["output_schema"] = OutputSchema.from_dict(kwargs["output_schema"])
    if "stop" in kwargs:
        kwargs["stop"] = tuple(kwargs["stop"])
    return ChatOptions(**kwargs)


def usage_to_json(usage: Usage) -> dict[str, int]:
    """`Usage` as JSON (its counts, flat: no `dataclasses.asdict` and its deep copies, on
    every model call)."""
    return {field.name: getattr(usage, field.name) for field in fields(usage)}


def usage_from_json(values: Mapping[str, Any]) -> Usage:
    """`Usage` from `usage_to_json`."""
    return Usage(**{k: int(v) for k, v in values.items()})


def decision_to_json(decision: Any) -> dict[str, Any]:
    """A decision (`Approve`, `Reject`, `Result`, or a mapping of nested ones) as JSON."""
    if isinstance(decision, Approve):
        return {
            "type": "approve",
            "arguments": None
            if decision.arguments is None
            else pydantic_core.to_jsonable_python(dict(decision.arguments)),
            "by": decision.by,
            "remember": decision.remember,
        }
    if isinstance(decision, Reject):
        return {"type": "reject", "reason": decision.reason, "by": decision.by}
    if isinstance(decision, Result):
        return {"type": "result", "value": pydantic_core.to_jsonable_python(decision.value)}
    if isinstance(decision, Mapping):
        return {
            "type": "decisions",
            "decisions": {str(k): decision_to_json(v) for k, v in decision.items()},
        }
    raise TypeError(f"{type(decision).__name__} is not a decision")


def decision_from_json(values: Mapping[str, Any]) -> Any:
    """The decision `decision_to_json` wrote."""
    kind = values.get("type")
    if kind == "approve":
        return Approve(arguments=values.get("arguments"), by=values.get("by"),
                       remember=values.get("remember"))  # fmt: skip
    if kind == "reject":
        return Reject(reason=str(values.get("reason", "rejected")), by=values.get("by"))
    if kind == "result":
        return Result(values.get("value"))
    if kind == "decisions":
        return {k: decision_from_json(v) for k, v in dict(values["decisions"]).items()}
    raise ValueError(f"not a decision: {kind!r}")


def deferred_to_json(call: DeferredCall) -> dict[str, Any]:
    """A `DeferredCall` as JSON."""
    return {
        "call": call.call.model_dump(mode="json"),
        "kind": call.kind,
        "metadata": pydantic_core.to_jsonable_python(dict(call.metadata), fallback=repr),
        "accepts": list(call.accepts),
        "nested": [deferred_to_json(n) for n in call.nested],
    }


def deferred_from_json(values: Mapping[str, Any]) -> DeferredCall:
    """The `DeferredCall` that `deferred_to_json` wrote."""
    accepts: tuple[DecisionKind, ...] = tuple(values.get("accepts") or ())
    return DeferredCall(
        call=ToolCall.model_validate(values["call"]),
        kind=str(values["kind"]),
        metadata=dict(values.get("metadata") or {}),
        nested=tuple(deferred_from_json(n) for n in values.get("nested") or ()),
        accepts=accepts,
    )


def response_to_json(response: ChatResponse) -> dict[str, Any]:
    """A `ChatResponse` as JSON: messages, finish reason, usage, model, id, deferred calls
    and its structured output in JSON form (`None` when it has none)."""
    return {
        "messages": json.loads(dump_messages(response.messages)),
        "finish_reason": response.finish_reason,
        "usage": usage_to_json(response.usage),
        "model": response.model,
        "id": response.id,
        "deferred": [deferred_to_json(d) for d in response.deferred],
        "output": pydantic_core.to_jsonable_python(response.output, fallback=repr),
    }


def response_from_json(values: Mapping[str, Any]) -> ChatResponse:
    """The `ChatResponse` that `response_to_json` wrote (its output as JSON values)."""
    messages = load_messages(json.dumps(values["messages"]))
    deferred = tuple(deferred_from_json(d) for d in values.get("deferred") or ())
    return ChatResponse(
        messages=messages,
        finish_reason=str(values.get("finish_reason", "stop")),
        usage=usage_from_json(values.get("usage") or {}),
        model=values.get("model"),
        id=values.get("id"),
        deferred=deferred,
        output=values.get("output"),
    )


def _message_json(message: Message) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(dump_messages([message]))[0]
    return data


def _message_from(values: Mapping[str, Any]) -> Message:
    return load_messages(json.dumps([values]))[0]


def event_to_json(event: StreamEvent) -> dict[str, Any]:
    """A stream event as JSON, with a `type`."""
    if isinstance(event, TextDelta):
        return {"type": "text", "text": event.text}
    if isinstance(event, ReasoningDelta):
        return {"type": "reasoning", "text": event.text, "index": event.index}
    if isinstance(event, ToolCallDelta):
        return {
            "type": "tool_call_delta",
            "index": event.index,
            "id": event.id,
            "name": event.name,
            "arguments": event.arguments,
            "provider_data": None if event.provider_data is None else dict(event.provider_data),
        }
    if isinstance(event, ToolCallStarted):
        return {"type": "tool_call_started", "call": event.call.model_dump(mode="json")}
    if isinstance(event, ToolCallFinished):
        return {
            "type": "tool_call_finished",
            "call": event.call.model_dump(mode="json"),
            "result": _message_json(event.result),
            "outcome": event.outcome,
            "duration": event.duration,
        }
    if isinstance(event, AnswerDiscarded):
        return {"type": "answer_discarded", "reason": event.reason, "attempt": event.attempt}
    if isinstance(event, ToolProgress):
        return {
            "type": "tool_progress",
            "call_id": event.call_id,
            "progress": event.progress,
            "total": event.total,
            "message": event.message,
            "event": None if event.event is None else event_to_json(event.event),
        }
    if isinstance(event, ResponseCompleted):
        return {"type": "response_completed", "response": response_to_json(event.response)}
    raise TypeError(f"not a stream event: {type(event).__name__}")


def event_from_json(values: Mapping[str, Any]) -> StreamEvent:
    """The stream event `event_to_json` wrote."""
    kind = values.get("type")
    if kind == "text":
        return TextDelta(values["text"])
    if kind == "reasoning":
        return ReasoningDelta(values["text"], int(values.get("index", 0)))
    if kind == "tool_call_delta":
        return ToolCallDelta(
            int(values["index"]),
            values.get("id"),
            values.get("name"),
            values.get("arguments", ""),
            values.get("provider_data"),
        )
    if kind == "tool_call_started":
        return ToolCallStarted(ToolCall.model_validate(values["call"]))
    if kind == "tool_call_finished":
        result = _message_from(values["result"])
        assert isinstance(result, ToolMessage)
        return ToolCallFinished(
            ToolCall.model_validate(values["call"]),
            result,
            str(values["outcome"]),
            float(values.get("duration", 0.0)),
        )
    if kind == "answer_discarded":
        return AnswerDiscarded(str(values["reason"]), int(values["attempt"]))
    if kind == "tool_progress":
        inner = values.get("event")
        return ToolProgress(
            str(values["call_id"]),
            values.get("progress"),
            values.get("total"),
            values.get("message"),
            None if inner is None else event_from_json(inner),
        )
    if kind == "response_completed":
        return ResponseCompleted(response_from_json(values["response"]))
    raise ValueError(f"not a stream event: {kind!r}")


def content_to_json(name: str, call_id: str, content: ToolContent) -> str:
    """A tool's content (text or parts) as the JSON of the `ToolMessage` carrying it."""
    return messages_to_json([ToolMessage(tool_call_id=call_id, name=name, content=content)])


def content_from_json(text: str) -> ToolContent:
    """The content `content_to_json` wrote."""
    (message,) = load_messages(text)
    assert isinstance(message, ToolMessage)
    return message.content


def pack_vectors(vectors: Sequence[Sequence[float]], texts: int) -> EmbedOutput:
    """An embedder's answer for `texts` texts as the step's output; `StepLimitExceeded`
    unless it is one vector per text, all of one dimension (1 to `MAX_EMBED_DIMENSION`),
    every value a finite float32."""
    rows = [[float(x) for x in v] for v in vectors]
    if len(rows) != texts:
        raise StepLimitExceeded(f"the embedder answered {len(rows)} vectors for {texts} texts")
    dimension = len(rows[0]) if rows else 0
    if rows and not 0 < dimension <= MAX_EMBED_DIMENSION:
        raise StepLimitExceeded(
            f"the embedder answered vectors of {dimension} values; a step takes 1 to "
            f"{MAX_EMBED_DIMENSION}"
        )
    for row in rows:
        if len(row) != dimension or not all(abs(x) <= _FLOAT32_MAX for x in row):
            raise StepLimitExceeded(
                "the embedder answered vectors of different sizes or values that are no "
                "finite float32"
            )
    packed = (base64.b64encode(struct.pack(f"<{dimension}f", *row)).decode() for row in rows)
    return EmbedOutput(dimension=dimension, vectors=tuple(packed))


def unpack_vectors(output: EmbedOutput) -> list[list[float]]:
    """The vectors `pack_vectors` packed."""
    form = f"<{output.dimension}f"
    return [list(struct.unpack(form, base64.b64decode(v, validate=True))) for v in output.vectors]


def listed_tool(tool: Tool) -> ListedTool:
    """`tool` as `advisorchain.mcp.list` lists it."""
    return ListedTool(
        name=tool.name,
        description=tool.description,
        parameters=dict(tool.definition.parameters),
        requires_approval=tool.requires_approval,
        read_only=tool.read_only,
        idempotent=tool.idempotent,
        sequential=tool.sequential,
        timeout=tool.timeout,
        metadata=pydantic_core.to_jsonable_python(dict(tool.metadata), fallback=repr),
    )


def listing_of(name: str, tools: Sequence[Tool], known: str | None = None) -> McpListOutput:
    """The output of `advisorchain.mcp.list` for the toolset `name`'s `tools`: refused
    (`StepLimitExceeded`) past `MAX_LISTED_TOOLS` tools, a tool past `MAX_LISTED_TOOL_BYTES`
    or all past `MAX_LISTING_BYTES`; without tools when its fingerprint is `known`."""
    if len(tools) > MAX_LISTED_TOOLS:
        raise StepLimitExceeded(
            f"the toolset {name!r} lists {len(tools)} tools; a step takes {MAX_LISTED_TOOLS}"
        )
    listed = tuple(listed_tool(t) for t in tools)
    digest = hashlib.sha256()
    total = 0
    for spec in listed:
        data = spec.model_dump_json().encode()
        if len(data) > MAX_LISTED_TOOL_BYTES:
            raise StepLimitExceeded(
                f"the toolset {name!r} lists the tool {spec.name!r} in {len(data)} bytes; a "
                f"step takes {MAX_LISTED_TOOL_BYTES} a tool"
            )
        total += len(data)
        digest.update(data + b"\n")
    if total > MAX_LISTING_BYTES:
        raise StepLimitExceeded(
            f"the toolset {name!r} lists {total} bytes of tools; a step takes {MAX_LISTING_BYTES}"
        )
    fingerprint = digest.hexdigest()
    if fingerprint == known:
        return McpListOutput(fingerprint=fingerprint, unchanged=True)
    return McpListOutput(fingerprint=fingerprint, tools=listed)


# -- the workflow side: a chain whose I/O runs as steps ---------------------------------------


class DurableModel(WrapperModel):
    """A model whose calls run as steps: `call` as `advisorchain.model.call`, `stream` as
    `advisorchain.model.stream` (its deltas, returned by the step, are yielded in order,
    then the `ResponseCompleted`). `inner` is the model the chain was built with (read for
    its name and capabilities, never called here); `key` names it in the worker's registry.
    """

    def __init__(
        self, inner: ChatModel, runner: StepRunner, *, run_id: str, key: str = DEFAULT_MODEL
    ) -> None:
        super().__init__(inner)
        self.runner = runner
        self.run_id = run_id
        self.key = key

    def _payload(self, request: ChatRequest) -> ModelCallInput:
        return ModelCallInput(
            run_id=self.run_id,
            model=self.key,
            messages=messages_to_json(request.messages),
            options=options_to_json(request.options),
            tools=tuple(
                ToolSpec(
                    name=t.definition.name,
                    description=t.definition.description,
                    parameters=dict(t.definition.parameters),
                )
                for t in request.tools
            ),
            conversation_id=request.conversation_id,
        )

    async def call(self, request: ChatRequest) -> ChatResponse:
        """The model's answer, from the step `advisorchain.model.call`."""
        output = await self.runner.run_step(
            STEP_MODEL_CALL, self._payload(request), ModelCallOutput
        )
        return response_from_json(output.response)

    async def stream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        """The model's deltas and response, from the step `advisorchain.model.stream`."""
        output = await self.runner.run_step(
            STEP_MODEL_STREAM, self._payload(request), ModelCallOutput
        )
        for values in output.events:
            yield event_from_json(values)
        yield ResponseCompleted(response_from_json(output.response))


class RemoteToolError(Exception):
    """A tool's exception as a step reported it: `describe_exception` of it reads as the
    original's (`Type: message`, scrubbed on the worker)."""

    def __init__(self, type_name: str, message: str) -> None:
        super().__init__(message)
        self.type_name = type_name


def _remote_error(type_name: str, message: str) -> RemoteToolError:
    named = type(type_name, (RemoteToolError,), {})
    error: RemoteToolError = named(type_name, message)
    return error


@dataclass(frozen=True, slots=True)
class _Converted:
    content: ToolContent


class DurableTool(Tool):
    """A tool whose execution runs as a step (`advisorchain.tool.call`, or
    `advisorchain.mcp.call` for an MCP tool): the original tool's definition, flags and
    argument validation, so the loop validates, approves and reports as in process; `run`
    sends the validated arguments (JSON form) to the worker, which runs the original tool
    found by name. An error the tool raised there is raised here as a `RemoteToolError`
    under the original's type name; a deferral is re-made with `ToolResult.defer`; an
    `unknown` outcome reads `UNKNOWN_OUTCOME`."""

    runner: StepRunner
    run_id: str
    step: str

    @classmethod
    def wrap(cls, tool: Tool, runner: StepRunner, *, run_id: str) -> DurableTool:
        """`tool`, executed through `runner`."""
        durable = cls.__new__(cls)
        durable.__dict__.update(tool.__dict__)
        durable.__dict__.pop("_no_suspend", None)
        durable.runner = runner
        durable.run_id = run_id
        durable.step = STEP_MCP_CALL if tool.metadata.get("mcp_server") else STEP_TOOL_CALL
        return durable

    @property
    def effects(self) -> Literal["read_only", "idempotent", "effects"]:
        """What a retry of this tool may do."""
        if self.read_only:
            return "read_only"
        return "idempotent" if self.idempotent else "effects"

    async def run(
        self, arguments: Mapping[str, Any], context: ToolContext, *, validated: Any = None
    ) -> Any:
        """Run the original tool on a worker, through the step."""
        if validated is None:
            self.validate_arguments(arguments)
        payload = ToolCallInput(
            run_id=self.run_id,
            tool=self.name,
            call_id=context.call_id,
            arguments=pydantic_core.to_jsonable_python(dict(arguments), fallback=repr),
            conversation_id=context.conversation_id,
            decision=None if context.decision is None else decision_to_json(context.decision),
            state=context.state,
            effects=self.effects,
        )
        output = await self.runner.run_step(self.step, payload, ToolCallOutput)
        if output.status == "ok":
            return _Converted(content_from_json(output.content or "[]"))
        if output.status == "unknown":
            return _Converted(UNKNOWN_OUTCOME)
        if output.status == "deferred":
            content = content_from_json(output.content) if output.content else ""
            return ToolResult.defer(
                output.kind or "external",
                output.metadata,
                content=content if isinstance(content, str) else "Waiting for a decision.",
                accepts=output.accepts or ("result", "reject"),
                state=output.state,
                result_schema=output.result_schema,
            )
        raise _remote_error(output.error_type or "Exception", output.error_message or "")

    def convert_result(self, value: Any) -> ToolContent:
        """The content the worker converted; a `Result(value)` decision converted here."""
        if isinstance(value, _Converted):
            return value.content
        return super().convert_result(value)


def durable_chain(
    chain: Chain,
    runner: StepRunner,
    *,
    run_id: str,
    model_key: str = DEFAULT_MODEL,
    toolsets: Collection[str] = (),
) -> Chain:
    """`chain` rebuilt to run durably: the same advisors, options and tool context, its
    model a `DurableModel` and each tool given to it (not those its links contribute) a
    `DurableTool`, all running their I/O through `runner`. `run_id` keys the effects
    ledger (a conversation's id: call ids are unique within its transcript). Tools of the
    MCP toolsets named in `toolsets` are left out: each turn lists them (`DurableToolsets`).
    """
    contributed = {t.name for a in chain._links for t in a.tools}  # noqa: SLF001
    memories: list[int] = []
    keys = itertools.count()
    advisors = [_durable_advisor(a, runner, memories, keys) for a in chain.advisors]
    tools = [
        DurableTool.wrap(t, runner, run_id=run_id)
        for t in chain.tools
        if t.name not in contributed and t.metadata.get("mcp_server") not in toolsets
    ]
    return Chain(
        advisors,
        model=DurableModel(chain.model, runner, run_id=run_id, key=model_key),
        tools=tools,
        tool_context=chain.tool_context,
        options=chain.options,
    )


class DurableMemoryStore:
    """A `ChatMemoryStore` whose reads and writes run as steps: `load` as
    `advisorchain.memory.load`, `append` as `advisorchain.memory.save`, on the worker's store
    registered under `key`. `clear` is not a step: clear a conversation on the worker."""

    def __init__(self, runner: StepRunner, *, key: str = "memory") -> None:
        self.runner = runner
        self.key = key

    async def load(self, conversation_id: str) -> tuple[Message, ...]:
        """The conversation's stored messages, through the step."""
        payload = MemoryLoadInput(store=self.key, conversation_id=conversation_id)
        output = await self.runner.run_step(STEP_MEMORY_LOAD, payload, MemoryLoadOutput)
        return messages_from_json(output.messages)

    async def append(self, conversation_id: str, messages: Sequence[Message]) -> None:
        """Append the messages, through the step."""
        payload = MemorySaveInput(
            store=self.key, conversation_id=conversation_id, messages=messages_to_json(messages)
        )
        await self.runner.run_step(STEP_MEMORY_SAVE, payload, MemorySaveOutput)

    async def clear(self, conversation_id: str) -> None:
        """Refused: clearing is no step of a turn."""
        raise ChainConfigurationError("clear a durable conversation's memory on the worker")


def memory_key(index: int) -> str:
    """The registry key of the memory store of a chain's `index`-th `MemoryAdvisor`."""
    return "memory" if index == 0 else f"memory-{index}"


class DurableEmbedder:
    """An embedding function whose calls run as steps `advisorchain.embeddings.embed` on
    the worker's embedder registered under `key`: the texts in order, `MAX_EMBED_TEXTS`
    a step, one step after the other."""

    def __init__(self, runner: StepRunner, *, key: str) -> None:
        self.runner = runner
        self.key = key

    def __repr__(self) -> str:
        return f"DurableEmbedder({self.key!r})"

    async def __call__(self, texts: Sequence[str]) -> list[list[float]]:
        """One vector per text, through the steps."""
        vectors: list[list[float]] = []
        for start in range(0, len(texts), MAX_EMBED_TEXTS):
            batch = tuple(texts[start : start + MAX_EMBED_TEXTS])
            payload = EmbedInput(embedder=self.key, texts=batch)
            output = await self.runner.run_step(STEP_EMBED, payload, EmbedOutput)
            found = unpack_vectors(output)
            if len(found) != len(batch):
                raise StepLimitExceeded(f"{len(found)} vectors for {len(batch)} texts")
            vectors.extend(found)
        return vectors


class DurableToolsets:
    """The tools of the MCP toolsets a worker holds under `keys` (their names), for
    workflow code. `tools()` lists each toolset through the step `advisorchain.mcp.list`,
    in order, and answers its tools as `DurableTool`s whose calls run as
    `advisorchain.mcp.call`: the definitions and the flags the links read (approval,
    effects) are the worker's. The last listing of each toolset is kept, and the step
    told its fingerprint: an unchanged listing comes back without its tools, so a history
    holds a catalog once per change, not once per turn."""

    def __init__(self, runner: StepRunner, keys: Sequence[str], *, run_id: str) -> None:
        self.runner = runner
        self.keys = tuple(keys)
        self.run_id = run_id
        self._listed: dict[str, tuple[str, tuple[Tool, ...]]] = {}

    async def tools(self) -> tuple[Tool, ...]:
        """Every toolset's tools, each listed now through the step."""
        found: list[Tool] = []
        for key in self.keys:
            known = self._listed.get(key)
            payload = McpListInput(toolset=key, known=None if known is None else known[0])
            output = await self.runner.run_step(STEP_MCP_LIST, payload, McpListOutput)
            if known is None or not output.unchanged:
                known = (output.fingerprint, tuple(self._tool(key, s) for s in output.tools))
                self._listed[key] = known
            found.extend(known[1])
        return tuple(found)

    def _tool(self, key: str, spec: ListedTool) -> DurableTool:
        tool = Tool(
            spec.name,
            spec.description,
            spec.parameters,
            requires_approval=spec.requires_approval,
            read_only=spec.read_only,
            idempotent=spec.idempotent,
            sequential=spec.sequential,
            timeout=spec.timeout,
            metadata={**spec.metadata, "mcp_server": key},
        )
        return DurableTool.wrap(tool, self.runner, run_id=self.run_id)


def _clock() -> float:
    return time.time()  # looked up on each call: a durable runner may route it


def _durable_advisor(
    advisor: Advisor, runner: StepRunner, memories: list[int], keys: Iterator[int]
) -> Advisor:
    """`advisor` as it runs in workflow code. An `ApprovalAdvisor` keeps its records in the
    workflow (an `InMemoryApprovalStore`, rebuilt by replay: the engine is the durable
    store); one given a store of its own is refused, since the store's I/O would run as
    workflow code. A `MemoryAdvisor` reads and writes its store through steps
    (`DurableMemoryStore`). A `ToolSearchAdvisor` embeds through steps (`DurableEmbedder`,
    keys numbered from `keys`: `durable.search`)."""

    if isinstance(advisor, ToolSearchAdvisor):
        return durable_search(advisor, lambda key: DurableEmbedder(runner, key=key), keys)

    if type(advisor) is MemoryAdvisor:
        key = memory_key(len(memories))
        memories.append(1)
        return MemoryAdvisor(
            DurableMemoryStore(runner, key=key),
            conversation_id_key=advisor.conversation_id_key,
            max_messages=advisor.max_messages,
            require_conversation_id=advisor.require_conversation_id,
        )

    if type(advisor) is ApprovalAdvisor:
        if advisor._store is not None and not isinstance(  # noqa: SLF001
            advisor._store,  # noqa: SLF001
            InMemoryApprovalStore,
        ):
            raise ChainConfigurationError(
                "a durable chain's ApprovalAdvisor keeps its records in the workflow: build "
                "it without a store (the engine's history is the durable store)"
            )
        return ApprovalAdvisor(
            advisor.approver,
            policy=advisor.policy,
            store=InMemoryApprovalStore(clock=_clock),
            timeout=advisor.timeout,
            auto_approve_read_only=advisor.auto_approve_read_only,
        )
    return advisor


# -- the worker side: what each step does -----------------------------------------------------

Publish = Callable[[dict[str, Any]], Awaitable[None]]
"""Where a streamed model call's deltas go as they arrive (`event_to_json` form)."""


def _definition_tool(spec: ToolSpec) -> Tool:
    return Tool(spec.name, spec.description, spec.parameters)


def without_http_retries(model: ChatModel) -> ChatModel:
    """Turn off the HTTP retries of `model` (and of the models it wraps): inside a step the
    engine's retry policy owns retries, so a provider error fails the attempt at once
    instead of being retried twice under it. Changes the model in place; returns it."""
    seen: set[int] = set()
    pending: list[object] = [model]
    while pending:
        current = pending.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        http = getattr(current, "_http", None)
        retry = getattr(http, "retry", None)
        if isinstance(retry, RetryPolicy) and retry.max_retries:
            http.retry = replace(retry, max_retries=0)  # type: ignore[union-attr]
        inner = getattr(current, "inner", None)
        if inner is not None:
            pending.append(inner)
        pending.extend(getattr(current, "models", ()) or ())
    return model


class StepExecutor:
    """Does the work of every step on a worker, from its registry: models by key, tools by
    name, MCP toolsets by name, memory stores and embedders by key, the tool-context values
    its tools receive, and the effects ledger.

    `execute(name, payload)` validates the payload for the step and runs it: a model call
    or stream (the model is called once per attempt: its HTTP retries are turned off,
    `without_http_retries`, unless `http_retries=True`: retries belong to the engine's
    policy), a tool call (claimed in the ledger first when the tool has effects; a tool
    the registry lacks is looked for among the toolsets' tools), a toolset's listing, a
    memory load or save, an embedding. What a listing or an embedder answers is bounded
    (`listing_of`, `pack_vectors`: `StepLimitExceeded` past the bounds).
    """

    def __init__(
        self,
        *,
        models: Mapping[str, ChatModel],
        tools: Sequence[Tool] = (),
        tool_context: Mapping[str, Any] | None = None,
        ledger: EffectsLedger | None = None,
        memory_stores: Mapping[str, Any] | None = None,
        embedders: Mapping[str, Callable[[Sequence[str]], Any]] | None = None,
        toolsets: Sequence[ToolSource] = (),
        http_retries: bool = False,
    ) -> None:
        self.models = {k: without_http_retries(m) if not http_retries else m
                       for k, m in models.items()}  # fmt: skip
        self.tools = {t.name: t for t in tools}
        self.tool_context: Mapping[str, Any] = dict(tool_context or {})
        self.ledger = ledger
        self.memory_stores = dict(memory_stores or {})
        self.embedders = dict(embedders or {})
        self.toolsets = {t.name: t for t in toolsets}
        if len(self.toolsets) != len(toolsets):
            raise ChainConfigurationError("two toolsets have one name: name them apart")

    @classmethod
    def from_chain(
        cls,
        chain: Chain,
        *,
        ledger: EffectsLedger | None = None,
        model_key: str = DEFAULT_MODEL,
        **registry: Any,
    ) -> StepExecutor:
        """An executor for `chain`: its model under `model_key`, its tools, its tool context,
        the stores of its `MemoryAdvisor`s (`memory_key`), the embedding functions of its
        `ToolSearchAdvisor`s (`durable.search.search_embedders`); `registry` goes to the
        constructor (`toolsets=...`) and wins over what the chain holds."""

        stores = [a.store for a in chain.advisors if type(a) is MemoryAdvisor]
        if stores and "memory_stores" not in registry:
            registry["memory_stores"] = {memory_key(i): s for i, s in enumerate(stores)}
        embedders = search_embedders(chain.advisors)
        if embedders and "embedders" not in registry:
            registry["embedders"] = embedders
        return cls(
            models={model_key: chain.model},
            tools=chain.tools,
            tool_context=chain.tool_context,
            ledger=ledger,
            **registry,
        )

    def _model(self, key: str) -> ChatModel:
        model = self.models.get(key)
        if model is None:
            raise UnknownStep(f"no model registered as {key!r} on this worker")
        return model

    def _request(self, payload: ModelCallInput) -> ChatRequest:
        return ChatRequest(
            messages=messages_from_json(payload.messages),
            options=options_from_json(payload.options),
            tools=tuple(_definition_tool(s) for s in payload.tools),
            conversation_id=payload.conversation_id,
        )

    async def model_call(self, payload: ModelCallInput) -> ModelCallOutput:
        """`advisorchain.model.call`."""
        response = await self._model(payload.model).call(self._request(payload))
        return ModelCallOutput(response=response_to_json(response))

    async def model_stream(
        self, payload: ModelCallInput, publish: Publish | None = None, *, attempt: int = 1
    ) -> ModelCallOutput:
        """`advisorchain.model.stream`: each delta goes to `publish` as it arrives."""
        events: list[dict[str, Any]] = []
        response: ChatResponse | None = None
        stream = self._model(payload.model).stream(self._request(payload))
        try:
            async for event in stream:
                if isinstance(event, ResponseCompleted):
                    response = event.response
                    continue
                values = event_to_json(event)
                events.append(values)
                if publish is not None:
                    await publish(values)
        finally:
            aclose = getattr(stream, "aclose", None)
            if aclose is not None:
                await aclose()
        if response is None:
            raise RuntimeError("the model's stream ended without a ResponseCompleted event")
        return ModelCallOutput(
            response=response_to_json(response), events=tuple(events), attempt=attempt
        )

    async def tool_call(self, payload: ToolCallInput) -> ToolCallOutput:
        """`advisorchain.tool.call` and `advisorchain.mcp.call`: the tool run once per
        claim when it has effects (`done` answers the recorded output, `unknown` says so)."""
        tool = await self._tool(payload.tool)
        effects = not (tool.read_only or tool.idempotent)
        if effects and self.ledger is not None:
            fingerprint = call_fingerprint(payload.tool, json.dumps(payload.arguments))
            claim = await self.ledger.claim(payload.run_id, payload.call_id, fingerprint)
            if claim.status == "conflict":
                return ToolCallOutput(
                    status="error",
                    error_type="LedgerConflict",
                    error_message=(
                        f"call id {payload.call_id!r} was already used by a different call in "
                        "this run: not run"
                    ),
                )
            if claim.status == "done" and claim.result is not None:
                return ToolCallOutput.model_validate_json(claim.result)
            if claim.status != "claimed":
                return ToolCallOutput(status="unknown")
        output = await self._run_tool(tool, payload)
        if effects and self.ledger is not None:
            await self.ledger.complete(payload.run_id, payload.call_id, output.model_dump_json())
        return output

    async def _tool(self, name: str) -> Tool:
        tool = self.tools.get(name)
        if tool is not None:
            return tool
        for toolset in self.toolsets.values():
            for listed in await toolset.tools():
                if listed.name == name:
                    return listed
        raise UnknownStep(f"no tool named {name!r} on this worker")

    async def mcp_list(self, payload: McpListInput) -> McpListOutput:
        """`advisorchain.mcp.list`: the toolset's tools (`listing_of`: bounded, and
        without them when the workflow knows the listing)."""
        toolset = self.toolsets.get(payload.toolset)
        if toolset is None:
            raise UnknownStep(f"no MCP toolset named {payload.toolset!r} on this worker")
        return listing_of(payload.toolset, await toolset.tools(), payload.known)

    async def _run_tool(self, tool: Tool, payload: ToolCallInput) -> ToolCallOutput:
        context = ToolContext(
            self.tool_context,
            call_id=payload.call_id,
            tool_name=tool.name,
            conversation_id=payload.conversation_id,
            decision=None if payload.decision is None else decision_from_json(payload.decision),
            state=payload.state,
        )
        try:
            if tool.timeout is not None:
                import anyio

                with anyio.fail_after(tool.timeout):
                    value = await tool.run(payload.arguments, context)
            else:
                value = await tool.run(payload.arguments, context)
            if isinstance(value, ToolResult) and value.outcome == "deferred":
                resume = value.resume
                return ToolCallOutput(
                    status="deferred",
                    content=content_to_json(tool.name, payload.call_id, value.content),
                    kind=value.kind,
                    metadata=pydantic_core.to_jsonable_python(dict(value.metadata), fallback=repr),
                    accepts=tuple(resume.accepts) if resume else (),
                    state=None if resume is None else resume.state,
                    result_schema=None
                    if resume is None or resume.result_schema is None
                    else dict(resume.result_schema),
                )
            content = tool.convert_result(value)
        except Exception as exc:
            described = describe_exception(exc)
            name = type(exc).__name__
            message = described[len(name) + 2 :] if described.startswith(name + ": ") else ""
            return ToolCallOutput(status="error", error_type=name, error_message=message)
        return ToolCallOutput(
            status="ok", content=content_to_json(tool.name, payload.call_id, content)
        )

    async def memory_load(self, payload: MemoryLoadInput) -> MemoryLoadOutput:
        """`advisorchain.memory.load`."""
        store = self.memory_stores.get(payload.store)
        if store is None:
            raise UnknownStep(f"no memory store registered as {payload.store!r}")
        messages = await store.load(payload.conversation_id)
        return MemoryLoadOutput(messages=messages_to_json(messages))

    async def memory_save(self, payload: MemorySaveInput) -> MemorySaveOutput:
        """`advisorchain.memory.save`."""
        store = self.memory_stores.get(payload.store)
        if store is None:
            raise UnknownStep(f"no memory store registered as {payload.store!r}")
        messages = messages_from_json(payload.messages)
        await store.append(payload.conversation_id, messages)
        return MemorySaveOutput(appended=len(messages))

    async def embed(self, payload: EmbedInput) -> EmbedOutput:
        """`advisorchain.embeddings.embed`: the vectors bounded and packed (`pack_vectors`)."""
        embedder = self.embedders.get(payload.embedder)
        if embedder is None:
            raise UnknownStep(f"no embedder registered as {payload.embedder!r}")
        vectors = embedder(list(payload.texts))
        if hasattr(vectors, "__await__"):
            vectors = await vectors
        return pack_vectors(vectors, len(payload.texts))

    async def execute(
        self, name: str, payload: StepPayload | Mapping[str, Any], publish: Publish | None = None
    ) -> StepPayload:
        """Run step `name` (a `STEP_*` name) with `payload` (its input model, or its JSON
        values); raises `UnknownStep` for a name that is none."""
        if name in (STEP_MODEL_CALL, STEP_MODEL_STREAM):
            model_input = ModelCallInput.model_validate(payload)
            if name == STEP_MODEL_CALL:
                return await self.model_call(model_input)
            return await self.model_stream(model_input, publish)
        if name in (STEP_TOOL_CALL, STEP_MCP_CALL):
            return await self.tool_call(ToolCallInput.model_validate(payload))
        if name == STEP_MCP_LIST:
            return await self.mcp_list(McpListInput.model_validate(payload))
        if name == STEP_MEMORY_LOAD:
            return await self.memory_load(MemoryLoadInput.model_validate(payload))
        if name == STEP_MEMORY_SAVE:
            return await self.memory_save(MemorySaveInput.model_validate(payload))
        if name == STEP_EMBED:
            return await self.embed(EmbedInput.model_validate(payload))
        raise UnknownStep(f"no step named {name!r}")


def deferred_fingerprints(response: ChatResponse) -> dict[str, str]:
    """The arguments fingerprint of each call a deferred turn waits on, by call id: what a
    decision is bound to (a transcript whose calls changed no longer matches)."""

    found: dict[str, str] = {}
    for deferred in response.deferred:
        try:
            arguments = json.loads(deferred.call.arguments)
        except ValueError:
            arguments = {"__raw__": deferred.call.arguments}
        if not isinstance(arguments, dict):
            arguments = {"__raw__": arguments}
        found[deferred.id] = f"{deferred.name}:{arguments_fingerprint(arguments)}"
    return found


class LocalStepRunner:
    """A `StepRunner` that runs each step in this process through `executor`, its payload and
    output round-tripped through JSON as an engine would store them: the seam without an
    engine (tests, and the in-process baseline of the benchmarks)."""

    def __init__(self, executor: StepExecutor) -> None:
        self.executor = executor

    async def run_step(self, name: str, payload: StepPayload, result_type: type[P]) -> P:
        """Run step `name` through the executor."""
        stored = type(payload).model_validate_json(payload.model_dump_json())
        output = await self.executor.execute(name, stored)
        return result_type.model_validate_json(output.model_dump_json())


__all__ = [
    "DEFAULT_MODEL",
    "MAX_EMBED_DIMENSION",
    "MAX_EMBED_TEXTS",
    "MAX_LISTED_TOOLS",
    "MAX_LISTED_TOOL_BYTES",
    "MAX_LISTING_BYTES",
    "SCHEMA_VERSION",
    "STEP_EMBED",
    "STEP_MCP_CALL",
    "STEP_MCP_LIST",
    "STEP_MEMORY_LOAD",
    "STEP_MEMORY_SAVE",
    "STEP_MODEL_CALL",
    "STEP_MODEL_STREAM",
    "STEP_NAMES",
    "STEP_TOOL_CALL",
    "UNKNOWN_OUTCOME",
    "call_fingerprint",
    "Claim",
    "LocalStepRunner",
    "DurableEmbedder",
    "DurableMemoryStore",
    "DurableModel",
    "DurableTool",
    "DurableToolsets",
    "EffectsLedger",
    "EmbedInput",
    "EmbedOutput",
    "ListedTool",
    "McpListInput",
    "McpListOutput",
    "MemoryLoadInput",
    "MemoryLoadOutput",
    "MemorySaveInput",
    "MemorySaveOutput",
    "ModelCallInput",
    "ModelCallOutput",
    "Publish",
    "RemoteToolError",
    "StepExecutor",
    "StepLimitExceeded",
    "StepPayload",
    "StepRunner",
    "ToolCallInput",
    "ToolCallOutput",
    "ToolSource",
    "ToolSpec",
    "UnknownStep",
    "UnsupportedPayloadVersion",
    "content_from_json",
    "content_to_json",
    "decision_from_json",
    "decision_to_json",
    "deferred_fingerprints",
    "deferred_from_json",
    "deferred_to_json",
    "durable_chain",
    "event_from_json",
    "event_to_json",
    "listed_tool",
    "listing_of",
    "memory_key",
    "messages_from_json",
    "messages_to_json",
    "options_from_json",
    "options_to_json",
    "pack_vectors",
    "response_from_json",
    "response_to_json",
    "usage_from_json",
    "unpack_vectors",
    "usage_to_json",
    "without_http_retries",
]
