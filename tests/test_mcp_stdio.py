"""McpToolset against a real MCP server (tests/mcp_servers/calc_server.py) over stdio."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

import anyio
import pytest

try:
    import mcp  # noqa: F401
except ImportError:  # pragma: no cover - only without the extra
    if os.environ.get("CI"):
        raise
    pytest.skip("needs the 'mcp' extra: pip install -e '.[mcp]'", allow_module_level=True)

from advisorchain import (
    Advisor,
    AssistantMessage,
    Chain,
    ChatResponse,
    ToolCall,
    ToolCallingAdvisor,
    ToolExecutionError,
    ToolInvocation,
    ToolMessage,
    ToolNext,
    ToolResult,
)
from advisorchain.advisors import InMemoryChatMemoryStore, MemoryAdvisor
from advisorchain.providers import ScriptedChatModel
from advisorchain.toolsets import McpConnectionError, McpToolset

SERVER = str(Path(__file__).parent / "mcp_servers" / "calc_server.py")


@pytest.fixture
def errlog(tmp_path: Path) -> Iterator[TextIO]:
    with open(tmp_path / "server-stderr.log", "w") as log:
        yield log


def _calc(errlog: TextIO, **options: Any) -> McpToolset:
    return McpToolset.stdio(sys.executable, [SERVER], errlog=errlog, name="calc", **options)


def _call(name: str, call_id: str, **arguments: Any) -> ToolCall:
    return ToolCall.from_arguments(name, arguments, id=call_id)


def _tool_messages(response: ChatResponse) -> list[ToolMessage]:
    return [m for m in response.messages if isinstance(m, ToolMessage)]


@pytest.mark.anyio
async def test_a_full_tool_calling_turn_over_stdio(errlog: TextIO) -> None:
    async with _calc(errlog) as toolset:
        tools = await toolset.tools()
        by_name = {t.name: t for t in tools}
        assert {"add", "divide", "grow", "crash"} <= set(by_name)
        add = by_name["add"]
        assert add.description == "Add two integers."
        assert add.definition.parameters["required"] == ["a", "b"]
        assert add.definition.parameters["properties"]["a"]["type"] == "integer"
        assert add.metadata["mcp_server"] == "calc" and add.metadata["mcp_tool"] == "add"
        assert add.metadata["mcp_output_schema"]["required"] == ["result"]

        model = ScriptedChatModel(
            [[_call("add", "c1", a=2, b=40), _call("add", "c2", a=1, b=1)], "42 and 2"]
        )
        chain = Chain([ToolCallingAdvisor()], model=model, tools=tools)
        response = await chain.call("2+40 and 1+1?")

    assert response.text == "42 and 2"
    assert _tool_messages(response) == [
        ToolMessage(tool_call_id="c1", name="add", content="42"),
        ToolMessage(tool_call_id="c2", name="add", content="2"),
    ]
    assert {t.name for t in model.requests[0].tools} >= {"add", "divide"}


@pytest.mark.anyio
async def test_an_is_error_result_is_an_error_result_and_the_turn_goes_on(errlog: TextIO) -> None:
    async with _calc(errlog) as toolset:
        model = ScriptedChatModel([_call("divide", "c1", a=1, b=0), "Cannot do that."])
        chain = Chain([ToolCallingAdvisor()], model=model, tools=await toolset.tools())
        response = await chain.call("1/0?")
    [result] = _tool_messages(response)
    assert result.is_error
    assert "cannot divide by zero" in result.content
    assert "McpToolError" in result.content
    assert response.text == "Cannot do that."


@pytest.mark.anyio
async def test_a_protocol_error_is_an_error_result_and_the_turn_goes_on(errlog: TextIO) -> None:
    async with _calc(errlog) as toolset:
        model = ScriptedChatModel([_call("reject", "c1", reason="nope"), "ok", "3"])
        chain = Chain([ToolCallingAdvisor()], model=model, tools=await toolset.tools())
        response = await chain.call("try")
        [result] = _tool_messages(response)
        assert result.is_error
        assert "McpProtocolError" in result.content
        assert "rejected: nope" in result.content and "-32602" in result.content
        # The connection is still usable afterwards.
        assert await toolset.call("add", {"a": 1, "b": 2}) == "3"


@pytest.mark.anyio
async def test_a_dead_server_is_a_clear_error(errlog: TextIO) -> None:
    async with _calc(errlog) as toolset:
        tools = await toolset.tools()
        model = ScriptedChatModel(
            [_call("crash", "c1"), _call("add", "c2", a=1, b=1), "The server is gone."]
        )
        chain = Chain([ToolCallingAdvisor()], model=model, tools=tools)
        response = await chain.call("crash it")
        first, second = _tool_messages(response)
        for message in (first, second):
            assert message.is_error
            assert "McpConnectionError" in message.content
            assert "connection to MCP server 'calc' was lost" in message.content
        assert response.text == "The server is gone."
        with pytest.raises(McpConnectionError, match="was lost"):
            await toolset.tools()


@pytest.mark.anyio
async def test_a_dead_server_can_stop_the_turn(errlog: TextIO) -> None:
    async with _calc(errlog) as toolset:
        model = ScriptedChatModel([_call("crash", "c1")])
        chain = Chain(
            [ToolCallingAdvisor(on_tool_error="raise")], model=model, tools=await toolset.tools()
        )
        with pytest.raises(ToolExecutionError) as caught:
            await chain.call("crash it")
    assert isinstance(caught.value.__cause__, McpConnectionError)


@pytest.mark.anyio
@pytest.mark.parametrize(
    "args",
    [["-c", "import sys; sys.exit(1)"], ["-c", "print('not json-rpc')"]],
    ids=["exits", "speaks-nonsense"],
)
async def test_a_server_that_does_not_start_is_a_connection_error(
    errlog: TextIO, args: list[str]
) -> None:
    toolset = McpToolset.stdio(sys.executable, args, errlog=errlog, timeout=20)
    with anyio.fail_after(30), pytest.raises(McpConnectionError, match="cannot connect"):
        await toolset.connect()


@pytest.mark.anyio
async def test_a_missing_command_is_a_connection_error(errlog: TextIO, tmp_path: Path) -> None:
    toolset = McpToolset.stdio(str(tmp_path / "no-such-server"), errlog=errlog)
    with pytest.raises(McpConnectionError, match="cannot connect to MCP server 'no-such-server'"):
        async with toolset:
            pass


@pytest.mark.anyio
async def test_tools_before_connecting_is_a_clear_error(errlog: TextIO) -> None:
    with pytest.raises(McpConnectionError, match="not connected"):
        await _calc(errlog).tools()


@pytest.mark.anyio
async def test_prefix_filter_and_approval(errlog: TextIO) -> None:
    async with _calc(
        errlog,
        prefix="calc_",
        filter=lambda d: d.name != "crash",
        requires_approval={"divide"},
    ) as toolset:
        tools = {t.name: t for t in await toolset.tools()}
        assert "calc_crash" not in tools and "crash" not in tools
        assert tools["calc_divide"].requires_approval
        assert not tools["calc_add"].requires_approval
        assert tools["calc_add"].metadata["mcp_tool"] == "add"
        model = ScriptedChatModel([_call("calc_add", "c1", a=3, b=4), "7"])
        chain = Chain([ToolCallingAdvisor()], model=model, tools=list(tools.values()))
        response = await chain.call("3+4?")
        assert _tool_messages(response)[0].content == "7"


class _RefuseApprovalTools(Advisor):
    """Stands in for an approval link: refuses every tool marked `requires_approval`."""

    async def call_tool(self, invocation: ToolInvocation, next: ToolNext) -> ToolResult:
        if invocation.tool.requires_approval:
            return ToolResult(content="Rejected by a human.", outcome="rejected")
        return await next(invocation)


@pytest.mark.anyio
async def test_approval_marks_reach_call_tool_hooks(errlog: TextIO) -> None:
    async with _calc(errlog, requires_approval={"divide"}) as toolset:
        model = ScriptedChatModel(
            [[_call("divide", "c1", a=1, b=2), _call("add", "c2", a=1, b=2)], "done"]
        )
        chain = Chain(
            [ToolCallingAdvisor(), _RefuseApprovalTools()], model=model, tools=await toolset.tools()
        )
        response = await chain.call("go")
    divided, added = _tool_messages(response)
    assert divided.content == "Rejected by a human." and divided.is_error
    assert added.content == "3" and not added.is_error


@pytest.mark.anyio
async def test_tools_are_cached_and_listed_again_after_list_changed(errlog: TextIO) -> None:
    async with _calc(errlog) as toolset:
        first = await toolset.tools()
        again = await toolset.tools()
        assert [a is b for a, b in zip(first, again, strict=True)] == [True] * len(first)
        assert "double" not in {t.name for t in first}

        changed = anyio.Event()

        async def watch() -> None:
            await toolset.wait_for_tools_change()
            changed.set()

        async with anyio.create_task_group() as group:
            group.start_soon(watch)
            await anyio.wait_all_tasks_blocked()
            assert await toolset.call("grow", {}) == "grown"
            with anyio.fail_after(10):
                await changed.wait()

        refreshed = {t.name: t for t in await toolset.tools()}
        assert "double" in refreshed
        assert refreshed["add"] is {t.name: t for t in first}["add"]  # unchanged: same object
        model = ScriptedChatModel([_call("double", "c1", x=21), "42"])
        chain = Chain([ToolCallingAdvisor()], model=model, tools=list(refreshed.values()))
        response = await chain.call("double 21")
        assert _tool_messages(response)[0].content == "42"


@pytest.mark.anyio
async def test_tool_context_values_are_not_sent_to_the_server(errlog: TextIO) -> None:
    async with _calc(errlog) as toolset:
        model = ScriptedChatModel([_call("echo_arguments", "c1", text="hi"), "ok"])
        chain = Chain([ToolCallingAdvisor()], model=model, tools=await toolset.tools())
        response = await chain.call("echo", tool_context={"api_key": "sk-secret", "tenant": "acme"})
    received = json.loads(_tool_messages(response)[0].text)
    assert received == {"text": "hi"}


@pytest.mark.anyio
async def test_mapped_context_arguments_are_injected_and_hidden(errlog: TextIO) -> None:
    async with _calc(errlog, context_arguments={"tenant_id": "tenant"}) as toolset:
        whoami = {t.name: t for t in await toolset.tools()}["whoami"]
        schema = whoami.definition.parameters
        assert "tenant_id" not in schema["properties"]
        assert schema["required"] == ["question"]

        model = ScriptedChatModel(
            [
                _call("whoami", "c1", question="q"),
                _call("whoami", "c2", question="q", tenant_id="someone-else"),
                "ok",
            ]
        )
        chain = Chain([ToolCallingAdvisor()], model=model, tools=[whoami])
        response = await chain.call("who?", tool_context={"tenant": "acme", "api_key": "sk-1"})
        first, second = (json.loads(m.text) for m in _tool_messages(response))
        assert first == {"question": "q", "tenant_id": "acme"}
        assert second == {"question": "q", "tenant_id": "acme"}  # the model cannot override it

        model = ScriptedChatModel([_call("whoami", "c3", question="q"), "ok"])
        chain = Chain([ToolCallingAdvisor()], model=model, tools=[whoami])
        response = await chain.call("who?", tool_context={"other": "sk-hidden"})
        [missing] = _tool_messages(response)
        assert missing.is_error
        assert "'tenant'" in missing.content and "tenant_id" in missing.content
        assert "sk-hidden" not in missing.content


@pytest.mark.anyio
async def test_memory_and_mcp_tools_over_two_turns(errlog: TextIO) -> None:
    store = InMemoryChatMemoryStore()
    async with _calc(errlog) as toolset:
        model = ScriptedChatModel([_call("add", "c1", a=20, b=22), "42", "I said 42."])
        chain = Chain(
            [MemoryAdvisor(store), ToolCallingAdvisor()], model=model, tools=await toolset.tools()
        )
        await chain.call("20+22?", conversation_id="c")
        await chain.call("What did you say?", conversation_id="c")
    assert [m.role for m in model.requests[2].messages] == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
    ]
    assert (await store.load("c"))[-1] == AssistantMessage(content="I said 42.")


def test_the_repr_names_the_server_only(errlog: TextIO) -> None:
    toolset = McpToolset.stdio(
        sys.executable, [SERVER, "--token", "sk-arg"], env={"TOKEN": "sk-env"}, errlog=errlog
    )
    assert "sk-" not in repr(toolset)


@pytest.mark.anyio
async def test_a_catalog_of_hundreds_of_tools(errlog: TextIO) -> None:
    toolset = McpToolset.stdio(
        sys.executable, [SERVER], env={"CALC_EXTRA_TOOLS": "300"}, errlog=errlog, prefix="c."
    )
    async with toolset:
        tools = await toolset.tools()
        constants = [t for t in tools if t.name.startswith("c.constant_")]
        assert len(constants) == 300
        assert len({t.name for t in tools}) == len(tools)
        model = ScriptedChatModel([_call("c.constant_299", "c1"), "299"])
        chain = Chain([ToolCallingAdvisor()], model=model, tools=tools)
        response = await chain.call("the last one?")
    assert _tool_messages(response)[0].content == "299"
