"""Tool effects (`read_only`, `idempotent`, `sequential`) and the sequential barrier."""

from __future__ import annotations

from typing import Any

import anyio
import anyio.lowlevel
import pytest

from advisorchain import (
    Chain,
    Tool,
    ToolCall,
    ToolCallingAdvisor,
    ToolMessage,
    tool,
    tools_from,
)
from advisorchain.providers import ScriptedChatModel

from path_support import answer


def call(tool_name: str, id: str, **arguments: Any) -> ToolCall:
    return ToolCall.from_arguments(tool_name, arguments, id=id)


def test_effects_default_to_false_and_are_declared_on_the_tool() -> None:
    @tool
    def plain() -> str:
        """Plain."""
        return ""

    @tool(read_only=True, idempotent=True, sequential=True)
    def marked() -> str:
        """Marked."""
        return ""

    assert (plain.read_only, plain.idempotent, plain.sequential) == (False, False, False)
    assert (marked.read_only, marked.idempotent, marked.sequential) == (True, True, True)
    schema_tool = Tool("lookup", "Look up.", None, lambda a, c: "x", read_only=True)
    assert schema_tool.read_only and not schema_tool.idempotent and not schema_tool.sequential


def test_bound_methods_keep_their_effects() -> None:
    class Service:
        @tool(idempotent=True, sequential=True)
        def put(self, key: str) -> str:
            """Put."""
            return key

    [bound] = tools_from(Service())
    assert bound.idempotent and bound.sequential and not bound.read_only


class _Recorder:
    """Tools that log when they start and end; `pair` tools wait for their peer."""

    def __init__(self) -> None:
        self.log: list[str] = []
        self.peers: dict[str, anyio.Event] = {}
        self.waiting: dict[str, int] = {}

    def tools(self) -> list[Tool]:
        recorder = self

        @tool
        async def pair(group: str, name: str) -> str:
            """Runs concurrently with the other call of its group (waits for it)."""
            recorder.log.append(f"start {name}")
            event = recorder.peers.setdefault(group, anyio.Event())
            recorder.waiting[group] = recorder.waiting.get(group, 0) + 1
            if recorder.waiting[group] == 2:
                event.set()
            with anyio.fail_after(5):
                await event.wait()
            await anyio.lowlevel.checkpoint()
            recorder.log.append(f"end {name}")
            return name

        @tool(sequential=True)
        async def alone(name: str) -> str:
            """Must run alone."""
            recorder.log.append(f"start {name}")
            await anyio.lowlevel.checkpoint()
            await anyio.lowlevel.checkpoint()
            recorder.log.append(f"end {name}")
            return name

        return [pair, alone]


def _round() -> list[ToolCall]:
    return [
        call("pair", "1", group="before", name="a1"),
        call("pair", "2", group="before", name="a2"),
        call("alone", "3", name="s1"),
        call("alone", "4", name="s2"),
        call("pair", "5", group="after", name="b1"),
        call("pair", "6", group="after", name="b2"),
    ]


@pytest.mark.anyio
@pytest.mark.parametrize("path", ["call", "stream"])
@pytest.mark.parametrize("max_concurrency", [None, 4])
async def test_a_sequential_call_is_a_barrier_in_call_order(
    path: str, max_concurrency: int | None
) -> None:
    recorder = _Recorder()
    model = ScriptedChatModel([_round(), "done"])
    chain = Chain(
        [ToolCallingAdvisor(max_concurrency=max_concurrency)],
        model=model,
        tools=recorder.tools(),
    )
    response = await answer(path, chain, "go")
    log = recorder.log
    # the calls before the barrier ran together (each waited for the other) ...
    assert set(log[:2]) == {"start a1", "start a2"}
    assert set(log[2:4]) == {"end a1", "end a2"}
    # ... then each sequential call alone, in the order the model emitted them ...
    assert log[4:8] == ["start s1", "end s1", "start s2", "end s2"]
    # ... then the calls after it, together again
    assert set(log[8:10]) == {"start b1", "start b2"}
    assert set(log[10:]) == {"end b1", "end b2"}
    results = [m.content for m in response.messages if isinstance(m, ToolMessage)]
    assert results == ["a1", "a2", "s1", "s2", "b1", "b2"]
    assert response.text == "done"


@pytest.mark.anyio
async def test_without_sequential_tools_the_round_stays_concurrent() -> None:
    recorder = _Recorder()
    calls = [
        call("pair", "1", group="g", name="x"),
        call("pair", "2", group="g", name="y"),
    ]
    model = ScriptedChatModel([calls, "done"])
    chain = Chain([ToolCallingAdvisor()], model=model, tools=recorder.tools())
    await chain.call("go")
    assert set(recorder.log[:2]) == {"start x", "start y"}
