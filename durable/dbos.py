"""Durable turns on DBOS: a chain's turn is a DBOS workflow, every model and tool call a step.

    from dbos import DBOS
    DBOS(config={"name": "orders", "system_database_url": "sqlite:///orders.sqlite"})
    runner = DBOSRunner(chain, ledger=SQLiteLedger("effects.db"))   # before DBOS.launch()
    DBOS.launch()
    turn = await runner.start("Pay bob 5")           # the workflow's id
    await runner.decide(turn, {"c1": Approve()})     # from any process, when it waits
    response = await runner.result(turn)

How a turn runs (`DBOSRunner`):

- The workflow `{name}.turn` runs the chain's links as workflow code, on the chain the
  step seam rebuilds (`steps.durable_chain`: the same advisors, tools, context and
  options; the model's calls and the tools' executions are the seam's steps,
  `advisorchain.model.call`, `advisorchain.model.stream`, `advisorchain.tool.call`, ...;
  the tools of the runner's MCP toolsets are listed once a turn, `advisorchain.mcp.list`).
  `DBOSSteps` runs each as a DBOS step, done in the worker's process by a
  `steps.StepExecutor` holding the real model and tools. DBOS records each step's output
  (the seam's versioned JSON payloads); a workflow recovered after its worker died runs
  its code again and reads the recorded outputs instead of calling the model or the tools
  again.
- A tool that is neither `idempotent` nor `read_only` runs through the effects-once
  ledger (`durable.ledger`, seen by the executor through `StepLedger`, keyed by the
  workflow id and the call id): a step retried after it took effect answers the recorded
  output, or `unknown` when the worker died between the effect and its record.
  Idempotent and read-only tools just run again.
- A turn that ends deferred (`finish_reason == "deferred"`) waits in the workflow: it
  publishes the waiting calls as the event `advisorchain.deferred` and receives decisions
  on the topic `advisorchain.decisions` (`DBOS.recv`, durable: a worker that dies while it
  waits is recovered and keeps waiting). `decide` checks decisions against the waiting
  calls (ids, kinds, round, and the arguments' fingerprints the approver was shown) before
  sending; the workflow checks them again (`InvalidDecisions` is published as the event
  `advisorchain.refused` and the workflow keeps waiting). With decisions it resumes the
  turn (`chain.call(transcript, decisions=...)`), and so on until the turn ends or no
  decision came within `decision_timeout` (the turn then ends deferred, to be resumed by
  a new turn). The workflow's result is the whole turn: every segment's messages, the
  usage summed.
- Streaming: `stream` (or `start(..., stream=True)`) writes the turn to the DBOS stream
  `advisorchain.events`. Text and reasoning deltas are written live from the model step;
  tool events and each segment's `ResponseCompleted` from the workflow
  (recorded, so never twice). Each model step first writes an `attempt` marker; a
  reader (`events`) that meets a second attempt of one step yields `AnswerDiscarded`
  (the deltas of the failed attempt are to be dropped). `events(turn, offset=n)`
  reconnects from offset `n` (each event comes with its offset).
- Several workers: give every worker the same PostgreSQL system database and the same
  runner `name`; `start` enqueues turns on the DBOS queue `{name}_turns`, which runs each
  turn on exactly one worker. SQLite serves one process.

DBOS runs on asyncio only: the runner's methods need an asyncio event loop.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from ..core.chain import Chain
from ..core.deferred import Approve, Decision, DeferredCall, Reject, Result
from ..core.errors import InvalidDecisions
from ..core.events import (
    AnswerDiscarded,
    ReasoningDelta,
    ResponseCompleted,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
)
from ..core.extras import install_hint
from ..core.messages import Message
from ..core.prompt import Prompt, to_messages
from ..core.response import ChatResponse
from ..core.tools import Tool
from ..core.usage import Usage
from .ledger import EffectLedger, StepLedger, call_fingerprint
from .steps import (
    SCHEMA_VERSION,
    STEP_MODEL_STREAM,
    DurableToolsets,
    StepExecutor,
    StepPayload,
    ToolSource,
    UnsupportedPayloadVersion,
    decision_from_json,
    decision_to_json,
    deferred_from_json,
    deferred_to_json,
    durable_chain,
    event_from_json,
    event_to_json,
    messages_from_json,
    messages_to_json,
    response_from_json,
    response_to_json,
)

try:
    from dbos import DBOS, Queue, SetWorkflowID
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(f"advisorchain.durable.dbos needs DBOS: {install_hint('dbos')}") from exc

STREAM = "advisorchain.events"
"""The DBOS stream a streamed turn is written to."""
DEFERRED_EVENT = "advisorchain.deferred"
"""The workflow event holding the calls a turn waits on (with the round it waits in)."""
REFUSED_EVENT = "advisorchain.refused"
"""The workflow event holding why the last decisions were refused."""
DECISIONS_TOPIC = "advisorchain.decisions"
"""The DBOS messaging topic decisions are sent on."""
DEFAULT_DECISION_TIMEOUT = 7 * 24 * 3600.0
"""Seconds a turn waits for decisions before it ends deferred."""


@dataclass(frozen=True, slots=True)
class Waiting:
    """What a turn waits on: its `round` (1 for the first wait) and the waiting calls with
    the fingerprint of each one's tool and arguments."""

    round: int
    calls: tuple[DeferredCall, ...]
    fingerprints: Mapping[str, str]


Payload = dict[str, Any]
"""A JSON object as DBOS stores it: `{"v": SCHEMA_VERSION, ...}`."""

P = TypeVar("P", bound=StepPayload)


def _versioned(data: Mapping[str, Any]) -> Payload:
    return {"v": SCHEMA_VERSION, **data}


def read_payload(data: Any, what: str) -> Mapping[str, Any]:
    """A stored payload, refused if a newer version than this one wrote it."""
    if not isinstance(data, Mapping) or not isinstance(data.get("v"), int):
        raise UnsupportedPayloadVersion(f"a stored {what} is not a versioned payload")
    if data["v"] > SCHEMA_VERSION:
        raise UnsupportedPayloadVersion(
            f"a stored {what} of version {data['v']}; this advisorchain reads up to "
            f"{SCHEMA_VERSION}: upgrade the worker"
        )
    return data


def dump_decisions(decisions: Mapping[str, Decision]) -> dict[str, Any]:
    """Decisions as JSON (`steps.decision_to_json` each); `InvalidDecisions` for anything
    that is no decision or holds a value JSON cannot."""
    if not isinstance(decisions, Mapping):
        raise InvalidDecisions(
            f"decisions must map call ids to decisions, not {type(decisions).__name__}"
        )
    try:
        return {str(k): decision_to_json(v) for k, v in decisions.items()}
    except (TypeError, ValueError) as exc:
        failure = InvalidDecisions(f"decisions that cannot be sent: {exc}")
    raise failure


def load_decisions(data: Mapping[str, Any]) -> dict[str, Decision]:
    """The decisions `dump_decisions` wrote."""
    return {k: decision_from_json(v) for k, v in data.items()}


class DBOSSteps:
    """A `steps.StepRunner` on DBOS: each step a DBOS step (`DBOS.run_step_async`) under the
    seam's step name, done in this process by `executor`, its output recorded as JSON.

    A streamed model call first writes an `attempt` marker to the turn's stream, then each
    text, reasoning or tool-call delta as it arrives (the tool loop passes tool-call deltas
    on to the caller, so they are the caller's too);
    a reader that meets a second marker of one step knows the first attempt's deltas are
    to be dropped."""

    def __init__(self, executor: StepExecutor) -> None:
        self.executor = executor

    async def run_step(self, name: str, payload: StepPayload, result_type: type[P]) -> P:
        """Run step `name` as a DBOS step; its output (recorded, or read back on replay)."""

        async def step() -> Payload:
            publish = None
            if name == STEP_MODEL_STREAM:
                marker = {"type": "attempt", "step": DBOS.step_id, "attempt": uuid.uuid4().hex}
                await DBOS.write_stream_async(STREAM, _versioned(marker))
                publish = _publish
            output = await self.executor.execute(name, payload, publish)
            return output.model_dump(mode="json")

        data = await DBOS.run_step_async({"name": name}, step)
        return result_type.model_validate(data)


async def _publish(values: dict[str, Any]) -> None:
    await DBOS.write_stream_async(STREAM, _versioned(values))


def _combined(segments: Sequence[ChatResponse]) -> ChatResponse:
    last = segments[-1]
    if len(segments) == 1:
        return last
    messages: list[Message] = [m for s in segments for m in s.messages]
    usage = Usage()
    for s in segments:
        usage = usage + s.usage
    return ChatResponse(
        messages=messages,
        finish_reason=last.finish_reason,
        usage=usage,
        model=last.model,
        id=last.id,
        deferred=last.deferred,
    )


def _waiting_payload(round: int, response: ChatResponse) -> Payload:
    return _versioned(
        {
            "round": round,
            "deferred": [deferred_to_json(d) for d in response.deferred],
            "fingerprints": {
                d.call.id: call_fingerprint(d.call.name, d.call.arguments)
                for d in response.deferred
            },
        }
    )


def _load_waiting(data: Any) -> Waiting:
    found = read_payload(data, "wait")
    return Waiting(
        round=found["round"],
        calls=tuple(deferred_from_json(d) for d in found["deferred"]),
        fingerprints=dict(found["fingerprints"]),
    )


class _Turns:
    """What a caller does with turns: start, wait, decide, read; the primitives differ
    between a worker (`DBOSRunner`, through its launched DBOS) and a client in another
    process (`DBOSTurnClient`, through `dbos.DBOSClient`)."""

    name: str

    async def _enqueue(self, workflow_id: str, payload: Payload) -> None:
        raise NotImplementedError

    async def _get_event(self, turn_id: str, key: str, wait_seconds: float) -> Any:
        raise NotImplementedError

    async def _send(self, turn_id: str, message: Payload, key: str) -> None:
        raise NotImplementedError

    async def _result(self, turn_id: str) -> Any:
        raise NotImplementedError

    def _read_stream(self, turn_id: str, offset: int) -> AsyncIterator[Any]:
        raise NotImplementedError

    async def start(
        self,
        prompt: Prompt = (),
        *,
        decisions: Mapping[str, Decision] | None = None,
        conversation_id: str | None = None,
        turn_id: str | None = None,
        stream: bool = False,
    ) -> str:
        """Enqueue a turn (one worker of the runner's queue runs it) and return its
        workflow id: `turn_id` if given (a second start of the same id starts nothing and
        returns it), else a new one. `stream=True` writes its events for `events`.

        The prompt and decisions are checked here (`InvalidPromptError`, `PayloadError`)."""
        messages = to_messages(prompt)
        payload = _versioned(
            {
                "messages": messages_to_json(messages),
                "decisions": None if decisions is None else dump_decisions(decisions),
                "conversation_id": conversation_id,
                "stream": stream,
            }
        )
        workflow_id = turn_id or f"{self.name}-{uuid.uuid4().hex}"
        await self._enqueue(workflow_id, payload)
        return workflow_id

    async def result(self, turn_id: str) -> ChatResponse:
        """The turn's response once it ended: the whole turn (every segment's messages, the
        usage summed); `finish_reason == "deferred"` if no decision came in time."""
        return response_from_json(read_payload(await self._result(turn_id), "turn result"))

    async def waiting(self, turn_id: str, wait_seconds: float = 60.0) -> Waiting | None:
        """What the turn waits on, or `None` if it did not wait within `wait_seconds`
        (the latest wait; a turn that went on after it still shows it)."""
        data = await self._get_event(turn_id, DEFERRED_EVENT, wait_seconds)
        return None if data is None else _load_waiting(data)

    async def decide(
        self,
        turn_id: str,
        decisions: Mapping[str, Decision],
        *,
        shown: Sequence[DeferredCall] | None = None,
        wait_seconds: float = 60.0,
    ) -> None:
        """Send decisions to a turn that waits, after checking them (`check_decisions`):
        each id must name a call it waits on and, with `shown` (the calls the approver
        saw), each shown call must have the waiting call's tool and arguments.
        `InvalidDecisions` otherwise, and nothing is sent."""
        payload = dump_decisions(decisions)
        waiting = await self.waiting(turn_id, wait_seconds)
        if waiting is None:
            raise InvalidDecisions(f"turn {turn_id!r} is not waiting for decisions")
        check_decisions(waiting, decisions, shown)
        await self._send(
            turn_id, _versioned({"round": waiting.round, "decisions": payload}), DECISIONS_TOPIC
        )

    async def events(
        self, turn_id: str, *, offset: int = 0
    ) -> AsyncIterator[tuple[int, StreamEvent]]:
        """A streamed turn's events from `offset`, each with its offset, until the turn
        ends: reconnect with the offset after the last one seen. A model step retried
        after a failure yields `AnswerDiscarded` before its new attempt's deltas (drop the
        text shown since the last one), in the place of the retry's attempt marker.
        Markers are read from the stream's start, so a reader that reconnects after the
        failed attempt's deltas is told too."""
        attempts: dict[int, str] = {}
        discarded = 0
        # read from the start: attempt markers before `offset` say which retries to report
        at = -1
        async for value in self._read_stream(turn_id, 0):
            at += 1
            if isinstance(value, Mapping) and value.get("type") == "attempt":
                step, attempt = value["step"], value["attempt"]
                seen = attempts.get(step)
                attempts[step] = attempt
                if seen is not None and seen != attempt:
                    discarded += 1
                    if at >= offset:
                        yield (
                            at,
                            AnswerDiscarded(
                                "the model step was retried after a worker failed", discarded
                            ),
                        )
                continue
            if at < offset:
                continue
            yield at, event_from_json(read_payload(value, "stream event"))


class DBOSTurnClient(_Turns):
    """Turns of the runner `name` from a process that runs no workflows (a web server, an
    approver's tool): `start`, `waiting`, `decide`, `result`, `events`, through
    `dbos.DBOSClient` on the workers' system database."""

    def __init__(self, system_database_url: str, *, name: str = "advisorchain") -> None:
        from dbos import DBOSClient

        self.name = _check_name(name)
        self._client = DBOSClient(system_database_url=system_database_url)

    def __repr__(self) -> str:
        return f"DBOSTurnClient({self.name!r})"

    def close(self) -> None:
        """Close the client's connections."""
        self._client.destroy()

    async def _enqueue(self, workflow_id: str, payload: Payload) -> None:
        await self._client.enqueue_async(
            {
                "queue_name": f"{self.name}_turns",
                "workflow_name": f"{self.name}.turn",
                "workflow_id": workflow_id,
            },
            payload,
        )

    async def _get_event(self, turn_id: str, key: str, wait_seconds: float) -> Any:
        return await self._client.get_event_async(turn_id, key, timeout_seconds=wait_seconds)

    async def _send(self, turn_id: str, message: Payload, key: str) -> None:
        await self._client.send_async(turn_id, message, key)

    async def _result(self, turn_id: str) -> Any:
        handle: Any = await self._client.retrieve_workflow_async(turn_id)
        return await handle.get_result(polling_interval_sec=0.1)

    def _read_stream(self, turn_id: str, offset: int) -> AsyncIterator[Any]:
        return self._client.read_stream_async(turn_id, STREAM, offset=offset)


class DBOSRunner(_Turns):
    """Runs `chain`'s turns as DBOS workflows (see the module's docstring for the flow).

    Create it before `DBOS.launch()` in every worker (it registers the workflow
    `{name}.turn` and the queue `{name}_turns`); `ledger` guards tools with effects and
    must be shared by every worker (`SQLiteLedger` for one host, `PostgresLedger` for
    several). `decision_timeout` is how long a deferred turn waits for decisions.
    `toolsets` are connected MCP toolsets (`McpToolset`): each turn lists their tools
    through the step `advisorchain.mcp.list` and runs with them.
    """

    def __init__(
        self,
        chain: Chain,
        *,
        ledger: EffectLedger,
        name: str = "advisorchain",
        decision_timeout: float = DEFAULT_DECISION_TIMEOUT,
        worker_concurrency: int | None = None,
        polling_interval: float = 1.0,
        toolsets: Sequence[ToolSource] = (),
    ) -> None:
        if not isinstance(chain, Chain):
            raise TypeError(f"chain must be a Chain, not {type(chain).__name__}")
        if not isinstance(ledger, EffectLedger):
            raise TypeError(f"ledger must be an EffectLedger, not {type(ledger).__name__}")
        if not decision_timeout > 0:
            raise ValueError("decision_timeout must be a positive number of seconds")
        self.name = _check_name(name)
        self.polling_interval = polling_interval
        self.ledger = ledger
        self.decision_timeout = decision_timeout
        self.source = chain
        self.executor = StepExecutor.from_chain(chain, ledger=StepLedger(ledger), toolsets=toolsets)
        self.toolsets = tuple(self.executor.toolsets)
        self.steps = DBOSSteps(self.executor)
        self.workflow_name = f"{name}.turn"
        self.queue_name = f"{name}_turns"
        self.worker_concurrency = worker_concurrency
        self._queue: Queue | None = None

        async def turn(payload: Payload) -> Payload:
            return await self._turn(payload)

        self._workflow = DBOS.workflow(name=self.workflow_name)(turn)

    def __repr__(self) -> str:
        return f"DBOSRunner({self.name!r})"

    async def ready(self) -> None:
        """Register the runner's queue (once `DBOS.launch()` ran: a queue needs a launched
        DBOS), so that this worker takes turns from it. Call it in every worker after
        launching; `start` calls it too."""
        if self._queue is None:
            self._queue = await DBOS.register_queue_async(
                self.queue_name,
                worker_concurrency=self.worker_concurrency,
                polling_interval_sec=self.polling_interval,
            )

    async def _enqueue(self, workflow_id: str, payload: Payload) -> None:
        await self.ready()
        assert self._queue is not None
        with SetWorkflowID(workflow_id):
            await self._queue.enqueue_async(self._workflow, payload)

    async def _get_event(self, turn_id: str, key: str, wait_seconds: float) -> Any:
        return await DBOS.get_event_async(turn_id, key, timeout_seconds=wait_seconds)

    async def _send(self, turn_id: str, message: Payload, key: str) -> None:
        await DBOS.send_async(turn_id, message, key)

    async def _result(self, turn_id: str) -> Any:
        handle: Any = await DBOS.retrieve_workflow_async(turn_id)
        return await handle.get_result(polling_interval_sec=self.polling_interval)

    def _read_stream(self, turn_id: str, offset: int) -> AsyncIterator[Any]:
        return DBOS.read_stream_async(turn_id, STREAM, offset=offset)

    async def call(
        self,
        prompt: Prompt = (),
        *,
        decisions: Mapping[str, Decision] | None = None,
        conversation_id: str | None = None,
        turn_id: str | None = None,
    ) -> ChatResponse:
        """Run a turn durably and return its response (`start`, then `result`)."""
        turn = await self.start(
            prompt, decisions=decisions, conversation_id=conversation_id, turn_id=turn_id
        )
        return await self.result(turn)

    async def stream(
        self,
        prompt: Prompt = (),
        *,
        decisions: Mapping[str, Decision] | None = None,
        conversation_id: str | None = None,
        turn_id: str | None = None,
    ) -> AsyncIterator[StreamEvent]:
        """Run a turn durably and yield its events (`start(stream=True)`, then `events`);
        a deferred turn yields its `ResponseCompleted` and goes on when decisions come."""
        turn = await self.start(
            prompt,
            decisions=decisions,
            conversation_id=conversation_id,
            turn_id=turn_id,
            stream=True,
        )
        async for _, event in self.events(turn):
            yield event

    # -- the workflow ----------------------------------------------------------------

    async def _turn(self, data: Payload) -> Payload:
        payload = read_payload(data, "turn")
        run_id = DBOS.workflow_id
        assert run_id is not None  # workflow code
        chain = durable_chain(self.source, self.steps, run_id=run_id, toolsets=self.toolsets)
        tools = await DurableToolsets(self.steps, self.toolsets, run_id=run_id).tools()
        messages = messages_from_json(payload["messages"])
        decisions = load_decisions(payload["decisions"]) if payload["decisions"] else None
        streaming = bool(payload["stream"])
        conversation_id = payload["conversation_id"]
        segments: list[ChatResponse] = []
        round = 0
        while True:
            try:
                response = await self._segment(
                    chain, tools, messages, decisions, conversation_id, streaming
                )
            except InvalidDecisions as exc:
                if not segments:
                    raise  # the turn's own decisions: the caller's error
                await DBOS.set_event_async(
                    REFUSED_EVENT, _versioned({"round": round, "error": str(exc)})
                )
                decisions = await self._receive(round)
                if decisions is None:
                    break
                continue
            segments.append(response)
            messages = (*messages, *response.messages)
            if response.finish_reason != "deferred":
                break
            round += 1
            await DBOS.set_event_async(DEFERRED_EVENT, _waiting_payload(round, response))
            decisions = await self._receive(round)
            if decisions is None:
                break
        if streaming:
            await DBOS.close_stream_async(STREAM)
        return _versioned(response_to_json(_combined(segments)))

    async def _receive(self, round: int) -> dict[str, Decision] | None:
        while True:
            message = await DBOS.recv_async(DECISIONS_TOPIC, timeout_seconds=self.decision_timeout)
            if message is None:
                return None
            found = read_payload(message, "decisions")
            if found.get("round") == round:
                return load_decisions(found["decisions"])
            # a stale message (for an earlier wait): dropped

    async def _segment(
        self,
        chain: Chain,
        tools: Sequence[Tool],
        messages: Sequence[Message],
        decisions: Mapping[str, Decision] | None,
        conversation_id: str | None,
        streaming: bool,
    ) -> ChatResponse:
        if not streaming:
            return await chain.call(
                list(messages), decisions=decisions, conversation_id=conversation_id, tools=tools
            )
        response: ChatResponse | None = None
        async for event in chain.stream(
            list(messages), decisions=decisions, conversation_id=conversation_id, tools=tools
        ):
            if isinstance(event, (TextDelta, ReasoningDelta, ToolCallDelta)):
                continue  # written live by the model step
            await DBOS.write_stream_async(STREAM, _versioned(event_to_json(event)))
            if isinstance(event, ResponseCompleted):
                response = event.response
        assert response is not None  # Chain.stream ends with exactly one
        return response


def _check_name(name: str) -> str:
    if not isinstance(name, str) or not name or not all(c.isalnum() or c in "_-" for c in name):
        raise ValueError(f"invalid runner name {name!r}: use letters, digits, '_' or '-'")
    return name


def _kind(decision: Decision) -> str:
    if isinstance(decision, Approve):
        return "approve"
    if isinstance(decision, Reject):
        return "reject"
    if isinstance(decision, Result):
        return "result"
    return "decisions"


def check_decisions(
    waiting: Waiting,
    decisions: Mapping[str, Decision],
    shown: Sequence[DeferredCall] | None = None,
) -> None:
    """`InvalidDecisions` unless every decision names a call `waiting` holds, is of a kind
    that call accepts (`Approve` and `Reject` for an approval, ...) and, with `shown`, each
    shown call has the waiting call's tool and arguments. (The workflow checks the
    decisions again, nested ones included, before anything runs.)"""
    calls = {c.call.id: c for c in waiting.calls}
    unknown = sorted(set(decisions) - set(calls))
    if unknown:
        raise InvalidDecisions(f"no call waits with the id(s) {', '.join(map(repr, unknown))}")
    for call_id, decision in decisions.items():
        kind = _kind(decision)
        if kind not in calls[call_id].accepts:
            raise InvalidDecisions(
                f"call {call_id!r} takes {' or '.join(calls[call_id].accepts)}, not {kind}"
            )
    for call in shown or ():
        expected = waiting.fingerprints.get(call.call.id)
        if expected != call_fingerprint(call.call.name, call.call.arguments):
            raise InvalidDecisions(
                f"call {call.call.id!r} waits with other arguments or another tool than "
                "the one shown"
            )


__all__ = [
    "DECISIONS_TOPIC",
    "DEFAULT_DECISION_TIMEOUT",
    "DEFERRED_EVENT",
    "REFUSED_EVENT",
    "STREAM",
    "DBOSRunner",
    "DBOSSteps",
    "DBOSTurnClient",
    "Waiting",
    "check_decisions",
    "dump_decisions",
    "load_decisions",
    "read_payload",
]
