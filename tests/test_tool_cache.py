"""ToolResultCacheAdvisor: read-only results cached per tool, arguments and tenant."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from advisorchain import (
    Advisor,
    Chain,
    ChatResponse,
    Tool,
    ToolCall,
    ToolCallingAdvisor,
    ToolContext,
    ToolInvocation,
    ToolMessage,
    ToolNext,
    ToolResult,
    TracingAdvisor,
    tool,
)
from advisorchain.advisors import ToolResultCacheAdvisor
from advisorchain.providers import ScriptedChatModel

from path_support import answer


def call(tool_name: str, id: str = "c1", **arguments: Any) -> ToolCall:
    return ToolCall.from_arguments(tool_name, arguments, id=id)


class Spy(Advisor):
    """Records the metadata of every result the links after it returned."""

    def __init__(self) -> None:
        self.metadata: list[dict[str, Any]] = []

    async def call_tool(self, invocation: ToolInvocation, next: ToolNext) -> ToolResult:
        result = await next(invocation)
        self.metadata.append(dict(result.metadata))
        return result


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Catalog:
    def __init__(self) -> None:
        self.runs: list[str] = []

    def tools(self) -> list[Tool]:
        catalog = self

        @tool(read_only=True)
        def search(q: str, limit: int = 10, context: ToolContext | None = None) -> str:
            """Search the catalog."""
            tenant = context.get("tenant") if context is not None else None
            catalog.runs.append(f"{tenant}:{q}:{limit}")
            return f"{tenant} results for {q} ({limit})"

        @tool
        def buy(item: str) -> str:
            """Buy (changes things: never cached)."""
            catalog.runs.append(f"buy:{item}")
            return "bought"

        @tool(read_only=True)
        def unstable(q: str) -> str:
            """Fails the first time."""
            catalog.runs.append(f"unstable:{q}")
            if len(catalog.runs) == 1:
                raise ConnectionError("down")
            return "fine"

        return [search, buy, unstable]


def scripted(*rounds: Any) -> ScriptedChatModel:
    script: list[Any] = []
    for r in rounds:
        script += [r, "done"]
    return ScriptedChatModel(script)


def results(response: ChatResponse) -> list[str]:
    contents: list[str] = []
    for message in response.messages:
        if isinstance(message, ToolMessage):
            assert isinstance(message.content, str)
            contents.append(message.content)
    return contents


@pytest.mark.anyio
@pytest.mark.parametrize("path", ["call", "stream"])
async def test_a_repeated_read_only_call_is_answered_from_the_cache(
    path: str, caplog: pytest.LogCaptureFixture
) -> None:
    catalog = Catalog()
    spy = Spy()
    model = scripted(
        call("search", q="shoes"),
        call("search", q="shoes", limit=10),  # the default, written out: the same call
    )
    chain = Chain(
        [ToolCallingAdvisor(), spy, ToolResultCacheAdvisor()],
        model=model,
        tools=catalog.tools(),
    )
    first = await answer(path, chain, "go")
    with caplog.at_level(logging.INFO, logger="advisorchain.cache"):
        second = await answer(path, chain, "go")
    assert catalog.runs == ["None:shoes:10"]
    assert results(first) == results(second) == ["None results for shoes (10)"]
    assert spy.metadata == [{}, {"cache_hit": True}]
    [record] = caplog.records
    assert record.event == "tool_cache_hit"  # type: ignore[attr-defined]
    assert "shoes" not in caplog.text


@pytest.mark.anyio
async def test_arguments_in_any_order_share_an_entry_other_arguments_do_not() -> None:
    catalog = Catalog()
    chain = Chain(
        [ToolCallingAdvisor(), ToolResultCacheAdvisor()],
        model=ScriptedChatModel(
            [
                [
                    ToolCall(id="1", name="search", arguments='{"q": "a", "limit": 2}'),
                    ToolCall(id="2", name="search", arguments='{"q": "b", "limit": 2}'),
                ],
                "done",
                ToolCall(id="3", name="search", arguments='{"limit": 2, "q": "a"}'),
                "done",
            ]
        ),
        tools=catalog.tools(),
    )
    await chain.call("one")
    await chain.call("two")
    assert sorted(catalog.runs) == ["None:a:2", "None:b:2"]  # the tools run concurrently


@pytest.mark.anyio
@pytest.mark.parametrize("path", ["call", "stream"])
async def test_tenants_never_share_entries(path: str) -> None:
    catalog = Catalog()
    cache = ToolResultCacheAdvisor(key=("tenant",))
    model = ScriptedChatModel([call("search", q="x"), "done"] * 5)
    chain = Chain([ToolCallingAdvisor(), cache], model=model, tools=catalog.tools())
    a1 = await answer(path, chain, "go", tool_context={"tenant": "a"})
    b1 = await answer(path, chain, "go", tool_context={"tenant": "b"})
    a2 = await answer(path, chain, "go", tool_context={"tenant": "a"})
    await answer(path, chain, "go")  # no tenant: not cached at all
    await answer(path, chain, "go")
    assert catalog.runs == ["a:x:10", "b:x:10", "None:x:10", "None:x:10"]
    assert results(a1) == results(a2) == ["a results for x (10)"]
    assert results(b1) == ["b results for x (10)"]


@pytest.mark.anyio
async def test_a_key_function_adds_its_part() -> None:
    catalog = Catalog()
    cache = ToolResultCacheAdvisor(key=lambda invocation: invocation.context.conversation_id)
    model = ScriptedChatModel([call("search", q="x"), "done"] * 3)
    chain = Chain([ToolCallingAdvisor(), cache], model=model, tools=catalog.tools())
    await chain.call("go", conversation_id="c1")
    await chain.call("go", conversation_id="c1")
    await chain.call("go", conversation_id="c2")
    assert len(catalog.runs) == 2


@pytest.mark.anyio
@pytest.mark.parametrize("path", ["call", "stream"])
async def test_errors_and_tools_that_are_not_read_only_are_never_cached(path: str) -> None:
    catalog = Catalog()
    model = scripted(
        call("unstable", q="x"),
        call("unstable", q="x"),
        call("unstable", q="x"),
        call("buy", item="hat"),
        call("buy", item="hat"),
    )
    chain = Chain(
        [ToolCallingAdvisor(), ToolResultCacheAdvisor()], model=model, tools=catalog.tools()
    )
    first = await answer(path, chain, "go")
    assert results(first)[0].startswith("Error: ConnectionError")
    await answer(path, chain, "go")
    await answer(path, chain, "go")
    await answer(path, chain, "go")
    await answer(path, chain, "go")
    assert catalog.runs == ["unstable:x", "unstable:x", "buy:hat", "buy:hat"]


@pytest.mark.anyio
async def test_entries_expire_after_ttl_by_the_injected_clock() -> None:
    catalog = Catalog()
    clock = Clock()
    cache = ToolResultCacheAdvisor(ttl=60, clock=clock)
    model = ScriptedChatModel([call("search", q="x"), "done"] * 3)
    chain = Chain([ToolCallingAdvisor(), cache], model=model, tools=catalog.tools())
    await chain.call("go")
    clock.now += 60
    await chain.call("go")  # still fresh at exactly ttl
    clock.now += 0.5
    await chain.call("go")
    assert len(catalog.runs) == 2


@pytest.mark.anyio
async def test_the_cache_is_bounded_least_recently_used_first() -> None:
    catalog = Catalog()
    cache = ToolResultCacheAdvisor(max_entries=2)
    queries = ["a", "b", "a", "c", "a", "b"]  # c evicts b (a was used since), b runs again
    model = ScriptedChatModel([x for q in queries for x in (call("search", q=q), "done")])
    chain = Chain([ToolCallingAdvisor(), cache], model=model, tools=catalog.tools())
    for _ in queries:
        await chain.call("go")
    assert [r.split(":")[1] for r in catalog.runs] == ["a", "b", "c", "b"]
    assert len(cache) == 2
    cache.clear()
    assert len(cache) == 0


@pytest.mark.anyio
async def test_a_hit_is_marked_on_its_tool_span() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    catalog = Catalog()
    model = ScriptedChatModel([call("search", q="x"), "done"] * 2)
    chain = Chain(
        [TracingAdvisor(tracer_provider=provider), ToolCallingAdvisor(), ToolResultCacheAdvisor()],
        model=model,
        tools=catalog.tools(),
    )
    await chain.call("go")
    await chain.call("go")
    spans = [s for s in exporter.get_finished_spans() if s.name == "execute_tool search"]
    assert [dict(s.attributes or {}).get("advisorchain.tool.cache_hit") for s in spans] == [
        None,
        True,
    ]


def test_bad_options_are_refused() -> None:
    with pytest.raises(ValueError):
        ToolResultCacheAdvisor(ttl=0)
    with pytest.raises(ValueError):
        ToolResultCacheAdvisor(max_entries=0)
    with pytest.raises(TypeError):
        ToolResultCacheAdvisor(key="tenant")


@pytest.mark.anyio
async def test_schema_tools_and_unhashable_arguments_are_cached_too() -> None:
    runs: list[dict[str, Any]] = []

    def handler(arguments: dict[str, Any], context: ToolContext) -> str:
        runs.append(arguments)
        return "ok"

    schema = {
        "type": "object",
        "properties": {"tags": {"type": "array", "items": {"type": "string"}}, "n": {}},
    }
    tagged = Tool("tagged", "By tags.", schema, handler, read_only=True)
    model = ScriptedChatModel(
        [
            ToolCall(id="1", name="tagged", arguments='{"tags": ["a", "b"], "n": 1}'),
            "done",
            ToolCall(id="2", name="tagged", arguments='{"n": 1, "tags": ["a", "b"]}'),
            "done",
            ToolCall(id="3", name="tagged", arguments='{"n": true, "tags": ["a", "b"]}'),
            "done",
        ]
    )
    chain = Chain([ToolCallingAdvisor(), ToolResultCacheAdvisor()], model=model, tools=[tagged])
    for _ in range(3):
        await chain.call("go")
    assert [r["n"] for r in runs] == [1, True]


@pytest.mark.anyio
@pytest.mark.parametrize("path", ["call", "stream"])
async def test_the_default_key_never_serves_one_context_to_another(path: str) -> None:
    catalog = Catalog()
    model = ScriptedChatModel([call("search", q="x"), "done"] * 6)
    chain = Chain(
        [ToolCallingAdvisor(), ToolResultCacheAdvisor()], model=model, tools=catalog.tools()
    )
    a1 = await answer(path, chain, "go", tool_context={"tenant": "a", "user": 1})
    b1 = await answer(path, chain, "go", tool_context={"tenant": "b", "user": 1})
    a2 = await answer(path, chain, "go", tool_context={"user": 1, "tenant": "a"})
    # any other value makes another context, whatever its key: bytes are not text,
    # 1 is not True
    await answer(path, chain, "go", tool_context={"tenant": "a", "user": True})
    await answer(path, chain, "go", tool_context={"tenant": b"a", "user": 1})
    await answer(path, chain, "go", tool_context={"tenant": "a", "user": 1, "role": "x"})
    assert catalog.runs == ["a:x:10", "b:x:10", "a:x:10", "b'a':x:10", "a:x:10"]
    assert results(a1) == results(a2) == ["a results for x (10)"]
    assert results(b1) == ["b results for x (10)"]


@pytest.mark.anyio
@pytest.mark.parametrize("path", ["call", "stream"])
async def test_the_default_key_covers_handler_tools_and_skips_contexts_it_cannot_fingerprint(
    path: str,
) -> None:
    runs: list[str] = []

    def handler(arguments: dict[str, Any], context: ToolContext) -> str:
        runs.append(str(context.get("tenant")))
        return f"for {context.get('tenant')}"

    @tool(read_only=True)
    def clock() -> str:
        """Reads no context: shared by every context."""
        runs.append("clock")
        return "noon"

    lookup = Tool(
        "lookup", "Look up.", {"type": "object", "properties": {}}, handler, read_only=True
    )
    assert lookup.takes_context and not clock.takes_context
    model = ScriptedChatModel([[call("lookup", "1"), call("clock", "2")], "done"] * 4)
    chain = Chain(
        [ToolCallingAdvisor(), ToolResultCacheAdvisor()], model=model, tools=[lookup, clock]
    )
    await answer(path, chain, "go", tool_context={"tenant": "a"})
    second = await answer(path, chain, "go", tool_context={"tenant": "b"})
    assert results(second) == ["for b", "noon"]
    client = object()  # not data: its calls are not cached at all
    await answer(path, chain, "go", tool_context={"tenant": "a", "client": client})
    await answer(path, chain, "go", tool_context={"tenant": "a", "client": client})
    assert sorted(runs) == sorted(["a", "clock", "b", "a", "a"])


@pytest.mark.anyio
async def test_an_empty_key_shares_entries_across_contexts_as_asked() -> None:
    catalog = Catalog()
    model = ScriptedChatModel([call("search", q="x"), "done"] * 2)
    chain = Chain(
        [ToolCallingAdvisor(), ToolResultCacheAdvisor(key=())], model=model, tools=catalog.tools()
    )
    await chain.call("go", tool_context={"tenant": "a"})
    await chain.call("go", tool_context={"tenant": "b"})
    assert catalog.runs == ["a:x:10"]
