"""Per-chain positions (one advisor in several chains) and nested chains' tool context."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import pytest
from pydantic import BaseModel

from advisorchain import (
    Advisor,
    Chain,
    ChainConfigurationError,
    ChatModel,
    LoggingAdvisor,
    MemoryAdvisor,
    Placement,
    ResponseCompleted,
    ToolCall,
    ToolCallingAdvisor,
    ToolContext,
    ToolMessage,
    ToolSearchAdvisor,
    tool,
)
from advisorchain.advisors import (
    InMemoryChatMemoryStore,
    RedactionAdvisor,
    SmallModelAdvisor,
    StructuredOutputAdvisor,
    ToolResultCacheAdvisor,
    ToolRetryAdvisor,
    TracingAdvisor,
)
from advisorchain.providers import ScriptedChatModel


@tool
def echo(text: str) -> str:
    """Echo."""
    return text


def two_rounds() -> list[Any]:
    return [ToolCall.from_arguments("echo", {"text": "x"}, id="c1"), "done"]


def events_of(caplog: pytest.LogCaptureFixture, logger: str) -> list[str]:
    kinds = [getattr(r, "event", "") for r in caplog.records if r.name == logger]
    return [k for k in kinds if k in ("turn", "round")]


@pytest.mark.anyio
@pytest.mark.parametrize("path", ["call", "stream"])
async def test_one_logging_advisor_in_two_chains_at_different_positions(
    path: str, caplog: pytest.LogCaptureFixture
) -> None:
    logger = logging.getLogger("test.placement")
    log = LoggingAdvisor(logger)
    outside = Chain(
        [log, ToolCallingAdvisor()], model=ScriptedChatModel(two_rounds() * 2), tools=[echo]
    )
    inside = Chain([ToolCallingAdvisor(), log], model=ScriptedChatModel(two_rounds()), tools=[echo])
    assert outside.advisors[0] is log and inside.advisors[1] is log

    async def run(chain: Chain) -> None:
        if path == "call":
            await chain.call("go")
        else:
            async for _ in chain.stream("go"):
                pass

    with caplog.at_level(logging.INFO, logger="test.placement"):
        await run(outside)
        assert events_of(caplog, "test.placement") == ["turn"]
        caplog.clear()
        await run(inside)
        assert events_of(caplog, "test.placement") == ["round", "round"]
        caplog.clear()
        await run(outside)  # binding the second chain did not move the first
        assert events_of(caplog, "test.placement") == ["turn"]


class Recorder(Advisor):
    """Records each placement it is bound to."""

    def __init__(self) -> None:
        self.placements: list[Placement] = []

    def bind(self, placement: Placement) -> Advisor:
        self.placements.append(placement)
        return self


def test_bind_receives_the_chain_the_index_and_whether_inside_the_loop() -> None:
    recorder = Recorder()
    model = ScriptedChatModel([])
    first = Chain([recorder, ToolCallingAdvisor()], model=model)
    second = Chain([ToolCallingAdvisor(), recorder], model=model)
    assert [(p.chain, p.index, p.inside_tool_loop) for p in recorder.placements] == [
        (first, 0, False),
        (second, 1, True),
    ]


class CustomLoop(Advisor):
    """A user's own tool loop: it says so through `tool_loop`, not by its class."""

    def __init__(self) -> None:
        self.inner = ToolCallingAdvisor()

    @property
    def tool_loop(self) -> Any:
        return self.inner.manager

    call = ToolCallingAdvisor.call
    stream = ToolCallingAdvisor.stream

    @property
    def manager(self) -> Any:
        return self.inner.manager


def test_positions_follow_tool_loop_not_a_class_check() -> None:
    model = ScriptedChatModel([])
    Chain([CustomLoop(), ToolSearchAdvisor()], model=model)
    with pytest.raises(ChainConfigurationError, match="MemoryAdvisor must come before"):
        Chain([CustomLoop(), MemoryAdvisor(InMemoryChatMemoryStore())], model=model)
    with pytest.raises(ChainConfigurationError, match="ToolSearchAdvisor must come after"):
        Chain([ToolSearchAdvisor(), ToolCallingAdvisor()], model=model)


def test_bind_must_return_an_advisor() -> None:
    class Bad(Advisor):
        def bind(self, placement: Placement) -> Any:
            return None

    with pytest.raises(TypeError, match="Bad.bind"):
        Chain([Bad()], model=ScriptedChatModel([]))


# -- nested chains --------------------------------------------------------------------------


@tool
def whoami(context: ToolContext) -> str:
    """Who is asking."""
    return f"user {context.get('user_id')}"


@pytest.mark.anyio
@pytest.mark.parametrize("path", ["call", "stream"])
async def test_a_nested_chain_receives_the_outer_tool_context(path: str) -> None:
    model = ScriptedChatModel([ToolCall.from_arguments("whoami", {}, id="w1"), "ok"])
    inner = Chain([ToolCallingAdvisor()], model=model, tools=[whoami])
    # a Chain answers a ChatRequest like any model, but its `call(prompt, ...)` does not match
    # the protocol's `call(request)` by parameter name, so mypy cannot see it as a ChatModel
    outer = Chain([], model=cast(ChatModel, inner))
    if path == "call":
        response = await outer.call("who?", tool_context={"user_id": "u42"})
    else:
        events = [e async for e in outer.stream("who?", tool_context={"user_id": "u42"})]
        final = events[-1]
        assert isinstance(final, ResponseCompleted)
        response = final.response
    results = [m for m in response.messages if isinstance(m, ToolMessage)]
    assert [m.content for m in results] == ["user u42"]
    # the inner chain's model (a provider) still never receives it
    assert all(not r.tool_context for r in model.requests)


# -- the placement table in docs/writing-advisors.md ---------------------------------------

PLACES = Path(__file__).parent.parent / "docs" / "writing-advisors.md"


class Answer(BaseModel):
    value: int


LINKS: dict[str, Callable[[], Advisor]] = {
    "TracingAdvisor": TracingAdvisor,
    "LoggingAdvisor": LoggingAdvisor,
    "MemoryAdvisor": lambda: MemoryAdvisor(InMemoryChatMemoryStore()),
    "RedactionAdvisor": RedactionAdvisor,
    "StructuredOutputAdvisor": lambda: StructuredOutputAdvisor(Answer),
    "SmallModelAdvisor": SmallModelAdvisor,
    "ToolResultCacheAdvisor": ToolResultCacheAdvisor,
    "ToolRetryAdvisor": ToolRetryAdvisor,
    "ToolSearchAdvisor": ToolSearchAdvisor,
}


def documented_refusals() -> dict[str, bool]:
    """Each link of the table that names a refused place: is that place after the loop?"""
    text = PLACES.read_text()
    table = text[text.index("## Where the built-in links go") :].split("\n\n")[2]
    refused: dict[str, bool] = {}
    for row in table.splitlines()[2:]:
        links, place = row.split("|")[1:3]
        shown = re.search(r"refused (before|inside|after)", place)
        for name in re.findall(r"`(\w+)`", links):
            if shown is not None:
                refused[name] = shown.group(1) != "before"
    return refused


def refuses(make: Callable[[], Advisor], after_loop: bool) -> bool:
    advisors = [make(), ToolCallingAdvisor()]
    try:
        Chain(advisors[::-1] if after_loop else advisors, model=ScriptedChatModel([]))
    except ChainConfigurationError:
        return True
    return False


def test_the_placement_table_names_exactly_the_places_links_refuse() -> None:
    documented = documented_refusals()
    assert set(documented) <= set(LINKS)
    actual = {
        name: after_loop
        for name, make in LINKS.items()
        for after_loop in (False, True)
        if refuses(make, after_loop)
    }
    assert actual == documented


def test_structured_output_is_refused_after_a_text_rewriter_as_documented() -> None:
    assert "text rewriter (refused after them)" in PLACES.read_text()
    with pytest.raises(ChainConfigurationError, match="place RedactionAdvisor after"):
        Chain(
            [RedactionAdvisor(), StructuredOutputAdvisor(Answer), ToolCallingAdvisor()],
            model=ScriptedChatModel([]),
        )
