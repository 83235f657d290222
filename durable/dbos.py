"""Durable turns on DBOS: a chain's turn is a DBOS workflow, every model and tool call a step.

    from dbos import DBOS
    DBOS(config={"name": "orders", "system_database_url": "sqlite:///orders.sqlite"})
    runner = DBOSRunner(chain, ledger=SQLiteLedger("effects.db"))   # before DBOS.launch()
    DBOS.launch()
    turn = await runner.start("Pay bob 5")           # the workflow's id
    await runner.decide(turn, {"c1": Approve()})     # from any process, when it waits
    response = await runner.result(turn)

How a turn runs (`DBOSRunner`):

- The workflow `{name}.turn` runs the chain's links as workflow code. The runner rebuilds
  the chain with the same advisors, tools, context and options, around a model whose
  `call` and `stream` are the steps `advisorchain.model.call` / `advisorchain.model.stream`,
  and with one more `call_tool` hook, innermost, that runs each tool in the step
  `advisorchain.tool.<name>`. DBOS records each step's result (a versioned JSON payload,
  `durable.dbos_payloads`); a workflow recovered after its worker died runs its code
  again and reads the recorded results instead of calling the model or the tools again.
- A tool that is neither `idempotent` nor `read_only` runs through the effects-once
  ledger (`durable.ledger.run_once`, keyed by the workflow id and the call id): a step
  retried after it took effect answers the recorded result, or `unknown` when the worker
  died between the effect and its record. Idempotent and read-only tools just run again.
- A turn that ends deferred (`finish_reason == "deferred"`) waits in the workflow: it
  publishes the waiting calls as the event `advisorchain.deferred` and receives decisions
  on the topic `advisorchain.decisions` (`DBOS.recv`, durable: a worker that dies while it
  waits is recovered and keeps waiting). `decide` checks decisions against the waiting
  calls (ids, round, and the arguments' fingerprints the approver was shown) before
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
from functools import partial
from typing import Any

from ..core._extras import install_hint
from ..core.advisor import Advisor
from ..core.chain import Chain
from ..core.deferred import Decision, DeferredCall
from ..core.errors import InvalidDecisions
from ..core.events import (
    AnswerDiscarded,
    ReasoningDelta,
    ResponseCompleted,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
)
from ..core.invocation import ToolInvocation, ToolNext, ToolResult
from ..core.messages import Message
from ..core.model import WrapperModel
from ..core.prompt import Prompt, to_messages
from ..core.request import ChatRequest
from ..core.response import ChatResponse
from ..core.usage import Usage
from .dbos_payloads import (
    Payload,
    dump_decisions,
    dump_deferred,
    dump_event,
    dump_messages,
    dump_response,
    dump_tool_result,
    load_decisions,
    load_deferred,
    load_event,
    load_messages,
    load_response,
    load_tool_result,
)
from .ledger import EffectLedger, call_fingerprint, needs_ledger, run_once

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
MODEL_CALL_STEP = "advisorchain.model.call"
MODEL_STREAM_STEP = "advisorchain.model.stream"
TOOL_STEP = "advisorchain.tool."
"""Step names: the model's call and stream, and `advisorchain.tool.<tool name>`."""
DEFAULT_DECISION_TIMEOUT = 7 * 24 * 3600.0
"""Seconds a turn waits for decisions before it ends deferred."""


@dataclass(frozen=True, slots=True)
class Waiting:
    """What a turn waits on: its `round` (1 for the first wait) and the waiting calls with
    the fingerprint of each one's tool and arguments."""

    round: int
    calls: tuple[DeferredCall, ...]
    fingerprints: Mapping[str, str]


class _StepModel(WrapperModel):
    """The chain's model with each call and stream a DBOS step."""

    async def call(self, request: ChatRequest) -> ChatResponse:
        async def step() -> Payload:
            return dump_response(await self.inner.call(request))

        return load_response(await DBOS.run_step_async({"name": MODEL_CALL_STEP}, step))

    async def stream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        async def step() -> Payload:
            attempt = uuid.uuid4().hex
            marker = {"v": 1, "type": "attempt", "step": DBOS.step_id, "attempt": attempt}
            await DBOS.write_stream_async(STREAM, marker)
            response: ChatResponse | None = None
            async for event in self.inner.stream(request):
                if isinstance(event, ResponseCompleted):
                    response = event.response
                elif not isinstance(event, ToolCallDelta):  # the tool loop assembles those
                    await DBOS.write_stream_async(STREAM, dump_event(event))
            if response is None:
                raise RuntimeError("the model's stream ended without a ResponseCompleted")
            return dump_response(response)

        payload = await DBOS.run_step_async({"name": MODEL_STREAM_STEP}, step)
        yield ResponseCompleted(load_response(payload))


class _ToolSteps(Advisor):
    """The innermost `call_tool` hook: each tool call a DBOS step, through the ledger
    when the tool has effects."""

    def __init__(self, ledger: EffectLedger) -> None:
        self.ledger = ledger

    async def call_tool(self, invocation: ToolInvocation, next: ToolNext) -> ToolResult:
        call = invocation.call
        run_id = DBOS.workflow_id
        if run_id is None:  # outside a workflow: the chain is being used in-process
            return await next(invocation)
        guarded = needs_ledger(invocation.tool)

        async def step() -> Payload:
            run = partial(next, invocation)
            if guarded:
                fingerprint = call_fingerprint(call.name, call.arguments)
                result = await run_once(self.ledger, run_id, call.id, fingerprint, run)
            else:
                result = await run()
            return dump_tool_result(result)

        payload = await DBOS.run_step_async({"name": TOOL_STEP + call.name}, step)
        return load_tool_result(payload)


def durable_chain(chain: Chain, ledger: EffectLedger) -> Chain:
    """`chain` rebuilt for a DBOS workflow: the same advisors, tools, context and options,
    its model's calls as steps, its tools run in steps (through `ledger` when they have
    effects)."""
    advisor_tools = {id(t) for a in chain.advisors for t in a.tools}
    return Chain(
        [*chain.advisors, _ToolSteps(ledger)],
        model=_StepModel(chain.model),
        tools=[t for t in chain.tools if id(t) not in advisor_tools],
        tool_context=chain.tool_context,
        options=chain.options,
    )


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
    return {
        "v": 1,
        "round": round,
        "deferred": [dump_deferred(d) for d in response.deferred],
        "fingerprints": {
            d.call.id: call_fingerprint(d.call.name, d.call.arguments) for d in response.deferred
        },
    }


def _load_waiting(data: Any) -> Waiting:
    return Waiting(
        round=data["round"],
        calls=tuple(load_deferred(d) for d in data["deferred"]),
        fingerprints=dict(data["fingerprints"]),
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
        payload: Payload = {
            "v": 1,
            "messages": dump_messages(list(messages)),
            "decisions": None if decisions is None else dump_decisions(decisions),
            "conversation_id": conversation_id,
            "stream": stream,
        }
        workflow_id = turn_id or f"{self.name}-{uuid.uuid4().hex}"
        await self._enqueue(workflow_id, payload)
        return workflow_id

    async def result(self, turn_id: str) -> ChatResponse:
        """The turn's response once it ended: the whole turn (every segment's messages, the
        usage summed); `finish_reason == "deferred"` if no decision came in time."""
        return load_response(await self._result(turn_id))

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
            turn_id, {"v": 1, "round": waiting.round, "decisions": payload}, DECISIONS_TOPIC
        )

    async def events(
        self, turn_id: str, *, offset: int = 0
    ) -> AsyncIterator[tuple[int, StreamEvent]]:
        """A streamed turn's events from `offset`, each with its offset, until the turn
        ends: reconnect with the offset after the last one seen. A model step retried
        after a failure yields `AnswerDiscarded` before its new attempt's deltas (drop the
        text shown since the last one). Attempt markers take an offset and are not
        yielded."""
        attempts: dict[int, str] = {}
        discarded = 0
        position = offset
        async for value in self._read_stream(turn_id, offset):
            at = position
            position += 1
            if isinstance(value, Mapping) and value.get("type") == "attempt":
                step, attempt = value["step"], value["attempt"]
                seen = attempts.get(step)
                attempts[step] = attempt
                if seen is not None and seen != attempt:
                    discarded += 1
                    yield (
                        at,
                        AnswerDiscarded(
                            "the model step was retried after a worker failed", discarded
                        ),
                    )
                continue
            yield at, load_event(value)


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
        handle = await self._client.retrieve_workflow_async(turn_id)
        return await handle.get_result(polling_interval_sec=0.1)

    def _read_stream(self, turn_id: str, offset: int) -> AsyncIterator[Any]:
        return self._client.read_stream_async(turn_id, STREAM, offset=offset)


class DBOSRunner(_Turns):
    """Runs `chain`'s turns as DBOS workflows (see the module's docstring for the flow).

    Create it before `DBOS.launch()` in every worker (it registers the workflow
    `{name}.turn` and the queue `{name}_turns`); `ledger` guards tools with effects and
    must be shared by every worker (`SQLiteLedger` for one host, `PostgresLedger` for
    several). `decision_timeout` is how long a deferred turn waits for decisions.
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
        self.chain = durable_chain(chain, ledger)
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
        handle = await DBOS.retrieve_workflow_async(turn_id)
        return await handle.get_result()

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

    async def _turn(self, payload: Payload) -> Payload:
        messages = load_messages(payload["messages"])
        decisions = load_decisions(payload["decisions"]) if payload["decisions"] else None
        streaming = bool(payload["stream"])
        conversation_id = payload["conversation_id"]
        segments: list[ChatResponse] = []
        round = 0
        while True:
            try:
                response = await self._segment(messages, decisions, conversation_id, streaming)
            except InvalidDecisions as exc:
                if not segments:
                    raise  # the turn's own decisions: the caller's error
                await DBOS.set_event_async(
                    REFUSED_EVENT, {"v": 1, "round": round, "error": str(exc)}
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
        return dump_response(_combined(segments))

    async def _receive(self, round: int) -> dict[str, Decision] | None:
        while True:
            message = await DBOS.recv_async(DECISIONS_TOPIC, timeout_seconds=self.decision_timeout)
            if message is None:
                return None
            if isinstance(message, Mapping) and message.get("round") == round:
                return load_decisions(message["decisions"])
            # a stale message (for an earlier wait): dropped

    async def _segment(
        self,
        messages: Sequence[Message],
        decisions: Mapping[str, Decision] | None,
        conversation_id: str | None,
        streaming: bool,
    ) -> ChatResponse:
        if not streaming:
            return await self.chain.call(
                list(messages), decisions=decisions, conversation_id=conversation_id
            )
        response: ChatResponse | None = None
        async for event in self.chain.stream(
            list(messages), decisions=decisions, conversation_id=conversation_id
        ):
            if isinstance(event, (TextDelta, ReasoningDelta, ToolCallDelta)):
                continue  # written live by the model step
            await DBOS.write_stream_async(STREAM, dump_event(event))
            if isinstance(event, ResponseCompleted):
                response = event.response
        assert response is not None  # Chain.stream ends with exactly one
        return response


def _check_name(name: str) -> str:
    if not isinstance(name, str) or not name or not all(c.isalnum() or c in "_-" for c in name):
        raise ValueError(f"invalid runner name {name!r}: use letters, digits, '_' or '-'")
    return name


def check_decisions(
    waiting: Waiting,
    decisions: Mapping[str, Decision],
    shown: Sequence[DeferredCall] | None = None,
) -> None:
    """`InvalidDecisions` unless every decision names a call `waiting` holds and, with
    `shown`, each shown call has the waiting call's tool and arguments."""
    ids = {c.call.id for c in waiting.calls}
    unknown = sorted(set(decisions) - ids)
    if unknown:
        raise InvalidDecisions(f"no call waits with the id(s) {', '.join(map(repr, unknown))}")
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
    "MODEL_CALL_STEP",
    "MODEL_STREAM_STEP",
    "REFUSED_EVENT",
    "STREAM",
    "TOOL_STEP",
    "DBOSRunner",
    "DBOSTurnClient",
    "Waiting",
    "check_decisions",
    "durable_chain",
]
