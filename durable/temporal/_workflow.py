"""The conversation workflow: a chain's links as workflow code, its I/O as activities."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.contrib.workflow_streams import WorkflowStream, WorkflowStreamState
from temporalio.exceptions import ApplicationError

from ...core.chain import Chain
from ...core.deferred import Reject, check_decisions
from ...core.events import ResponseCompleted
from ...core.messages import Message
from ...core.response import ChatResponse
from ..steps import (
    STEP_MODEL_CALL,
    STEP_MODEL_STREAM,
    DurableMemoryStore,
    DurableToolsets,
    P,
    StepPayload,
    decision_from_json,
    decision_to_json,
    deferred_fingerprints,
    durable_chain,
    event_to_json,
    messages_from_json,
    messages_to_json,
    response_to_json,
)

WORKFLOW_NAME = "advisorchain.Conversation"
TURN_UPDATE = "advisorchain.turn"
DECIDE_UPDATE = "advisorchain.decide"
TRANSCRIPT_QUERY = "advisorchain.transcript"
STATUS_QUERY = "advisorchain.status"
CLOSE_SIGNAL = "advisorchain.close"
EVENTS_TOPIC = "events"
"""The stream topic of a turn's events, published once from the workflow."""
LIVE_TOPIC = "live"
"""The stream topic of model deltas, published live from the model activity."""

ChainFactory = Callable[[], Chain]


@dataclass(frozen=True)
class DurableOptions:
    """How a conversation runs its steps and its life: activity timeouts, heartbeats and
    retries (`RetryPolicy`: the activity's attempts; a model's own HTTP retries should be
    off), how long deferred calls wait (`decision_timeout`, a durable timer: then they are
    rejected as expired), and after how many turns a run continues as new."""

    model_timeout: timedelta = timedelta(minutes=5)
    tool_timeout: timedelta = timedelta(minutes=5)
    heartbeat_timeout: timedelta | None = timedelta(seconds=10)
    retry: RetryPolicy = field(
        default_factory=lambda: RetryPolicy(
            maximum_attempts=5,
            initial_interval=timedelta(milliseconds=200),
            non_retryable_error_types=["UnknownStep", "ValidationError", "StepLimitExceeded"],
        )
    )
    decision_timeout: timedelta | None = None
    turns_per_run: int = 200
    live_deltas: bool = True


@dataclass(frozen=True)
class _Served:
    factory: ChainFactory
    options: DurableOptions
    toolsets: tuple[str, ...]


_CHAINS: dict[str, _Served] = {}
"""The chain factory, options and MCP toolsets' names of each chain name this process
serves workflows of."""


def register_chain(
    name: str, factory: ChainFactory, options: DurableOptions, toolsets: Sequence[str] = ()
) -> None:
    """Serve `factory`'s chain to the conversation workflows started with chain `name`,
    with the tools of the worker's MCP toolsets named `toolsets` listed each turn."""
    _CHAINS[name] = _Served(factory, options, tuple(toolsets))


@dataclass
class ConversationInput:
    """A conversation's start (or its continuation as new): the name its chain is
    registered under (`create_worker(..., name=...)`, the task queue by default), the
    transcript so far, the
    ids of turns already applied (duplicates are refused), the turn count, the stream's
    state, and the waiting calls' fingerprints and deadline."""

    chain: str = ""
    messages: str = "[]"
    applied: list[str] = field(default_factory=list)
    turns: int = 0
    stream: WorkflowStreamState | None = None
    fingerprints: dict[str, str] = field(default_factory=dict)
    deadline: float | None = None


@dataclass
class TurnInput:
    """One turn: its id (a retry of the same id is a duplicate, refused), the turn count
    the caller saw (`expected_turn`: a stale caller is refused), the new messages (JSON),
    and whether it streams."""

    turn_id: str
    messages: str = "[]"
    expected_turn: int | None = None
    stream: bool = False


@dataclass
class DecideInput:
    """A resume: decisions by call id (`decision_to_json`), and the arguments fingerprint
    of each decided call as the caller was shown it (`TurnOutput.fingerprints`)."""

    turn_id: str
    decisions: dict[str, Any]
    fingerprints: dict[str, str] = field(default_factory=dict)
    stream: bool = False


@dataclass
class TurnOutput:
    """A turn's response (`response_to_json`), its number, the fingerprints of the calls it
    waits on, and the stream offset just past its events."""

    turn: int
    response: dict[str, Any]
    fingerprints: dict[str, str] = field(default_factory=dict)
    end_offset: int = 0


class TemporalStepRunner:
    """Runs steps as activities of the current workflow (`StepRunner`), with the options'
    timeouts, heartbeat and retry policy; the activity's name is the step's name."""

    def __init__(self, options: DurableOptions) -> None:
        self.options = options

    async def run_step(self, name: str, payload: StepPayload, result_type: type[P]) -> P:
        """Execute the activity `name`; its output."""
        is_model = name in (STEP_MODEL_CALL, STEP_MODEL_STREAM)
        timeout = self.options.model_timeout if is_model else self.options.tool_timeout
        result: P = await workflow.execute_activity(
            name,
            payload,
            result_type=result_type,
            start_to_close_timeout=timeout,
            heartbeat_timeout=self.options.heartbeat_timeout,
            retry_policy=self.options.retry,
        )
        return result


class TurnRefused(ApplicationError):
    """A turn or decision the workflow refuses (in the update's validator)."""


@workflow.defn(name=WORKFLOW_NAME)
class ConversationWorkflow:
    """One conversation. Each turn arrives as the update `advisorchain.turn`, each resume
    as `advisorchain.decide`; their validators refuse a duplicate turn id, a stale turn
    (another ran since the caller looked), a turn while calls wait, and decisions for ids
    that do not wait, of the wrong kind, or bound to other arguments (fingerprints). Turns
    run one at a time: the chain (built by the task queue's factory, rebuilt by
    `durable_chain`) runs here; its model and tool calls are activities. Events go to the
    workflow's stream (topic `events`); the model activity publishes deltas live (topic
    `live`). Deferred calls wait here; with `decision_timeout`, a durable timer rejects
    them when it fires. After `turns_per_run` turns the run continues as new. A chain with
    a `MemoryAdvisor` gets only each turn's new messages: its history comes from the
    worker's store through the step `advisorchain.memory.load`. Each turn first lists the
    tools of the worker's MCP toolsets (`advisorchain.mcp.list`, `DurableToolsets`) and
    runs with them."""

    @workflow.init
    def __init__(self, start: ConversationInput) -> None:
        self.chain_name = start.chain or workflow.info().task_queue
        self.stream = WorkflowStream(start.stream)
        self.events = self.stream.topic(EVENTS_TOPIC)
        self.messages: tuple[Message, ...] = messages_from_json(start.messages)
        self.applied: list[str] = list(start.applied)
        self.turns = start.turns
        self.started_turns = start.turns
        self.fingerprints = dict(start.fingerprints)
        self.deadline = start.deadline
        self.closing = False
        self.run_turns = 0
        self.lock = asyncio.Lock()
        self._chain: Chain | None = None
        self._toolsets: DurableToolsets | None = None
        self._memory = False

    def _registered(self) -> _Served:
        found = _CHAINS.get(self.chain_name)
        if found is None:
            raise ApplicationError(
                f"no chain named {self.chain_name!r} on this worker", type="UnknownChain"
            )
        return found

    def _options(self) -> DurableOptions:
        return self._registered().options

    def chain(self) -> Chain:
        """The chain, rebuilt to run its I/O as activities (built once per run), and the
        worker's MCP toolsets to list each turn."""
        if self._chain is None:
            served = self._registered()
            runner = TemporalStepRunner(served.options)
            run_id = workflow.info().workflow_id
            self._chain = durable_chain(
                served.factory(), runner, run_id=run_id, toolsets=served.toolsets
            )
            self._toolsets = DurableToolsets(runner, served.toolsets, run_id=run_id)
            self._memory = any(
                isinstance(getattr(a, "store", None), DurableMemoryStore)
                for a in self._chain.advisors
            )
        return self._chain

    @workflow.run
    async def run(self, start: ConversationInput) -> str:
        """Wait for turns; expire waiting calls at their deadline; continue as new."""
        options = self._options()
        while True:
            if self.fingerprints and self.deadline is not None:
                remaining = self.deadline - workflow.time()
                try:
                    await workflow.wait_condition(
                        lambda: not self.fingerprints or self.closing,
                        timeout=max(remaining, 0.001),
                    )
                except TimeoutError:
                    await self._expire()
                continue
            await workflow.wait_condition(
                lambda: (
                    self.closing
                    or (self.run_turns >= options.turns_per_run and not self.fingerprints)
                    or (bool(self.fingerprints) and self.deadline is not None)
                )
            )
            if self.closing:
                await workflow.wait_condition(workflow.all_handlers_finished)
                return messages_to_json(self.messages)
            if self.run_turns >= options.turns_per_run and not self.fingerprints:
                await workflow.wait_condition(lambda: not self.lock.locked())
                await self.stream.continue_as_new(lambda state: [self._state(state)])

    def _state(self, stream: WorkflowStreamState) -> ConversationInput:
        return ConversationInput(
            chain=self.chain_name,
            messages=messages_to_json(self.messages),
            applied=self.applied[-1000:],
            turns=self.turns,
            stream=stream,
            fingerprints=self.fingerprints,
            deadline=self.deadline,
        )

    # -- turns -------------------------------------------------------------------------------

    @workflow.update(name=TURN_UPDATE)
    async def turn(self, request: TurnInput) -> TurnOutput:
        """Run one turn on the new messages."""
        self._admit(request.turn_id)
        new = messages_from_json(request.messages)
        async with self.lock:
            return await self._run(request.stream, new, None)

    @turn.validator
    def _check_turn(self, request: TurnInput) -> None:
        self._check_fresh(request.turn_id)
        if request.expected_turn is not None and request.expected_turn != self.started_turns:
            raise TurnRefused(
                f"stale turn: the conversation is at turn {self.started_turns}, the caller "
                f"expected {request.expected_turn}",
                type="StaleTurn",
                non_retryable=True,
            )
        if self.fingerprints:
            raise TurnRefused(
                "calls wait for decisions "
                f"({', '.join(self.fingerprints)}): decide them first (advisorchain.decide)",
                type="CallsWaiting",
                non_retryable=True,
            )
        try:
            messages_from_json(request.messages)
        except ValueError as exc:
            raise TurnRefused(
                f"not messages: {exc}", type="InvalidTurn", non_retryable=True
            ) from None

    @workflow.update(name=DECIDE_UPDATE)
    async def decide(self, request: DecideInput) -> TurnOutput:
        """Resume the waiting calls with the decisions."""
        self._admit(request.turn_id)
        decisions = {k: decision_from_json(v) for k, v in request.decisions.items()}
        async with self.lock:
            return await self._run(request.stream, (), decisions)

    @decide.validator
    def _check_decide(self, request: DecideInput) -> None:
        self._check_fresh(request.turn_id)
        if not self.fingerprints:
            raise TurnRefused("no call waits for a decision", type="NothingWaits",
                              non_retryable=True)  # fmt: skip
        problems = []
        for call_id, given in request.fingerprints.items():
            expected = self.fingerprints.get(call_id)
            if expected is not None and given != expected:
                problems.append(f"{call_id!r} waits with other arguments than the caller saw")
        for call_id in request.decisions:
            if call_id in self.fingerprints and call_id not in request.fingerprints:
                problems.append(f"{call_id!r}: no arguments fingerprint given")
        try:
            decisions = {k: decision_from_json(v) for k, v in request.decisions.items()}
            check_decisions(self.messages, decisions)
        except (ValueError, TypeError, KeyError) as exc:
            problems.append(str(exc))
        if problems:
            raise TurnRefused("; ".join(problems), type="InvalidDecisions", non_retryable=True)

    @workflow.query(name=TRANSCRIPT_QUERY)
    def transcript(self) -> str:
        """The conversation's transcript (`dump_messages` JSON)."""
        return messages_to_json(self.messages)

    @workflow.query(name=STATUS_QUERY)
    def status(self) -> dict[str, Any]:
        """The turn count and the calls that wait (with their fingerprints)."""
        return {"turns": self.started_turns, "waiting": dict(self.fingerprints)}

    @workflow.signal(name=CLOSE_SIGNAL)
    def close(self) -> None:
        """End the conversation once running turns finished."""
        self.closing = True

    def _check_fresh(self, turn_id: str) -> None:
        if not turn_id or turn_id in self.applied:
            raise TurnRefused(
                f"duplicate turn {turn_id!r}: it was applied already",
                type="DuplicateTurn",
                non_retryable=True,
            )
        if self.closing:
            raise TurnRefused("the conversation is closing", type="Closing", non_retryable=True)

    def _admit(self, turn_id: str) -> None:
        # Counted as it starts (not when it ends), so that a turn sent while this one runs
        # with the same expectation is refused as stale by its validator.
        self.applied.append(turn_id)
        self.started_turns += 1

    async def _run(
        self, stream: bool, new: tuple[Message, ...], decisions: Mapping[str, Any] | None
    ) -> TurnOutput:
        chain = self.chain()
        transcript = (*self.messages, *new)
        # A chain with a MemoryAdvisor reads its history from the worker's store (the step
        # advisorchain.memory.load), as in process: it gets only the new messages, or the
        # transcript would come twice (with max_messages, or a store that holds more).
        messages = new if self._memory else transcript
        turn = self.turns + 1
        try:
            response = await self._respond(chain, stream, turn, messages, decisions)
        except Exception as exc:
            failed = {"type": "turn_failed", "error": type(exc).__name__}
            self.events.publish({"turn": turn, "event": failed})
            raise ApplicationError(
                f"the turn failed: {type(exc).__name__}", type="TurnFailed", non_retryable=True
            ) from exc
        self.turns = turn
        self.run_turns += 1
        self.messages = (*transcript, *response.messages)
        self.fingerprints = deferred_fingerprints(response)
        timeout = self._options().decision_timeout
        self.deadline = (
            workflow.time() + timeout.total_seconds()
            if self.fingerprints and timeout is not None
            else None
        )
        values = response_to_json(response)
        if not stream:  # the event_to_json of its ResponseCompleted, without a second conversion
            self.events.publish(
                {"turn": turn, "event": {"type": "response_completed", "response": values}}
            )
        return TurnOutput(
            turn=turn,
            response=values,
            fingerprints=dict(self.fingerprints),
            end_offset=self.stream._on_offset(),  # noqa: SLF001
        )

    async def _respond(
        self,
        chain: Chain,
        stream: bool,
        turn: int,
        messages: tuple[Message, ...],
        decisions: Mapping[str, Any] | None,
    ) -> ChatResponse:
        """`chain`'s response to `messages` with the MCP toolsets' tools listed now; a
        streamed turn's events published as they come."""
        assert self._toolsets is not None  # built with the chain
        tools = await self._toolsets.tools()
        conversation_id = workflow.info().workflow_id
        if not stream:
            return await chain.call(
                messages, decisions=decisions, conversation_id=conversation_id, tools=tools
            )
        response: ChatResponse | None = None
        async for event in chain.stream(
            messages, decisions=decisions, conversation_id=conversation_id, tools=tools
        ):
            self.events.publish({"turn": turn, "event": event_to_json(event)})
            if isinstance(event, ResponseCompleted):
                response = event.response
        assert response is not None
        return response

    async def _expire(self) -> None:

        async with self.lock:
            if not self.fingerprints:
                return
            decisions = {
                call_id: decision_from_json(decision_to_json(Reject("the decision expired")))
                for call_id in self.fingerprints
            }
            self.applied.append(f"expired-{uuid.UUID(int=len(self.applied))}")
            self.started_turns += 1
            await self._run(False, (), decisions)


__all__ = [
    "CLOSE_SIGNAL",
    "DECIDE_UPDATE",
    "EVENTS_TOPIC",
    "LIVE_TOPIC",
    "STATUS_QUERY",
    "TRANSCRIPT_QUERY",
    "TURN_UPDATE",
    "WORKFLOW_NAME",
    "ChainFactory",
    "ConversationInput",
    "ConversationWorkflow",
    "DecideInput",
    "DurableOptions",
    "TemporalStepRunner",
    "TurnInput",
    "TurnOutput",
    "TurnRefused",
    "register_chain",
]
