from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from wire_rules import wire_errors

from advisorchain import Chain, MemoryAdvisor, ToolCallingAdvisor, ToolSearchAdvisor, chain_tool
from advisorchain.advisors import BudgetAdvisor, BudgetExceeded
from advisorchain.advisors.compaction import (
    INTERRUPTED,
    ClearToolResults,
    CompactionAdvisor,
    CompactionBoundary,
    CompactionError,
    Keep,
    Trigger,
    repair,
    waiting_calls,
)
from advisorchain.advisors.compaction.advisor import SUMMARY_ACKNOWLEDGED, SUMMARY_HEADING
from advisorchain.advisors.memory import (
    InMemoryChatMemoryStore,
    PostgresChatMemoryStore,
    SQLiteChatMemoryStore,
)
from advisorchain.core.errors import ChainConfigurationError
from advisorchain.core.events import ResponseCompleted, TextDelta
from advisorchain.core.messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
)
from advisorchain.core.options import ChatOptions
from advisorchain.core.request import ChatRequest
from advisorchain.core.response import ChatResponse
from advisorchain.core.tools import Tool, tool
from advisorchain.core.usage import Usage
from advisorchain.providers import ScriptedChatModel

from postgres_support import drop_tables

pytestmark = pytest.mark.anyio


def summarizer(name: str = "summarizer") -> ScriptedChatModel:
    """Summarizes by quoting the user facts it was given (so tests can read them)."""

    def summarize(request: ChatRequest) -> ChatResponse:
        facts = [
            line.removeprefix("[user] ")
            for line in request.messages[-1].text.splitlines()
            if line.startswith("[user]") or line.startswith("SUMMARY:")
        ]
        return ChatResponse(
            message=AssistantMessage(content="SUMMARY: " + " | ".join(facts)),
            usage=Usage(input_tokens=100, output_tokens=10, requests=1),
        )

    return ScriptedChatModel(summarize, model_name=name)


def echo_model() -> ScriptedChatModel:
    return ScriptedChatModel(lambda r: f"ok {len(r.messages)}")


async def run(chain: Chain, prompt: Any, *, streaming: bool, **kwargs: Any) -> ChatResponse:
    if not streaming:
        return await chain.call(prompt, **kwargs)
    response: ChatResponse | None = None
    async for event in chain.stream(prompt, **kwargs):
        if isinstance(event, ResponseCompleted):
            response = event.response
        elif isinstance(event, TextDelta):
            assert "SUMMARY" not in event.text  # the private call never reaches the stream
    assert response is not None
    return response


def history(turns: int) -> list[Message]:
    messages: list[Message] = []
    for i in range(turns):
        messages.append(UserMessage(content=f"fact {i}"))
        messages.append(AssistantMessage(content=f"noted {i}"))
    return messages


# -- triggers and keep --------------------------------------------------------------


@pytest.mark.parametrize("streaming", [False, True])
async def test_message_trigger_summarizes_all_but_the_last_turns(streaming: bool) -> None:
    model, summary = echo_model(), summarizer()
    compaction = CompactionAdvisor(summary, trigger=Trigger(messages=8), keep=Keep(turns=2))
    chain = Chain([ToolCallingAdvisor(), compaction], model=model)
    prompt = [SystemMessage(content="be brief"), *history(5), UserMessage(content="fact 5")]
    response = await run(chain, prompt, streaming=streaming)
    sent = model.requests[-1].messages
    assert isinstance(sent[0], SystemMessage)
    assert sent[1].text == f"{SUMMARY_HEADING}\nSUMMARY: fact 0 | fact 1 | fact 2 | fact 3"
    assert sent[2].text == SUMMARY_ACKNOWLEDGED
    assert [m.text for m in sent[3:]] == ["fact 4", "noted 4", "fact 5"]
    assert len(summary.requests) == 1
    assert summary.requests[0].options.max_tokens == 1024  # the default max_summary_tokens
    assert summary.requests[0].tools == ()  # a private call: no tools, no caller context
    # the summarizer's usage is the turn's: one request more, its tokens added
    assert response.usage.requests == 2
    assert response.usage.input_tokens >= 100
    assert not wire_errors(sent)


@pytest.mark.parametrize("streaming", [False, True])
async def test_under_the_trigger_nothing_changes(streaming: bool) -> None:
    model, summary = echo_model(), summarizer()
    chain = Chain([CompactionAdvisor(summary, trigger=Trigger(messages=20))], model=model)
    prompt = [*history(3), UserMessage(content="q")]
    await run(chain, prompt, streaming=streaming)
    assert list(model.requests[-1].messages) == prompt
    assert summary.requests == []


@pytest.mark.parametrize("streaming", [False, True])
async def test_estimated_token_trigger_before_the_first_call(streaming: bool) -> None:
    model, summary = echo_model(), summarizer()
    compaction = CompactionAdvisor(summary, trigger=Trigger(tokens=200), keep=Keep(turns=1))
    chain = Chain([compaction], model=model)
    long = [UserMessage(content="x" * 400), AssistantMessage(content="y" * 400)]
    await run(chain, [*long, UserMessage(content="q")], streaming=streaming)
    assert len(summary.requests) == 1
    assert [m.text for m in model.requests[-1].messages][-1] == "q"
    # a short transcript stays under the estimate
    await run(chain, [UserMessage(content="short")], streaming=streaming)
    assert len(summary.requests) == 1


@pytest.mark.parametrize("streaming", [False, True])
async def test_provider_reported_tokens_trigger(streaming: bool) -> None:
    """The estimate says little; the provider said a lot: the provider's count wins."""

    def answer(request: ChatRequest) -> ChatResponse:
        return ChatResponse(
            message=AssistantMessage(content="ok"),
            usage=Usage(input_tokens=5000, output_tokens=1, requests=1),
        )

    model, summary = ScriptedChatModel(answer), summarizer()
    compaction = CompactionAdvisor(summary, trigger=Trigger(tokens=1000), keep=Keep(turns=1))
    chain = Chain([MemoryAdvisor(InMemoryChatMemoryStore()), compaction], model=model)
    await run(chain, "fact 0", streaming=streaming, conversation_id="c")
    assert summary.requests == []  # estimated: a few tokens
    await run(chain, "fact 1", streaming=streaming, conversation_id="c")
    assert len(summary.requests) == 1  # the provider reported 5000 for the last view


@pytest.mark.parametrize("streaming", [False, True])
async def test_fraction_of_the_context_window(streaming: bool) -> None:
    model, summary = echo_model(), summarizer()
    trigger = Trigger(fraction=0.5, context_window=400)
    chain = Chain([CompactionAdvisor(summary, trigger=trigger, keep=Keep(turns=1))], model=model)
    await run(chain, [*history(1), UserMessage(content="z" * 1000)], streaming=streaming)
    assert len(summary.requests) == 1
    await run(chain, [*history(1), UserMessage(content="z" * 100)], streaming=streaming)
    assert len(summary.requests) == 1


async def test_keep_tokens_keeps_whole_groups() -> None:
    summary = summarizer()
    calls = AssistantMessage(
        tool_calls=(ToolCall(id="a", name="f"), ToolCall(id="b", name="f")),
    )
    prompt: list[Message] = [
        *history(3),
        UserMessage(content="go"),
        calls,
        ToolMessage(tool_call_id="a", name="f", content="r" * 300),
        ToolMessage(tool_call_id="b", name="f", content="s" * 300),
        AssistantMessage(content="done"),
    ]
    compaction = CompactionAdvisor(summary, trigger=Trigger(messages=4), keep=Keep(tokens=100))
    view, _, _ = await compaction.view(ChatRequest(messages=tuple(prompt)))
    kept = list(view.messages[1:])
    assert kept[-1].text == "done"
    assert calls not in kept  # its group is bigger than 100 tokens: summarized whole
    assert not any(isinstance(m, ToolMessage) for m in kept)
    assert not wire_errors(view.messages)


def test_configuration_errors() -> None:
    with pytest.raises(ChainConfigurationError):
        Trigger()
    with pytest.raises(ChainConfigurationError):
        Trigger(fraction=0.8)
    with pytest.raises(ChainConfigurationError):
        Keep(turns=1, tokens=10)
    with pytest.raises(ChainConfigurationError):
        ClearToolResults(trigger_tokens=10, exclude="search_tools")
    with pytest.raises(ChainConfigurationError):
        CompactionAdvisor(summarizer(), trigger=Trigger(messages=4), store=object())  # type: ignore[arg-type]


@pytest.mark.parametrize("streaming", [False, True])
async def test_a_failed_summary_is_a_typed_error(streaming: bool) -> None:
    broken = ScriptedChatModel([RuntimeError("down")], model_name="broken")
    chain = Chain([CompactionAdvisor(broken, trigger=Trigger(messages=2))], model=echo_model())
    with pytest.raises(CompactionError, match="summarizer failed: RuntimeError"):
        await run(chain, [*history(3), UserMessage(content="q")], streaming=streaming)


# -- never a broken transcript ------------------------------------------------------


def test_repair_answers_orphaned_calls_and_drops_orphan_results() -> None:
    messages: list[Message] = [
        UserMessage(content="q"),
        AssistantMessage(tool_calls=(ToolCall(id="a", name="f"), ToolCall(id="b", name="g"))),
        ToolMessage(tool_call_id="a", name="f", content="1"),
        ToolMessage(tool_call_id="a", name="f", content="again"),  # a second result
        UserMessage(content="next"),  # b was never answered
        ToolMessage(tool_call_id="zz", name="f", content="stray"),  # answers nothing
        AssistantMessage(content="fine"),
    ]
    repaired = repair(messages)
    assert [m.text for m in repaired] == ["q", "", "1", INTERRUPTED, "next", "fine"]
    assert repaired[3] == ToolMessage(
        tool_call_id="b", name="g", content=INTERRUPTED, is_error=True
    )
    assert not wire_errors(repaired)
    assert repair(repaired) == repaired


def test_a_waiting_call_is_not_repaired() -> None:
    messages: list[Message] = [
        UserMessage(content="q"),
        AssistantMessage(tool_calls=(ToolCall(id="a", name="f"), ToolCall(id="b", name="g"))),
        ToolMessage(tool_call_id="a", name="f", content="1"),
    ]
    assert waiting_calls(messages) == ("b",)
    assert repair(messages) == tuple(messages)


async def test_waiting_call_and_its_group_are_never_compacted() -> None:
    group: list[Message] = [
        AssistantMessage(tool_calls=(ToolCall(id="a", name="f"), ToolCall(id="b", name="g"))),
        ToolMessage(tool_call_id="a", name="f", content="finished"),
    ]
    prompt = [*history(6), UserMessage(content="go"), *group]
    compaction = CompactionAdvisor(summarizer(), trigger=Trigger(messages=2), keep=Keep(tokens=1))
    view, _, _ = await compaction.view(ChatRequest(messages=tuple(prompt)))
    assert list(view.messages[-2:]) == group
    assert view.messages[0].text.startswith(SUMMARY_HEADING)
    assert not wire_errors(view.messages, waiting=True)


@pytest.mark.parametrize("streaming", [False, True])
async def test_an_orphaned_call_never_blocks_compaction(streaming: bool) -> None:
    """ADK #7236: one bad row disabled compaction for good; here it is repaired."""
    model, summary = echo_model(), summarizer()
    broken: list[Message] = [
        UserMessage(content="fact 0"),
        AssistantMessage(tool_calls=(ToolCall(id="lost", name="f"),)),
        UserMessage(content="fact 1"),
        ToolMessage(tool_call_id="ghost", name="f", content="orphan"),
        AssistantMessage(content="noted"),
        *history(4),
        UserMessage(content="q"),
    ]
    chain = Chain([CompactionAdvisor(summary, trigger=Trigger(messages=6))], model=model)
    await run(chain, broken, streaming=streaming)
    sent = model.requests[-1].messages
    assert len(summary.requests) == 1
    assert "[tool f result (error)] [interrupted]" in summary.requests[0].messages[-1].text
    assert "orphan" not in summary.requests[0].messages[-1].text
    assert not wire_errors(sent)


@pytest.mark.parametrize("streaming", [False, True])
async def test_tool_rounds_inside_a_turn_are_compacted_by_group(streaming: bool) -> None:
    @tool
    def lookup(key: str) -> str:
        """Look a key up."""
        return "value " * 50

    rounds = iter(range(100))

    def script(request: ChatRequest) -> Any:
        n = next(rounds)
        if n < 6:
            return [
                ToolCall(id=f"c{n}a", name="lookup", arguments='{"key": "a"}'),
                ToolCall(id=f"c{n}b", name="lookup", arguments='{"key": "b"}'),
            ]
        return "done"

    model, summary = ScriptedChatModel(script), summarizer()
    compaction = CompactionAdvisor(summary, trigger=Trigger(tokens=300), keep=Keep(tokens=250))
    chain = Chain([ToolCallingAdvisor(), compaction], model=model, tools=[lookup])
    response = await run(chain, "go", streaming=streaming)
    assert response.text == "done"
    assert summary.requests
    for request in model.requests:
        assert not wire_errors(request.messages), request.messages
    # the turn's messages (what a memory saves) are all there: the log is not the view
    assert sum(isinstance(m, ToolMessage) for m in response.messages) == 12


# -- a view, not the log --------------------------------------------------------------


@pytest.fixture(params=["memory", "sqlite", "postgres"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Any]:
    if request.param == "memory":
        yield InMemoryChatMemoryStore()
    elif request.param == "sqlite":
        async with SQLiteChatMemoryStore(tmp_path / "m.db") as sqlite_store:
            yield sqlite_store
    else:
        dsn = request.getfixturevalue("postgres_dsn")
        prefix = f"t{uuid.uuid4().hex[:10]}_"
        async with PostgresChatMemoryStore(dsn, table_prefix=prefix) as pg:
            yield pg
        await anyio.to_thread.run_sync(drop_tables, dsn, pg.table, f"{pg.table}_boundaries")


@pytest.mark.parametrize("streaming", [False, True])
async def test_boundary_beside_the_log_and_resummary_by_another_model(
    store: Any, streaming: bool
) -> None:
    model, first = echo_model(), summarizer("first")
    memory = MemoryAdvisor(store)
    compaction = CompactionAdvisor(
        first, trigger=Trigger(messages=6), keep=Keep(turns=1), store=store
    )
    chain = Chain([memory, ToolCallingAdvisor(), compaction], model=model)
    for i in range(6):
        await run(chain, f"fact {i}", streaming=streaming, conversation_id="c")
    log = await store.load("c")
    assert [m.text for m in log if isinstance(m, UserMessage)] == [f"fact {i}" for i in range(6)]
    boundary = await store.load_boundary("c")
    assert isinstance(boundary, CompactionBoundary)
    assert boundary.summarizer == "first"
    assert "fact 0" in boundary.summary  # carried from summary to summary
    calls = len(first.requests)
    # a new process: the boundary is read back, not recomputed
    again = CompactionAdvisor(first, trigger=Trigger(messages=6), keep=Keep(turns=1), store=store)
    chain = Chain([memory, ToolCallingAdvisor(), again], model=model)
    await run(chain, "fact 6", streaming=streaming, conversation_id="c")
    assert model.requests[-1].messages[0].text.startswith(SUMMARY_HEADING)
    # another summarizer does not build on the first one's summary: it reads the log
    second = summarizer("second")
    other = CompactionAdvisor(second, trigger=Trigger(messages=6), keep=Keep(turns=1), store=store)
    chain = Chain([memory, ToolCallingAdvisor(), other], model=model)
    await run(chain, "fact 7", streaming=streaming, conversation_id="c")
    read = second.requests[0].messages[-1].text
    assert "[user] fact 0" in read and "Summary so far" not in read
    assert len(first.requests) <= calls + 1
    latest = await store.load_boundary("c")
    assert latest is not None and latest.summarizer == "second"
    assert len(await store.load("c")) == 16  # the log: every message, never rewritten
    await store.clear("c")
    assert await store.load_boundary("c") is None


# -- tool-result clearing ----------------------------------------------------------------


def results_history(count: int, *, name: str = "read") -> list[Message]:
    messages: list[Message] = [UserMessage(content="read them")]
    for i in range(count):
        messages.append(AssistantMessage(tool_calls=(ToolCall(id=f"r{i}", name=name),)))
        messages.append(ToolMessage(tool_call_id=f"r{i}", name=name, content=f"{i} " * 200))
    return messages


async def test_clearing_in_chunks_keeps_the_prefix_stable() -> None:
    clearing = ClearToolResults(trigger_tokens=500, keep=2, clear_at_least=400)
    compaction = CompactionAdvisor(
        summarizer(), trigger=Trigger(tokens=10**9), clear_tool_results=clearing
    )
    messages = results_history(6)
    sent: list[tuple[Message, ...]] = []
    for i in range(6, 10):
        view, _, _ = await compaction.view(ChatRequest(messages=tuple(messages)))
        sent.append(view.messages)
        messages += results_history(1)[1:]
        messages[-2] = AssistantMessage(tool_calls=(ToolCall(id=f"r{i}", name="read"),))
        messages[-1] = ToolMessage(tool_call_id=f"r{i}", name="read", content=f"{i} " * 200)
    cleared = [sum(m.text == clearing.placeholder for m in view) for view in sent]
    assert cleared[0] >= 2  # at least clear_at_least tokens at once
    assert cleared == sorted(cleared)  # once cleared, stays cleared
    results = [m for m in sent[-1] if isinstance(m, ToolMessage)]
    assert all(m.text != clearing.placeholder for m in results[-2:])  # keep=2
    # between two chunks, each request starts with the previous one (a stable prefix)
    for before, after in zip(sent, sent[1:], strict=False):
        if sum(m.text == clearing.placeholder for m in after) == sum(
            m.text == clearing.placeholder for m in before
        ):
            assert after[: len(before)] == before
    for messages_sent in sent:
        assert not wire_errors(messages_sent)


async def test_clearing_excludes_tools_by_name() -> None:
    clearing = ClearToolResults(trigger_tokens=10, keep=0, clear_at_least=10**6, exclude=["keep"])
    compaction = CompactionAdvisor(
        summarizer(), trigger=Trigger(tokens=10**9), clear_tool_results=clearing
    )
    messages = results_history(2) + results_history(2, name="keep")[1:]
    view, _, _ = await compaction.view(ChatRequest(messages=tuple(messages)))
    by_name = {
        (m.name, m.text == clearing.placeholder)
        for m in view.messages
        if isinstance(m, ToolMessage)
    }
    assert by_name == {("read", True), ("keep", False)}


# -- tool search, budget, sub-chains -------------------------------------------------------


def catalog() -> list[Tool]:
    tools = []
    for name in [
        "weather",
        "stocks",
        "news",
        "sports",
        "music",
        "films",
        "books",
        "maps",
        "trains",
        "flights",
        "hotels",
        "recipes",
    ]:

        async def handler(arguments: dict[str, Any], context: Any, name: str = name) -> str:
            return f"{name} result"

        tools.append(Tool(name, f"Get {name} information", {"type": "object"}, handler))
    return tools


@pytest.mark.parametrize("streaming", [False, True])
async def test_discovered_tools_survive_compaction(streaming: bool) -> None:
    """Spring AI #7034: after compaction, the tool found by search is still attached."""
    turn = iter(range(1000))

    def script(request: ChatRequest) -> Any:
        n = next(turn)
        if n == 0:
            return ToolCall(id="s", name="search_tools", arguments='{"query": "weather"}')
        if n == 1:
            return ToolCall(id="w", name="weather", arguments="{}")
        return "ok"

    model, summary = ScriptedChatModel(script), summarizer()
    memory = MemoryAdvisor(InMemoryChatMemoryStore())
    compaction = CompactionAdvisor(summary, trigger=Trigger(messages=6), keep=Keep(turns=1))
    chain = Chain(
        [memory, ToolCallingAdvisor(), ToolSearchAdvisor(), compaction],
        model=model,
        tools=catalog(),
    )
    await run(chain, "weather?", streaming=streaming, conversation_id="c")
    for i in range(5):
        await run(chain, f"more {i}", streaming=streaming, conversation_id="c")
    assert summary.requests
    last = model.requests[-1]
    assert not any(m.role == "tool" and m.name == "search_tools" for m in last.messages)
    assert "weather" in {t.name for t in last.tools}


@pytest.mark.parametrize("streaming", [False, True])
async def test_the_budget_counts_the_summarizer(streaming: bool) -> None:
    def answer(request: ChatRequest) -> ChatResponse:
        return ChatResponse(message=AssistantMessage(content="ok"), usage=Usage(input_tokens=10))

    budget = BudgetAdvisor(max_input_tokens=50)
    compaction = CompactionAdvisor(summarizer(), trigger=Trigger(messages=4), keep=Keep(turns=1))
    chain = Chain([budget, ToolCallingAdvisor(), compaction], model=ScriptedChatModel(answer))
    await run(chain, [*history(1), UserMessage(content="q")], streaming=streaming)  # 10 tokens
    with pytest.raises(BudgetExceeded):  # 10 for the model and 100 for the summarizer
        await run(chain, [*history(3), UserMessage(content="q")], streaming=streaming)


@pytest.mark.parametrize("streaming", [False, True])
async def test_a_sub_chain_compacts_its_own_turn(streaming: bool) -> None:
    child_model, child_summary = echo_model(), summarizer()
    child = Chain(
        [CompactionAdvisor(child_summary, trigger=Trigger(messages=2), keep=Keep(turns=1))],
        model=child_model,
    )

    def script(request: ChatRequest) -> Any:
        if isinstance(request.messages[-1], UserMessage):
            return ToolCall(id="sub", name="helper", arguments='{"task": "do it"}')
        return "parent done"

    parent = Chain(
        [ToolCallingAdvisor()],
        model=ScriptedChatModel(script),
        tools=[chain_tool(child, "helper", "A helper")],
    )
    response = await run(parent, "go", streaming=streaming)
    assert response.text == "parent done"
    assert not wire_errors(child_model.requests[-1].messages)


@pytest.mark.parametrize("streaming", [False, True])
async def test_traces_count_the_summarizer(streaming: bool) -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from advisorchain import TracingAdvisor

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))

    def answer(request: ChatRequest) -> ChatResponse:
        return ChatResponse(message=AssistantMessage(content="ok"), usage=Usage(input_tokens=7))

    compaction = CompactionAdvisor(summarizer(), trigger=Trigger(messages=4), keep=Keep(turns=1))
    chain = Chain(
        [TracingAdvisor(provider), ToolCallingAdvisor(), compaction],
        model=ScriptedChatModel(answer),
    )
    await run(chain, [*history(3), UserMessage(content="q")], streaming=streaming)
    chats = [s for s in exporter.get_finished_spans() if s.name.startswith("chat")]
    assert chats and chats[-1].attributes is not None
    assert chats[-1].attributes["gen_ai.usage.input_tokens"] == 107  # 7 + the summarizer's 100


def test_a_link_with_model_hooks_after_it_is_warned_about(
    caplog: pytest.LogCaptureFixture,
) -> None:
    compaction = CompactionAdvisor(summarizer(), trigger=Trigger(messages=4))
    Chain([BudgetAdvisor(max_model_calls=3), compaction], model=echo_model())
    assert "place CompactionAdvisor last" not in caplog.text
    Chain([compaction, BudgetAdvisor(max_model_calls=3)], model=echo_model())
    assert "CompactionAdvisor comes before BudgetAdvisor" in caplog.text


async def test_reasoning_stays_whole_in_kept_messages_and_out_of_the_summary() -> None:
    from advisorchain.core.parts import ReasoningPart
    from advisorchain.providers import anthropic

    thought = ReasoningPart(text="secret plan", signature="sig-1", provider="anthropic")
    old = AssistantMessage(content=(thought,), tool_calls=(ToolCall(id="o", name="f"),))
    new = AssistantMessage(content=(thought,), tool_calls=(ToolCall(id="n", name="f"),))
    prompt: list[Message] = [
        UserMessage(content="first"),
        old,
        ToolMessage(tool_call_id="o", name="f", content="1"),
        AssistantMessage(content="done"),
        UserMessage(content="second"),
        new,
        ToolMessage(tool_call_id="n", name="f", content="2"),
    ]
    summary = summarizer()
    compaction = CompactionAdvisor(summary, trigger=Trigger(messages=4), keep=Keep(turns=1))
    view, _, _ = await compaction.view(ChatRequest(messages=tuple(prompt)))
    assert new in view.messages and old not in view.messages
    _, wire = anthropic.wire_messages(view.messages)
    thinking = [b for m in wire for b in m["content"] if b["type"] == "thinking"]
    assert thinking == [{"type": "thinking", "thinking": "secret plan", "signature": "sig-1"}]
    assert "secret plan" not in summary.requests[0].messages[-1].text


# -- running summaries ---------------------------------------------------------------


def numbered_summarizer() -> ScriptedChatModel:
    """Writes `note N` for each summary N and records what it read."""
    counter = iter(range(1, 100))
    return ScriptedChatModel(
        lambda r: ChatResponse(
            message=AssistantMessage(content=f"note {next(counter)}"),
            usage=Usage(input_tokens=100, output_tokens=10, requests=1),
        ),
        model_name="numbered",
    )


@pytest.mark.parametrize("streaming", [False, True])
async def test_a_running_summary_is_appended_to_not_rewritten(streaming: bool) -> None:
    model, summary = echo_model(), numbered_summarizer()
    compaction = CompactionAdvisor(summary, trigger=Trigger(messages=6), keep=Keep(turns=1))
    chain = Chain([ToolCallingAdvisor(), compaction], model=model)
    transcript: list[Message] = []
    for i in range(6):
        transcript.append(UserMessage(content=f"fact {i}"))
        response = await run(chain, transcript, streaming=streaming)
        transcript.append(response.message)
    assert len(summary.requests) >= 2
    second = summary.requests[1].messages[-1].text
    assert "Summary so far" not in second and "note 1" not in second  # only the new part
    assert "[user] fact 0" not in second
    sent = model.requests[-1].messages[0].text
    assert sent.splitlines()[1:3] == ["note 1", "note 2"]  # the first note, kept word for word


@pytest.mark.parametrize("streaming", [False, True])
async def test_a_long_running_summary_is_summarized_again(streaming: bool) -> None:
    model, summary = echo_model(), numbered_summarizer()
    compaction = CompactionAdvisor(
        summary, trigger=Trigger(messages=6), keep=Keep(turns=1), running_summary_tokens=1
    )
    chain = Chain([ToolCallingAdvisor(), compaction], model=model)
    transcript: list[Message] = []
    for i in range(6):
        transcript.append(UserMessage(content=f"fact {i}"))
        response = await run(chain, transcript, streaming=streaming)
        transcript.append(response.message)
    second = summary.requests[1].messages[-1].text
    assert "Summary so far:\nnote 1" in second
    assert model.requests[-1].messages[0].text.splitlines()[1:] == [f"note {len(summary.requests)}"]


@pytest.mark.parametrize("streaming", [False, True])
async def test_summarizer_options_reach_the_private_call_only(streaming: bool) -> None:
    model, summary = echo_model(), summarizer()
    compaction = CompactionAdvisor(
        summary,
        trigger=Trigger(messages=4),
        keep=Keep(turns=1),
        max_summary_tokens=77,
        summarizer_options=ChatOptions(temperature=0.0, top_p=0.5, max_tokens=99),
    )
    chain = Chain([ToolCallingAdvisor(), compaction], model=model)
    await run(chain, history(3), streaming=streaming, temperature=0.9)
    (private,) = summary.requests
    assert (private.options.temperature, private.options.top_p) == (0.0, 0.5)
    assert private.options.max_tokens == 99  # the options win over max_summary_tokens
    assert model.requests[-1].options.temperature == 0.9
    with pytest.raises(ChainConfigurationError):
        CompactionAdvisor(summary, trigger=Trigger(messages=4), summarizer_options={"t": 0})  # type: ignore[arg-type]
    with pytest.raises(ChainConfigurationError):
        CompactionAdvisor(summary, trigger=Trigger(messages=4), running_summary_tokens=0)
