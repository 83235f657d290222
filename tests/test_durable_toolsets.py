"""MCP toolsets on the durable engines (issue 33): a turn lists the worker's toolsets
through the step `advisorchain.mcp.list` and calls their tools through
`advisorchain.mcp.call`; workflow code never touches the toolset. On the seam
(`LocalStepRunner`), on Temporal (the activities in the workflow's history) and on DBOS
(its recorded steps), on call and stream."""

from __future__ import annotations

import json
import os
import sys
import uuid
from collections.abc import Iterator
from contextvars import ContextVar
from pathlib import Path
from typing import Any, TextIO

import pytest

from advisorchain import (
    Chain,
    ChatResponse,
    ResponseCompleted,
    StreamEvent,
    Tool,
    ToolCall,
    ToolCallingAdvisor,
    tool,
)
from advisorchain.core.errors import ChainConfigurationError
from advisorchain.durable import steps
from advisorchain.durable.steps import (
    STEP_MCP_CALL,
    STEP_MCP_LIST,
    STEP_MODEL_CALL,
    STEP_MODEL_STREAM,
    DurableToolsets,
    LocalStepRunner,
    McpListOutput,
    P,
    StepExecutor,
    StepLimitExceeded,
    StepPayload,
    UnknownStep,
    durable_chain,
    listing_of,
)
from advisorchain.providers import ScriptedChatModel

from temporal_support import temporal_address

__all__ = ["temporal_address"]

pytestmark = pytest.mark.anyio
PATHS = pytest.mark.parametrize("path", ["call", "stream"])
SERVER = str(Path(__file__).parent / "mcp_servers" / "calc_server.py")
IN_STEP: ContextVar[str | None] = ContextVar("IN_STEP", default=None)
"""The step running now, in this process (set by `Recording`)."""


@pytest.fixture
def anyio_backend() -> str:
    """Temporal's SDK and DBOS run on asyncio only."""
    return "asyncio"


class Recording(LocalStepRunner):
    """Runs steps in process, recording their names and outputs, `IN_STEP` set while each
    runs."""

    def __init__(self, executor: StepExecutor) -> None:
        super().__init__(executor)
        self.steps: list[str] = []
        self.outputs: list[StepPayload] = []

    async def run_step(self, name: str, payload: StepPayload, result_type: type[P]) -> P:
        self.steps.append(name)
        token = IN_STEP.set(name)
        try:
            output = await super().run_step(name, payload, result_type)
        finally:
            IN_STEP.reset(token)
        self.outputs.append(output)
        return output


class ShopToolset:
    """A toolset (`steps.ToolSource`) whose listings and calls record the step they ran in."""

    name = "shop"

    def __init__(self) -> None:
        self.listed_in: list[str | None] = []
        self.called_in: list[str | None] = []
        self.extra: list[Tool] = []

        async def price(arguments: dict[str, Any], context: Any) -> str:
            self.called_in.append(IN_STEP.get())
            return f"{arguments['sku']}: 3"

        metadata = {"mcp_server": "shop", "mcp_tool": "price"}
        schema = {"type": "object", "properties": {"sku": {"type": "string"}}}
        self.price = Tool("shop_price", "Price of a sku.", schema, price, read_only=True,
                          metadata=metadata)  # fmt: skip
        self.order = Tool("shop_order", "Order a sku.", schema, price, requires_approval=True,
                          metadata={**metadata, "mcp_tool": "order"})  # fmt: skip

    async def tools(self) -> list[Tool]:
        self.listed_in.append(IN_STEP.get())
        return [self.price, self.order, *self.extra]


SCRIPT: list[Any] = [ToolCall.from_arguments("shop_price", {"sku": "A1"}, id="c1"), "A1: 3."]


def bare(model: ScriptedChatModel) -> Chain:
    """The chain without the toolset's tools (the runner lists them)."""
    return Chain([ToolCallingAdvisor()], model=model)


async def run_turn(path: str, runner: Any, prompt: str, **kw: Any) -> ChatResponse:
    """One turn on `runner` (a chain, a `TemporalConversation` or a `DBOSRunner`)."""
    if path == "call":
        response: ChatResponse = await runner.call(prompt, **kw)
        return response
    events: list[StreamEvent] = [e async for e in runner.stream(prompt, **kw)]
    last = events[-1]
    assert isinstance(last, ResponseCompleted)
    return last.response


@PATHS
async def test_a_turn_lists_and_calls_a_toolset_through_steps(path: str) -> None:
    shop = ShopToolset()
    expected = await run_turn(
        path, Chain([ToolCallingAdvisor()], model=ScriptedChatModel(list(SCRIPT)),
                    tools=[shop.price, shop.order]), "price of A1?")  # fmt: skip

    shop = ShopToolset()
    runner = Recording(StepExecutor.from_chain(bare(ScriptedChatModel(SCRIPT)), toolsets=[shop]))
    workflow_side = durable_chain(
        bare(ScriptedChatModel([])), runner, run_id="r", toolsets=["shop"]
    )
    toolsets = DurableToolsets(runner, ["shop"], run_id="r")
    got = await run_turn(path, workflow_side, "price of A1?", tools=await toolsets.tools())

    assert got.messages == expected.messages
    model = STEP_MODEL_CALL if path == "call" else STEP_MODEL_STREAM
    assert runner.steps == [STEP_MCP_LIST, model, STEP_MCP_CALL, model]
    assert shop.listed_in == [STEP_MCP_LIST, STEP_MCP_CALL]  # the call looks its tool up
    assert shop.called_in == [STEP_MCP_CALL]


async def test_listed_tools_keep_the_flags_the_links_read() -> None:
    shop = ShopToolset()
    runner = Recording(StepExecutor(models={}, toolsets=[shop]))
    price, order = await DurableToolsets(runner, ["shop"], run_id="r").tools()
    assert (price.name, price.read_only, price.requires_approval) == ("shop_price", True, False)
    assert (order.name, order.read_only, order.requires_approval) == ("shop_order", False, True)
    assert order.metadata == {"mcp_server": "shop", "mcp_tool": "order"}
    assert order.definition.parameters == shop.order.definition.parameters
    assert order.step == STEP_MCP_CALL  # type: ignore[attr-defined]


async def test_an_unchanged_listing_comes_back_without_its_tools() -> None:
    shop = ShopToolset()
    runner = Recording(StepExecutor(models={}, toolsets=[shop]))
    toolsets = DurableToolsets(runner, ["shop"], run_id="r")
    first = await toolsets.tools()
    again = await toolsets.tools()
    shop.extra.append(Tool("shop_stock", "Stock of a sku.", metadata={"mcp_server": "shop"}))
    changed = await toolsets.tools()

    listings = [o for o in runner.outputs if isinstance(o, McpListOutput)]
    assert [(len(o.tools), o.unchanged) for o in listings] == [(2, False), (0, True), (3, False)]
    assert again == first  # the same tools: a search index over them is kept
    assert [t.name for t in changed] == ["shop_price", "shop_order", "shop_stock"]


def test_the_chain_leaves_the_toolsets_tools_to_the_listing() -> None:
    shop = ShopToolset()

    @tool
    def local() -> str:
        """A tool of the chain's own."""
        return "ok"

    chain = Chain([ToolCallingAdvisor()], model=ScriptedChatModel([]),
                  tools=[shop.price, shop.order, local])  # fmt: skip
    rebuilt = durable_chain(chain, LocalStepRunner(StepExecutor(models={})), run_id="r",
                            toolsets=["shop"])  # fmt: skip
    assert [t.name for t in rebuilt.tools] == ["local"]


async def test_a_listing_past_the_bounds_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    shop = ShopToolset()
    executor = StepExecutor(models={}, toolsets=[shop])
    listing = await executor.mcp_list(steps.McpListInput(toolset="shop"))
    assert len(listing.tools) == 2

    monkeypatch.setattr(steps, "MAX_LISTED_TOOLS", 1)
    with pytest.raises(StepLimitExceeded, match="lists 2 tools"):
        await executor.mcp_list(steps.McpListInput(toolset="shop"))
    monkeypatch.undo()
    monkeypatch.setattr(steps, "MAX_LISTING_BYTES", 100)
    with pytest.raises(StepLimitExceeded, match="bytes of tools"):
        await executor.mcp_list(steps.McpListInput(toolset="shop"))
    monkeypatch.undo()

    shop.extra.append(Tool("shop_long", "x" * steps.MAX_LISTED_TOOL_BYTES))
    with pytest.raises(StepLimitExceeded, match="'shop_long'"):
        await executor.mcp_list(steps.McpListInput(toolset="shop"))
    too_many = [Tool(f"t{i}", "") for i in range(3)]
    monkeypatch.setattr(steps, "MAX_LISTED_TOOLS", 2)
    with pytest.raises(StepLimitExceeded):
        listing_of("many", too_many)


async def test_a_listing_output_holds_no_more_than_the_bound() -> None:
    spec = {"name": "t", "description": "", "parameters": {}}
    too_many = {"fingerprint": "f", "tools": [spec] * (steps.MAX_LISTED_TOOLS + 1)}
    with pytest.raises(ValueError, match="at most"):
        McpListOutput.model_validate(too_many)


async def test_unknown_toolsets_and_tools_are_unknown_steps() -> None:
    executor = StepExecutor(models={}, toolsets=[ShopToolset()])
    with pytest.raises(UnknownStep):
        await executor.mcp_list(steps.McpListInput(toolset="other"))
    call = steps.ToolCallInput(run_id="r", tool="shop_gone", call_id="c1", arguments={})
    with pytest.raises(UnknownStep):
        await executor.tool_call(call)
    with pytest.raises(ChainConfigurationError):
        StepExecutor(models={}, toolsets=[ShopToolset(), ShopToolset()])


# -- a real MCP server (tests/mcp_servers/calc_server.py) on the engines ---------------------

CALC_SCRIPT: list[Any] = [
    ToolCall.from_arguments("add", {"a": 2, "b": 40}, id="c1"),
    "2 + 40 = 42",
    ToolCall.from_arguments("add", {"a": 1, "b": 1}, id="c2"),
    "1 + 1 = 2",
]


def calc_chain() -> Chain:
    return bare(ScriptedChatModel(list(CALC_SCRIPT)))


@pytest.fixture
def errlog(tmp_path: Path) -> Iterator[TextIO]:
    with open(tmp_path / "calc-stderr.log", "w") as log:
        yield log


def calc_toolset(errlog: TextIO) -> Any:
    """The calc server over stdio (needs the `mcp` extra)."""
    if os.environ.get("CI") != "true":
        pytest.importorskip("mcp")
    from advisorchain.toolsets import McpToolset

    return McpToolset.stdio(sys.executable, [SERVER], errlog=errlog, name="calc")


async def two_turns(path: str, runner: Any, **kw: Any) -> None:
    first = await run_turn(path, runner, "What is 2 + 40?", **kw)
    assert first.messages[1].text == "42" and first.text == "2 + 40 = 42"
    second = await run_turn(path, runner, "And 1 + 1?", **kw)
    assert second.messages[1].text == "2" and second.text == "1 + 1 = 2"


@PATHS
async def test_a_real_mcp_server_on_temporal(
    path: str, temporal_address: str, errlog: TextIO
) -> None:
    if os.environ.get("CI") != "true":
        pytest.importorskip("temporalio")
    from temporalio.client import Client

    from advisorchain.durable.temporal import TemporalConversation, create_worker, data_converter

    client = await Client.connect(temporal_address, data_converter=data_converter())
    queue = f"q-{uuid.uuid4().hex}"
    conversation = TemporalConversation(client, f"calc-{uuid.uuid4().hex}", task_queue=queue)
    async with calc_toolset(errlog) as calc:
        async with create_worker(client, queue, calc_chain, toolsets=[calc]):
            await conversation.start()
            await two_turns(path, conversation)
            history = await conversation.handle.fetch_history()

    scheduled = activities(history)
    names = list(scheduled.values())
    assert names.count(STEP_MCP_LIST) == 2 and names.count(STEP_MCP_CALL) == 2
    listings = [
        json.loads(completed.result.payloads[0].data)
        for completed in (
            e.activity_task_completed_event_attributes
            for e in history.events
            if e.HasField("activity_task_completed_event_attributes")
        )
        if scheduled[completed.scheduled_event_id] == STEP_MCP_LIST
    ]
    assert [len(listing["tools"]) > 3 for listing in listings] == [True, False]  # listed once


@PATHS
async def test_a_real_mcp_server_on_dbos(path: str, tmp_path: Path, errlog: TextIO) -> None:
    if os.environ.get("CI") != "true":
        pytest.importorskip("dbos")
    from dbos import DBOS

    from advisorchain.durable.dbos import DBOSRunner
    from advisorchain.durable.ledger import MemoryLedger

    database = f"sqlite:///{tmp_path / 'dbos.sqlite'}"
    DBOS(config={"name": "toolsets", "system_database_url": database, "log_level": "WARNING",
                 "notification_listener_polling_interval_sec": 0.02})  # fmt: skip
    try:
        async with calc_toolset(errlog) as calc:
            runner = DBOSRunner(calc_chain(), ledger=MemoryLedger(), toolsets=[calc],
                                name=f"t{uuid.uuid4().hex[:8]}", polling_interval=0.02)  # fmt: skip
            DBOS.launch()
            await two_turns(path, runner)
            turns = await DBOS.list_workflows_async(name=runner.workflow_name)
            recorded = [
                [s["function_name"] for s in await DBOS.list_workflow_steps_async(t.workflow_id)]
                for t in turns
            ]
    finally:
        DBOS.destroy(destroy_registry=True)
    assert len(recorded) == 2
    for names in recorded:
        assert names.count(STEP_MCP_LIST) == 1 and names.count(STEP_MCP_CALL) == 1, names


def activities(history: Any) -> dict[int, str]:
    """The activities a Temporal history scheduled: their names by event id."""
    return {
        e.event_id: e.activity_task_scheduled_event_attributes.activity_type.name
        for e in history.events
        if e.HasField("activity_task_scheduled_event_attributes")
    }
