"""BudgetAdvisor: per-turn limits; raise with a valid transcript, or one final answer."""

from __future__ import annotations

from typing import Any

import pytest

from advisorchain import (
    Advisor,
    AssistantMessage,
    CallNext,
    Chain,
    ChatRequest,
    ChatResponse,
    Message,
    ResponseCompleted,
    TextDelta,
    ToolCall,
    ToolCallingAdvisor,
    ToolMessage,
    UserMessage,
    tool,
)
from advisorchain.advisors import (
    BudgetAdvisor,
    BudgetExceeded,
    BudgetStore,
    ConversationIdError,
    ConversationSpend,
    InMemoryBudgetStore,
    ModelPrice,
)
from advisorchain.core.errors import AdvisorChainError, ChainConfigurationError
from advisorchain.core.usage import Usage
from advisorchain.providers import ScriptedChatModel


def reply(
    content: str | None = None,
    *calls: ToolCall,
    input: int = 10,
    output: int = 30,
    cached: int = 0,
    model: str = "scripted",
) -> ChatResponse:
    return ChatResponse(
        message=AssistantMessage(content=content, tool_calls=calls),
        finish_reason="tool_calls" if calls else "stop",
        usage=Usage(input, output, cached, 1),
        model=model,
    )


def lookup(id: str) -> ToolCall:
    return ToolCall.from_arguments("lookup", {"q": id}, id=id)


class Lookups:
    def __init__(self, clock: Clock | None = None) -> None:
        self.runs: list[str] = []
        self.clock = clock

    def tool(self) -> Any:
        lookups = self

        @tool
        def lookup(q: str) -> str:
            """Look something up."""
            lookups.runs.append(q)
            if lookups.clock is not None:
                lookups.clock.now += 10
            return f"found {q}"

        return lookup


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def assert_valid(messages: tuple[Message, ...]) -> None:
    asked = [c.id for m in messages if isinstance(m, AssistantMessage) for c in m.tool_calls]
    answered = [m.tool_call_id for m in messages if isinstance(m, ToolMessage)]
    assert sorted(asked) == sorted(answered)
    assert not any(isinstance(m, UserMessage) for m in messages)


async def run(path: str, chain: Chain) -> tuple[ChatResponse, str]:
    if path == "call":
        response = await chain.call("go")
        return response, response.text
    text = ""
    final = None
    async for event in chain.stream("go"):
        if isinstance(event, TextDelta):
            text += event.text
        elif isinstance(event, ResponseCompleted):
            final = event.response
    assert final is not None
    return final, text


def chain_with(
    budget: BudgetAdvisor, model: ScriptedChatModel, lookups: Lookups, where: str
) -> Chain:
    links: list[Advisor] = [ToolCallingAdvisor()]
    links.insert(0 if where == "outside" else 1, budget)
    return Chain(links, model=model, tools=[lookups.tool()])


PATHS = pytest.mark.parametrize("path", ["call", "stream"])
PLACES = pytest.mark.parametrize("where", ["outside", "inside"])


@pytest.mark.anyio
@PATHS
@PLACES
async def test_raise_after_the_call_that_goes_over_with_a_valid_transcript(
    path: str, where: str
) -> None:
    lookups = Lookups()
    model = ScriptedChatModel([reply(None, lookup("a")), reply("thinking", lookup("b")), "never"])
    budget = BudgetAdvisor(max_output_tokens=50)
    with pytest.raises(BudgetExceeded) as caught:
        await run(path, chain_with(budget, model, lookups, where))
    error = caught.value
    assert isinstance(error, AdvisorChainError)
    assert error.limit == "output_tokens"
    assert str(error) == "the turn's budget is exceeded: output tokens: 60 of 50"
    assert lookups.runs == ["a"]  # the call that went over asked for "b": never run
    assert [m.role for m in error.messages] == ["assistant", "tool", "assistant", "tool"]
    assert_valid(error.messages)
    refusal = error.messages[-1]
    assert isinstance(refusal, ToolMessage) and refusal.is_error
    assert error.usage == Usage(20, 60, 0, 2)
    assert error.cost is None
    assert model.remaining == 1


@pytest.mark.anyio
@PATHS
@PLACES
async def test_report_asks_for_one_final_answer_without_tools(path: str, where: str) -> None:
    lookups = Lookups()
    model = ScriptedChatModel(
        [reply(None, lookup("a")), reply(None, lookup("b")), reply("partial answer")]
    )
    budget = BudgetAdvisor(max_output_tokens=50, on_exceed="report")
    response, text = await run(path, chain_with(budget, model, lookups, where))
    assert response.text == text == "partial answer"
    assert lookups.runs == ["a"]
    assert [m.role for m in response.messages] == [
        "assistant",
        "tool",
        "assistant",
        "tool",
        "assistant",
    ]
    assert_valid(response.messages)
    final_request = model.requests[-1]
    assert final_request.options.tool_choice == "none"
    note = final_request.messages[-1]
    assert isinstance(note, UserMessage) and "output tokens: 60 of 50" in note.content
    assert response.usage.requests == 3


@pytest.mark.anyio
@PATHS
@PLACES
async def test_a_used_up_call_budget_stops_before_the_next_call(path: str, where: str) -> None:
    lookups = Lookups()
    model = ScriptedChatModel([reply(None, lookup("a")), reply(None, lookup("b")), "never"])
    budget = BudgetAdvisor(max_model_calls=2)
    with pytest.raises(BudgetExceeded) as caught:
        await run(path, chain_with(budget, model, lookups, where))
    assert caught.value.limit == "model_calls"
    assert lookups.runs == ["a", "b"]
    assert [m.role for m in caught.value.messages] == ["assistant", "tool", "assistant", "tool"]
    assert model.remaining == 1


@pytest.mark.anyio
@PATHS
async def test_report_drops_tool_calls_the_final_answer_still_makes(path: str) -> None:
    lookups = Lookups()
    stubborn = reply("one more look", lookup("c"))
    model = ScriptedChatModel([reply(None, lookup("a")), stubborn])
    budget = BudgetAdvisor(max_model_calls=1, on_exceed="report")
    response, _ = await run(path, chain_with(budget, model, lookups, "outside"))
    assert response.text == "one more look"
    assert response.message.tool_calls == ()
    assert response.finish_reason == "stop"
    assert lookups.runs == ["a"]
    assert_valid(response.messages)


@pytest.mark.anyio
async def test_wall_time_is_checked_between_model_calls() -> None:
    clock = Clock()
    lookups = Lookups(clock)  # each lookup takes 10 "seconds"
    model = ScriptedChatModel([reply(None, lookup("a")), "never"])
    budget = BudgetAdvisor(max_seconds=5, clock=clock)
    with pytest.raises(BudgetExceeded) as caught:
        await run("call", chain_with(budget, model, lookups, "outside"))
    assert caught.value.limit == "seconds"
    assert caught.value.elapsed == 10


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("limits", "expected"),
    [
        ({"max_input_tokens": 15}, "input_tokens"),
        ({"max_total_tokens": 45}, "total_tokens"),
    ],
)
async def test_input_and_total_token_limits(limits: dict[str, int], expected: str) -> None:
    lookups = Lookups()
    model = ScriptedChatModel([reply(None, lookup("a")), reply("x")])
    with pytest.raises(BudgetExceeded) as caught:
        await run("call", chain_with(BudgetAdvisor(**limits), model, lookups, "outside"))  # type: ignore[arg-type]
    assert caught.value.limit == expected


@pytest.mark.anyio
async def test_every_turn_gets_its_own_budget() -> None:
    lookups = Lookups()
    model = ScriptedChatModel(
        [reply(None, lookup("a")), reply("one"), reply(None, lookup("b")), reply("two")]
    )
    chain = chain_with(BudgetAdvisor(max_model_calls=2), model, lookups, "outside")
    assert (await chain.call("first")).text == "one"
    assert (await chain.call("second")).text == "two"


def test_model_price_counts_cached_input_at_its_own_price() -> None:
    price = ModelPrice(input=2.0, output=8.0, cached_input=0.5)
    usage = Usage(input_tokens=1_000_000, output_tokens=500_000, cached_tokens=400_000)
    assert price.cost(usage) == pytest.approx(0.6 * 2.0 + 0.4 * 0.5 + 0.5 * 8.0)
    assert ModelPrice(input=1.0, output=1.0).cost(Usage(100, 0, 100)) == pytest.approx(1e-4)


@pytest.mark.anyio
@PATHS
async def test_cost_limit_from_the_price_table(path: str) -> None:
    lookups = Lookups()
    model = ScriptedChatModel(
        [
            reply(None, lookup("a"), input=1000, output=100, cached=500, model="gpt-x-2025-01"),
            reply(None, lookup("b"), input=2000, output=100, model="gpt-x-2025-01"),
            "never",
        ],
        model_name="gpt-x",
    )
    prices = {"gpt": ModelPrice(1, 1), "gpt-x": ModelPrice(input=10, output=100, cached_input=1)}
    budget = BudgetAdvisor(max_cost=0.03, prices=prices)
    assert budget.price_of("gpt-x-2025-01") is prices["gpt-x"]
    with pytest.raises(BudgetExceeded) as caught:
        await run(path, chain_with(budget, model, lookups, "outside"))
    first = (500 * 10 + 500 * 1 + 100 * 100) / 1e6
    second = (2000 * 10 + 100 * 100) / 1e6
    assert caught.value.limit == "cost"
    assert caught.value.cost == pytest.approx(first + second)
    assert lookups.runs == ["a"]


@pytest.mark.anyio
async def test_a_model_without_a_price_is_never_free() -> None:
    lookups = Lookups()
    model = ScriptedChatModel([reply(None, lookup("a"), model="surprise"), "never"])
    budget = BudgetAdvisor(max_cost=1.0, prices={"scripted": ModelPrice(1, 1)})
    with pytest.raises(BudgetExceeded, match="no price for model 'surprise'"):
        await run("call", chain_with(budget, model, lookups, "outside"))
    assert lookups.runs == []
    with pytest.raises(ChainConfigurationError, match="no price"):
        Chain([BudgetAdvisor(max_cost=1.0, prices={"other": ModelPrice(1, 1)})], model=model)
    with pytest.raises(ChainConfigurationError, match="needs prices"):
        BudgetAdvisor(max_cost=1.0)
    assert BudgetAdvisor(prices={"*": ModelPrice(1, 1)}).price_of("anything") is not None


@pytest.mark.anyio
async def test_after_the_final_answer_a_further_call_raises() -> None:
    class Twice(Advisor):
        single_path = True  # a call-path probe: the test only calls

        async def call(self, request: ChatRequest, next: CallNext) -> ChatResponse:
            await next(request)
            await next(request)
            return await next(request)

    model = ScriptedChatModel(["one", "two", "three"])
    chain = Chain([Twice(), BudgetAdvisor(max_model_calls=1, on_exceed="report")], model=model)
    with pytest.raises(BudgetExceeded):
        await chain.call("go")
    assert model.remaining == 1  # the first call, and the one final answer allowed


def test_bad_options_are_refused() -> None:
    with pytest.raises(ValueError):
        BudgetAdvisor(on_exceed="ignore")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        BudgetAdvisor(max_output_tokens=-1)
    with pytest.raises(ValueError):
        BudgetAdvisor(max_model_calls=0)


@pytest.mark.anyio
@PATHS
async def test_conversation_totals_span_turns_through_the_store(path: str) -> None:
    store = InMemoryBudgetStore()
    lookups = Lookups()
    model = ScriptedChatModel(
        [reply(None, lookup("a")), reply("one"), reply(None, lookup("b")), reply("never")]
    )
    budget = BudgetAdvisor(store=store, max_conversation_tokens=110)
    chain = chain_with(budget, model, lookups, "outside")

    async def turn() -> ChatResponse:
        if path == "call":
            return await chain.call("go", conversation_id="conv-1")
        final = None
        async for event in chain.stream("go", conversation_id="conv-1"):
            if isinstance(event, ResponseCompleted):
                final = event.response
        assert final is not None
        return final

    assert (await turn()).text == "one"  # 2 calls: 80 tokens
    assert await store.spent("conv-1") == ConversationSpend(Usage(20, 60, 0, 2), 0.0)
    with pytest.raises(BudgetExceeded) as caught:
        await turn()  # the next call brings the conversation to 120 > 110
    assert caught.value.limit == "conversation_tokens"
    assert lookups.runs == ["a"]
    assert_valid(caught.value.messages)
    assert (await store.spent("conv-1")).usage.total_tokens == 120
    assert (await store.spent("other")).usage == Usage()
    with pytest.raises(BudgetExceeded, match="conversation tokens: 120 of 110"):
        await turn()  # used up before any call


@pytest.mark.anyio
async def test_conversation_cost_and_a_missing_conversation_id() -> None:
    store = InMemoryBudgetStore()
    model = ScriptedChatModel([reply("a", output=1_000_000), "b"])
    budget = BudgetAdvisor(
        store=store, max_conversation_cost=1.0, prices={"scripted": ModelPrice(0, 1)}
    )
    chain = Chain([budget], model=model)
    assert (await chain.call("go", conversation_id="c")).text == "a"  # exactly 1.0: used up
    with pytest.raises(BudgetExceeded) as caught:
        await chain.call("go", conversation_id="c")
    assert caught.value.limit == "conversation_cost"
    with pytest.raises(ConversationIdError):
        await chain.call("go")
    with pytest.raises(ChainConfigurationError, match="need a store"):
        BudgetAdvisor(max_conversation_tokens=10)
    assert isinstance(store, BudgetStore)
