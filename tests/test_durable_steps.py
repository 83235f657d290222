"""The engine-neutral seam (`advisorchain.durable.steps`): a chain rebuilt by `durable_chain`
runs its model and tools as steps, and gives the in-process transcript, events and usage."""

from __future__ import annotations

import dataclasses
import sqlite3
from collections.abc import Sequence
from typing import Any

import pytest

from advisorchain import (
    Chain,
    ChatRequest,
    ChatResponse,
    ResponseCompleted,
    StreamEvent,
    ToolCall,
    ToolCallFinished,
    ToolCallingAdvisor,
    Usage,
    UserMessage,
    tool,
)
from advisorchain.advisors import ApprovalAdvisor, Approve
from advisorchain.advisors.approval import DeferredApprover, InMemoryApprovalStore
from advisorchain.durable.ledger import MemoryLedger as MemoryEffectLedger
from advisorchain.durable.ledger import SQLiteLedger, StepLedger
from advisorchain.durable.steps import (
    SCHEMA_VERSION,
    STEP_MODEL_CALL,
    STEP_MODEL_STREAM,
    STEP_NAMES,
    STEP_TOOL_CALL,
    UNKNOWN_OUTCOME,
    Claim,
    LocalStepRunner,
    ModelCallInput,
    P,
    StepExecutor,
    StepPayload,
    ToolCallInput,
    durable_chain,
    event_from_json,
    event_to_json,
    messages_to_json,
    response_from_json,
    response_to_json,
    usage_from_json,
    usage_to_json,
)
from advisorchain.providers import ScriptedChatModel

pytestmark = pytest.mark.anyio
PATHS = pytest.mark.parametrize("path", ["call", "stream"])


class Recording(LocalStepRunner):
    """Runs steps in process and records their names."""

    def __init__(self, executor: StepExecutor) -> None:
        super().__init__(executor)
        self.steps: list[str] = []

    async def run_step(self, name: str, payload: StepPayload, result_type: type[P]) -> P:
        self.steps.append(name)
        return await super().run_step(name, payload, result_type)


def script() -> list[Any]:
    return [
        ToolCall.from_arguments("lookup", {"sku": "A1"}, id="c1"),
        ToolCall.from_arguments("broken", {}, id="c2"),
        "A1 costs 3.",
    ]


def make_chain(model: ScriptedChatModel) -> Chain:
    @tool(read_only=True)
    def lookup(sku: str) -> str:
        """Price of a sku."""
        return f"{sku}: 3"

    @tool
    def broken() -> str:
        """Always fails."""
        raise ValueError("no stock service")

    return Chain([ToolCallingAdvisor()], model=model, tools=[lookup, broken])


async def turn(path: str, chain: Chain, *args: Any, **kw: Any) -> tuple[ChatResponse, list[Any]]:
    if path == "call":
        return await chain.call(*args, **kw), []
    events: list[StreamEvent] = [e async for e in chain.stream(*args, **kw)]
    last = events[-1]
    assert isinstance(last, ResponseCompleted)
    return last.response, [normal(e) for e in events]


def normal(event: StreamEvent) -> Any:
    values = event_to_json(event)
    if isinstance(event, ToolCallFinished):
        values["duration"] = 0
    return values


@PATHS
async def test_durable_chain_equals_in_process(path: str) -> None:
    local = make_chain(ScriptedChatModel(script()))
    expected, expected_events = await turn(path, local, "price of A1?")

    worker = make_chain(ScriptedChatModel(script()))
    runner = Recording(StepExecutor.from_chain(worker))
    workflow_side = durable_chain(make_chain(ScriptedChatModel([])), runner, run_id="conv-1")
    got, events = await turn(path, workflow_side, "price of A1?")

    assert got.messages == expected.messages
    assert got.usage == expected.usage
    assert events == expected_events
    model_step = STEP_MODEL_CALL if path == "call" else STEP_MODEL_STREAM
    assert runner.steps == [model_step, STEP_TOOL_CALL, model_step, STEP_TOOL_CALL, model_step]
    assert got.messages[3].text == "Error: ValueError: no stock service"


@PATHS
async def test_deferred_approval_resumes_through_steps(path: str) -> None:
    def chain_for(model: ScriptedChatModel, effects: list[int]) -> Chain:
        @tool(requires_approval=True)
        def pay(amount: int) -> str:
            """Pay."""
            effects.append(amount)
            return f"paid {amount}"

        return Chain(
            [
                ApprovalAdvisor(DeferredApprover(), store=InMemoryApprovalStore()),
                ToolCallingAdvisor(),
            ],
            model=model,
            tools=[pay],
        )

    replies: list[Any] = [ToolCall.from_arguments("pay", {"amount": 5}, id="p1"), "done"]
    effects: list[int] = []
    worker = chain_for(ScriptedChatModel(replies), effects)
    runner = LocalStepRunner(StepExecutor.from_chain(worker))
    chain = durable_chain(chain_for(ScriptedChatModel([]), []), runner, run_id="conv-2")
    first, _ = await turn(path, chain, "pay 5")
    assert first.finish_reason == "deferred" and [d.id for d in first.deferred] == ["p1"]
    assert effects == []
    history = [UserMessage(content="pay 5"), *first.messages]
    second, _ = await turn(path, chain, history, decisions={"p1": Approve()})
    assert effects == [5]
    assert second.text == "done"
    assert second.messages[0].text == "paid 5"


class MemoryLedger:
    """An in-memory `EffectsLedger` (the durable ones live in `durable.ledger`)."""

    def __init__(self) -> None:
        self.claimed: set[tuple[str, str]] = set()
        self.done: dict[tuple[str, str], str] = {}
        self.fingerprints: dict[tuple[str, str], str] = {}

    async def claim(self, run_id: str, call_id: str, fingerprint: str) -> Claim:
        key = (run_id, call_id)
        if self.fingerprints.setdefault(key, fingerprint) != fingerprint:
            return Claim("conflict")
        if key in self.done:
            return Claim("done", self.done[key])
        if key in self.claimed:
            return Claim("unknown")
        self.claimed.add(key)
        return Claim("claimed")

    async def complete(self, run_id: str, call_id: str, result: str) -> None:
        self.done[(run_id, call_id)] = result


async def test_a_tool_with_effects_runs_once_per_claim(tmp_path: Any) -> None:
    db = sqlite3.connect(tmp_path / "effects.db", check_same_thread=False)
    db.execute("create table paid (amount int)")

    @tool
    def pay(amount: int) -> str:
        """Pay."""
        db.execute("insert into paid values (?)", (amount,))
        return f"paid {amount}"

    @tool(idempotent=True)
    def ping() -> str:
        """Ping."""
        db.execute("insert into paid values (0)")
        return "pong"

    ledger = MemoryLedger()
    executor = StepExecutor(models={}, tools=[pay, ping], ledger=ledger)
    payload = ToolCallInput(run_id="r", tool="pay", call_id="c", arguments={"amount": 7})
    first = await executor.tool_call(payload)
    again = await executor.tool_call(payload)  # an activity retried after it finished
    assert first == again and first.status == "ok"
    assert db.execute("select count(*) from paid").fetchone() == (1,)
    # claimed, then the worker died before completing: the outcome is unknown, never rerun
    ledger.claimed.add(("r", "lost"))
    lost = await executor.tool_call(payload.model_copy(update={"call_id": "lost"}))
    assert lost.status == "unknown"
    assert db.execute("select count(*) from paid").fetchone() == (1,)
    # an idempotent tool is not claimed: it runs again on a retry
    ping_payload = ToolCallInput(run_id="r", tool="ping", call_id="p", arguments={})
    await executor.tool_call(ping_payload)
    await executor.tool_call(ping_payload)
    assert db.execute("select count(*) from paid where amount = 0").fetchone() == (2,)


@pytest.mark.parametrize("ledger_kind", ["seam", "memory", "sqlite"])
async def test_another_call_under_a_claimed_id_is_refused(ledger_kind: str, tmp_path: Any) -> None:
    """A claim is bound to the tool and its arguments: another call that reuses a claimed
    id in the run (a model's repeated id after compaction, a changed history) reads an
    error and does not run, never the first call's recorded result."""
    ran: list[int] = []

    @tool
    def pay(amount: int) -> str:
        """Pay."""
        ran.append(amount)
        return f"paid {amount}"

    @tool
    def refund(amount: int) -> str:
        """Refund."""
        ran.append(-amount)
        return f"refunded {amount}"

    ledger: MemoryLedger | StepLedger
    if ledger_kind == "seam":
        ledger = MemoryLedger()
    elif ledger_kind == "memory":
        ledger = StepLedger(MemoryEffectLedger())
    else:
        ledger = StepLedger(SQLiteLedger(tmp_path / "effects.db"))
    executor = StepExecutor(models={}, tools=[pay, refund], ledger=ledger)
    first = ToolCallInput(run_id="r", tool="pay", call_id="c", arguments={"amount": 7})
    assert (await executor.tool_call(first)).status == "ok"
    same = await executor.tool_call(first.model_copy(update={"arguments": {"amount": 7}}))
    assert same.status == "ok" and ran == [7]  # the same call again: the recorded result
    for other in (
        first.model_copy(update={"arguments": {"amount": 700}}),
        first.model_copy(update={"tool": "refund"}),
    ):
        refused = await executor.tool_call(other)
        assert (refused.status, refused.error_type) == ("error", "LedgerConflict")
        assert "already used by a different call" in (refused.error_message or "")
    assert ran == [7]


async def test_unknown_outcome_reaches_the_model() -> None:
    @tool
    def pay(amount: int) -> str:
        """Pay."""
        raise AssertionError("must not run")

    ledger = MemoryLedger()
    ledger.claimed.add(("conv", "p1"))
    model = ScriptedChatModel([ToolCall.from_arguments("pay", {"amount": 1}, id="p1"), "ok"])
    worker = Chain([ToolCallingAdvisor()], model=model, tools=[pay])
    runner = LocalStepRunner(StepExecutor.from_chain(worker, ledger=ledger))
    shell = Chain([ToolCallingAdvisor()], model=ScriptedChatModel([]), tools=[pay])
    response = await durable_chain(shell, runner, run_id="conv").call("pay")
    assert response.messages[1].text == UNKNOWN_OUTCOME


def test_payloads_are_versioned() -> None:
    payload = ModelCallInput(run_id="r", messages="[]")
    assert payload.version == SCHEMA_VERSION
    ModelCallInput.model_validate({"version": 1, "run_id": "r", "messages": "[]"})
    with pytest.raises(ValueError, match="upgrade the worker"):
        ModelCallInput.model_validate(
            {"version": SCHEMA_VERSION + 1, "run_id": "r", "messages": "[]"}
        )
    assert len(set(STEP_NAMES)) == 8 and all(n.startswith("advisorchain.") for n in STEP_NAMES)


async def test_responses_and_events_round_trip() -> None:
    chain = make_chain(ScriptedChatModel(script()))
    events: Sequence[StreamEvent] = [e async for e in chain.stream("hi")]
    for event in events:
        assert event_from_json(event_to_json(event)) == event
    last = events[-1]
    assert isinstance(last, ResponseCompleted)
    back = response_from_json(response_to_json(last.response))
    assert back.messages == last.response.messages and back.usage == last.response.usage
    usage = Usage(input_tokens=7, output_tokens=3, cached_tokens=2, requests=1)
    assert usage_to_json(usage) == dataclasses.asdict(usage)
    assert usage_from_json(usage_to_json(usage)) == usage


async def test_provider_http_retries_are_off_inside_a_step() -> None:
    import httpx

    from advisorchain.durable.steps import without_http_retries
    from advisorchain.providers import FallbackModel
    from advisorchain.providers.openai import OpenAIChatModel

    requests: list[httpx.Request] = []

    def unavailable(request: httpx.Request) -> httpx.Response:
        requests.append(request)
        return httpx.Response(503, json={"error": {"message": "busy"}})

    def model() -> OpenAIChatModel:
        client = httpx.AsyncClient(transport=httpx.MockTransport(unavailable))
        return OpenAIChatModel(
            "m", base_url="http://127.0.0.1:9/v1", api_key="k", http_client=client
        )

    payload = ModelCallInput(run_id="r", messages=messages_to_json([UserMessage(content="hi")]))
    with pytest.raises(Exception, match="503|busy|unavailable"):
        await StepExecutor(models={"model": model(), "other": model()}).model_call(payload)
    assert len(requests) == 1  # one attempt: the engine's policy retries, not the provider
    requests.clear()
    with pytest.raises(Exception, match="503|busy|unavailable"):
        await model().call(ChatRequest(messages=(UserMessage(content="hi"),)))
    assert len(requests) == 3  # in process, the provider's own two retries
    wrapped = FallbackModel([model(), model()])
    without_http_retries(wrapped)
    assert all(m._http.retry.max_retries == 0 for m in wrapped.models)  # type: ignore[attr-defined]


@PATHS
async def test_memory_loads_and_saves_through_steps(path: str) -> None:
    from advisorchain.advisors import MemoryAdvisor
    from advisorchain.advisors.memory import InMemoryChatMemoryStore
    from advisorchain.durable.steps import STEP_MEMORY_LOAD, STEP_MEMORY_SAVE

    def chain_for(model: ScriptedChatModel) -> Chain:
        store = InMemoryChatMemoryStore()
        return Chain([MemoryAdvisor(store), ToolCallingAdvisor()], model=model)

    worker = chain_for(ScriptedChatModel(["one", "two"]))
    runner = Recording(StepExecutor.from_chain(worker))
    chain = durable_chain(chain_for(ScriptedChatModel([])), runner, run_id="m")
    await turn(path, chain, "first", conversation_id="c")
    second, _ = await turn(path, chain, "second", conversation_id="c")
    assert second.text == "two"
    stored = await worker.advisors[0].store.load("c")  # type: ignore[attr-defined]
    assert [m.text for m in stored] == ["first", "one", "second", "two"]
    assert runner.steps.count(STEP_MEMORY_LOAD) == 2
    assert runner.steps.count(STEP_MEMORY_SAVE) == 2
