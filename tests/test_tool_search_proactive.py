"""ToolSearchAdvisor(proactive=...): tools attached from the user's words, no search call."""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence

import pytest

from advisorchain import (
    AssistantMessage,
    Chain,
    ChatRequest,
    Message,
    ResponseCompleted,
    Tool,
    ToolCall,
    ToolCallingAdvisor,
    ToolDefinition,
    ToolMessage,
    UserMessage,
)
from advisorchain.advisors import (
    InMemoryChatMemoryStore,
    KeywordIndex,
    MemoryAdvisor,
    ProactiveSearch,
    ToolIndex,
    ToolSearchAdvisor,
)
from advisorchain.advisors.tool_search.advisor import format_results
from advisorchain.advisors.tool_search.proactive import (
    action_word,
    asks_for,
    choose,
    request_stems,
    tool_effect,
)
from advisorchain.providers.scripted import ScriptedChatModel

# (name, description, effect): "ro" read-only, "mut" requires approval, "" undeclared.
CATALOG = [
    ("get_weather", "Current weather and forecast for a city.", "ro"),
    ("send_email", "Send an email message to a recipient.", "mut"),
    ("list_emails", "List the email messages in the inbox.", "ro"),
    ("create_invoice", "Create an invoice for a customer order.", "mut"),
    ("translate_text", "Translate text between languages.", ""),
    ("search_flights", "Search flights between two airports on a date.", "ro"),
    ("book_hotel", "Book a hotel room in a city.", "mut"),
    ("find_hotels", "Find hotels in a city with prices.", "ro"),
    ("convert_currency", "Convert an amount between currencies.", "ro"),
    ("get_stock_price", "Latest stock price for a ticker symbol.", "ro"),
    ("delete_file", "Delete a file from the drive.", "mut"),
    ("resize_image", "Resize an image to a width and height.", ""),
]


def make_tools(calls: list[str] | None = None) -> list[Tool]:
    def handler_for(name: str):  # type: ignore[no-untyped-def]
        def handler(arguments: dict[str, object], context: object) -> str:
            if calls is not None:
                calls.append(name)
            return f"{name} ran with {json.dumps(arguments, sort_keys=True)}"

        return handler

    return [
        Tool(
            name,
            description,
            {"type": "object", "properties": {"city": {"type": "string"}}},
            handler_for(name),
            read_only=effect == "ro",
            requires_approval=effect == "mut",
        )
        for name, description, effect in CATALOG
    ]


def names(request: ChatRequest) -> list[str]:
    return [t.name for t in request.tools]


def proactive_advisor(**options: object) -> ToolSearchAdvisor:
    keep = options.pop("keep", "conversation")
    return ToolSearchAdvisor(
        KeywordIndex(),
        proactive=ProactiveSearch(**options),  # type: ignore[arg-type]
        keep=keep,  # type: ignore[arg-type]
    )


def never_searches(request: ChatRequest) -> AssistantMessage | str:
    """A small model: calls the weather tool if it sees it, never the search tool."""
    if any(isinstance(m, ToolMessage) for m in request.messages[-1:]):
        return "It is sunny."
    if "get_weather" in names(request):
        return AssistantMessage(
            tool_calls=(ToolCall.from_arguments("get_weather", {"city": "Paris"}),)
        )
    return "I cannot see a weather tool."


async def run(chain: Chain, prompt: str | list[Message], stream: bool) -> list[Message]:
    if stream:
        events = [e async for e in chain.stream(prompt)]
        final = events[-1]
        assert isinstance(final, ResponseCompleted)
        return list(final.response.messages)
    return list((await chain.call(prompt)).messages)


@pytest.mark.anyio
@pytest.mark.parametrize("stream", [False, True], ids=["call", "stream"])
async def test_the_first_model_call_sees_the_tool_the_request_needs(stream: bool) -> None:
    calls: list[str] = []
    model = ScriptedChatModel(never_searches)
    chain = Chain(
        [ToolCallingAdvisor(), proactive_advisor(top_k=2)],
        model=model,
        tools=make_tools(calls),
    )
    messages = await run(chain, "What's the weather forecast in Paris?", stream)

    assert calls == ["get_weather"]
    first = names(model.requests[0])
    assert first[0] == "search_tools" and "get_weather" in first and len(first) <= 3
    assert isinstance(messages[-1], AssistantMessage) and messages[-1].content == "It is sunny."

    plain_model = ScriptedChatModel(never_searches)
    plain = Chain(
        [ToolCallingAdvisor(), ToolSearchAdvisor(KeywordIndex())],
        model=plain_model,
        tools=make_tools(),
    )
    await run(plain, "What's the weather forecast in Paris?", stream)
    assert names(plain_model.requests[0]) == ["search_tools"]


@pytest.mark.anyio
@pytest.mark.parametrize("stream", [False, True], ids=["call", "stream"])
async def test_attached_tools_stay_for_the_conversation_in_a_stable_order(stream: bool) -> None:
    model = ScriptedChatModel(lambda request: "ok")
    chain = Chain(
        [ToolCallingAdvisor(), proactive_advisor(top_k=2)], model=model, tools=make_tools()
    )
    messages: list[Message] = []
    for text in ["weather forecast for Oslo", "latest stock price of ACME", "translate text"]:
        messages.append(UserMessage(content=text))
        messages.extend(await run(chain, list(messages), stream))

    lists = [names(r) for r in model.requests]
    for before, after in zip(lists, lists[1:], strict=False):
        assert after[: len(before)] == before
    assert lists[0][:2] == ["search_tools", "get_weather"]
    assert "get_stock_price" in lists[1] and "translate_text" in lists[2]


@pytest.mark.anyio
@pytest.mark.parametrize("stream", [False, True], ids=["call", "stream"])
async def test_a_mutating_tool_is_attached_only_when_the_request_asks_for_its_action(
    stream: bool,
) -> None:
    model = ScriptedChatModel(lambda request: "ok")
    chain = Chain(
        [ToolCallingAdvisor(), proactive_advisor(top_k=3, keep="turn")],
        model=model,
        tools=make_tools(),
    )
    await run(chain, "an email to Ann about the hotel", stream)
    await run(chain, "please send an email to Ann", stream)
    await run(chain, "I am deleting that old file now", stream)
    await run(chain, "hotel rooms in Rome", stream)
    await run(chain, "show me the booking of my hotel in Rome", stream)

    about, send, delete, hotels, booking = (names(r) for r in model.requests)
    assert "send_email" not in about and "list_emails" in about
    assert "send_email" in send
    assert "delete_file" in delete
    assert "find_hotels" in hotels and "book_hotel" not in hotels
    assert "book_hotel" not in booking  # "the booking": a noun, no action asked for

    always = ScriptedChatModel(lambda request: "ok")
    chain = Chain(
        [ToolCallingAdvisor(), proactive_advisor(top_k=3, mutating="always")],
        model=always,
        tools=make_tools(),
    )
    await run(chain, "hotel rooms in Rome", stream)
    assert "book_hotel" in names(always.requests[0])


def test_read_only_tools_come_first_and_the_rules_are_concrete() -> None:
    tools = {t.name: t for t in make_tools()}
    option = ProactiveSearch(top_k=3)
    ranking = ["translate_text", "book_hotel", "find_hotels", "get_weather", "convert_currency"]
    assert choose(ranking, tools, "book a hotel", option, set()) == [
        "find_hotels",
        "translate_text",
        "book_hotel",
    ]
    assert choose(ranking, tools, "a hotel", option, {"find_hotels"}) == [
        "get_weather",
        "convert_currency",
        "translate_text",
    ]
    never = ProactiveSearch(top_k=3, mutating="never")
    assert "book_hotel" not in choose(ranking, tools, "book a hotel", never, set())

    assert [tool_effect(tools[n]) for n in ("get_weather", "send_email", "translate_text")] == [
        "read_only",
        "mutating",
        "undeclared",
    ]
    destructive = Tool(
        "fs_rm", "Remove.", metadata={"mcp_tool": "rm_tree", "mcp_destructive": True}
    )
    assert tool_effect(destructive) == "mutating"
    assert action_word(destructive) == "rm"  # the server's own name, not the prefix
    assert action_word(Tool("the_deleteFile", "x")) == "delete"
    assert asks_for(tools["delete_file"], request_stems("it deletes files"))
    assert not asks_for(tools["delete_file"], request_stems("remove the file"))


@pytest.mark.parametrize(
    ("request_text", "asked"),
    [
        ("What phone number do you have on file for me?", False),
        ("Please file a warranty claim for A-1003", True),
        ("I want to file a claim", True),
        ("What is the status of my file claim?", False),
        ("the filing deadline", False),
        ("File the claim now", True),
    ],
)
def test_an_action_word_used_as_a_noun_asks_for_nothing(request_text: str, asked: bool) -> None:
    claim = Tool("file_warranty_claim", "File a warranty claim.", requires_approval=True)
    ranking = ["file_warranty_claim"]
    chosen = choose(ranking, {claim.name: claim}, request_text, ProactiveSearch(top_k=1), set())
    assert (chosen == ["file_warranty_claim"]) is asked
    assert asks_for(claim, request_stems(request_text, actions_only=True)) is asked
    both = Tool("sendEmail", "x", read_only=True, requires_approval=True)
    assert tool_effect(both) == "mutating"


def test_bad_options_are_refused() -> None:
    with pytest.raises(ValueError, match="top_k"):
        ProactiveSearch(top_k=0)
    with pytest.raises(ValueError, match="depth"):
        ProactiveSearch(top_k=5, depth=3)
    with pytest.raises(ValueError, match="mutating"):
        ProactiveSearch(mutating="sometimes")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="cache_size"):
        ProactiveSearch(cache_size=0)
    with pytest.raises(TypeError, match="ProactiveSearch"):
        ToolSearchAdvisor(proactive=3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="native"):
        ToolSearchAdvisor(proactive=ProactiveSearch(), native="bm25")


@pytest.mark.anyio
async def test_the_picks_are_derived_from_the_transcript_again_after_a_restart() -> None:
    tools = make_tools()
    transcript: list[Message] = [
        UserMessage(content="weather forecast for Oslo"),
        AssistantMessage(content="Sunny."),
        UserMessage(content="Find flights from Oslo to Rome"),
    ]
    request = ChatRequest(messages=tuple(transcript), tools=tuple(tools))
    first = proactive_advisor(top_k=2)
    seen = await first.before(request.with_tools((first.search_tool, *tools)))
    again = proactive_advisor(top_k=2)  # a new process: nothing remembered
    resumed = await again.before(request.with_tools((again.search_tool, *tools)))

    assert names(seen) == names(resumed)
    assert names(seen)[:2] == ["search_tools", "get_weather"]
    assert "search_flights" in names(seen)
    per_turn = proactive_advisor(top_k=2, keep="turn")
    latest = await per_turn.before(request.with_tools((per_turn.search_tool, *tools)))
    assert "get_weather" not in names(latest) and "search_flights" in names(latest)


@pytest.mark.anyio
async def test_memory_keeps_the_attached_tools_across_turns() -> None:
    model = ScriptedChatModel(lambda request: "ok")
    chain = Chain(
        [MemoryAdvisor(InMemoryChatMemoryStore()), ToolCallingAdvisor(), proactive_advisor()],
        model=model,
        tools=make_tools(),
    )
    await chain.call("weather forecast for Oslo", conversation_id="c")
    await chain.call("latest stock price of ACME", conversation_id="c")
    first, second = (names(r) for r in model.requests)
    assert "get_weather" in first
    assert second[: len(first)] == first and "get_stock_price" in second


@pytest.mark.anyio
async def test_searches_interleave_with_the_picks_in_transcript_order() -> None:
    tools = make_tools()
    by_name = {t.name: t for t in tools}
    advisor = proactive_advisor(top_k=1)
    transcript: list[Message] = [
        UserMessage(content="weather forecast for Oslo"),
        AssistantMessage(tool_calls=(ToolCall(id="c1", name="search_tools"),)),
        ToolMessage(
            tool_call_id="c1",
            name="search_tools",
            content=format_results([by_name["resize_image"]]),
        ),
        AssistantMessage(content="Done."),
        UserMessage(content="latest stock price of ACME"),
    ]
    request = ChatRequest(messages=tuple(transcript), tools=(advisor.search_tool, *tools))
    shown = await advisor.before(request)
    assert names(shown) == ["search_tools", "get_weather", "resize_image", "get_stock_price"]


class CountingIndex:
    def __init__(self, inner: ToolIndex, searches: list[str], fail: list[bool]) -> None:
        self.inner, self.searches, self.fail = inner, searches, fail

    async def build(self, definitions: Sequence[ToolDefinition]) -> ToolIndex:
        return CountingIndex(await self.inner.build(definitions), self.searches, self.fail)

    async def search(self, query: str, k: int) -> list[str]:
        self.searches.append(query)
        if self.fail[0]:
            raise RuntimeError("embedding service down")
        return await self.inner.search(query, k)


@pytest.mark.anyio
async def test_searches_are_remembered_and_a_failing_one_attaches_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    searches: list[str] = []
    fail = [True]
    advisor = ToolSearchAdvisor(
        CountingIndex(KeywordIndex(), searches, fail), proactive=ProactiveSearch()
    )
    tools = make_tools()
    request = ChatRequest(
        messages=(UserMessage(content="weather forecast for Oslo"),),
        tools=(advisor.search_tool, *tools),
    )
    with caplog.at_level(logging.WARNING):
        failed = await advisor.before(request)
    assert names(failed) == ["search_tools"]
    assert "embedding service down" in caplog.text
    fail[0] = False
    for _ in range(3):
        shown = await advisor.before(request)
        assert "get_weather" in names(shown)
    assert searches == ["weather forecast for Oslo"] * 2  # the failure, then once


@pytest.mark.anyio
async def test_split_searches_each_sub_request_too() -> None:
    searches: list[str] = []
    advisor = ToolSearchAdvisor(
        CountingIndex(KeywordIndex(), searches, [False]),
        proactive=ProactiveSearch(top_k=4, split=True),
    )
    text = "weather forecast for Oslo and then convert 100 dollars to euros"
    request = ChatRequest(
        messages=(UserMessage(content=text),), tools=(advisor.search_tool, *make_tools())
    )
    shown = names(await advisor.before(request))
    assert {"get_weather", "convert_currency"} <= set(shown)
    assert searches == [text, "weather forecast for Oslo", "convert 100 dollars to euros"]


@pytest.mark.anyio
async def test_small_catalogs_and_pinned_tools_are_left_alone() -> None:
    advisor = ToolSearchAdvisor(
        KeywordIndex(), proactive=ProactiveSearch(top_k=2), pinned=["get_weather"]
    )
    tools = make_tools()
    request = ChatRequest(
        messages=(UserMessage(content="weather forecast and the stock price of ACME"),),
        tools=(advisor.search_tool, *tools),
    )
    shown = names(await advisor.before(request))
    assert shown[:2] == ["search_tools", "get_weather"] and len(shown) == 4
    assert shown[2] == "get_stock_price"  # the pinned tool takes none of the 2 places
    small = ToolSearchAdvisor(KeywordIndex(), proactive=ProactiveSearch(), min_tools=20)
    few = await small.before(request.with_tools((small.search_tool, *tools)))
    assert names(few) == [t.name for t in tools]
