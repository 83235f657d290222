"""A tool that returns an iterator gets an error result at once, never a drained loop."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from advisorchain import (
    Chain,
    Tool,
    ToolCall,
    ToolCallingAdvisor,
    ToolExecutionError,
    ToolMessage,
    tool,
)
from advisorchain.providers import ScriptedChatModel

DRAINED = 10_000


def endless() -> Iterator[int]:
    for n in itertools.count():
        if n > DRAINED:  # what a converter draining it would reach (instead of hanging)
            raise RuntimeError("the iterator was drained")
        yield n


def numbers_handler(arguments: dict[str, Any], context: Any) -> Iterator[int]:
    yield from endless()


# `@tool` refuses generator functions; a `Tool` built by hand can still have one.
numbers = Tool("numbers", "An endless generator function.", None, numbers_handler)


@tool
def counter() -> Any:
    """Returns an endless iterator object."""
    return endless()


@tool
def pairs() -> Any:
    """Returns a finite iterator (still refused: the converter cannot know it ends)."""
    return zip([1, 2], [3, 4], strict=True)


async def endless_async() -> AsyncIterator[int]:
    n = 0
    while n <= DRAINED:
        yield n
        n += 1
    raise RuntimeError("the async iterator was drained")


async def stream_handler(arguments: dict[str, Any], context: Any) -> AsyncIterator[int]:
    async for n in endless_async():
        yield n


stream_numbers = Tool(
    "stream_numbers", "An endless async generator function.", None, stream_handler
)


@tool
async def async_counter() -> Any:
    """An async tool that returns an endless async generator."""
    return endless_async()


class _IteratingList(list[int]):
    """A list subclass that is also an iterator: refused like any iterator."""

    def __next__(self) -> int:
        raise StopIteration


@tool
def list_iterator() -> Any:
    """Returns a list subclass that is an iterator (not a plain list)."""
    return _IteratingList([1, 2])


TOOLS = [numbers, counter, pairs, stream_numbers, async_counter, list_iterator]


async def result_of(name: str, path: str, **options: Any) -> ToolMessage:
    model = ScriptedChatModel([ToolCall.from_arguments(name, {}, id="c1"), "done"])
    chain = Chain([ToolCallingAdvisor(**options)], model=model, tools=TOOLS)
    if path == "call":
        await chain.call("go")
    else:
        async for _ in chain.stream("go"):
            pass
    (message,) = [m for m in model.requests[1].messages if isinstance(m, ToolMessage)]
    return message


@pytest.mark.anyio
@pytest.mark.parametrize("path", ["call", "stream"])
@pytest.mark.parametrize("name", [t.name for t in TOOLS])
async def test_iterator_results_are_refused_with_a_clear_error(name: str, path: str) -> None:
    message = await result_of(name, path)
    assert message.is_error
    assert f"tool {name!r} returned" in message.content
    assert "return a list" in message.content
    assert "was drained" not in message.content


@pytest.mark.anyio
async def test_with_on_tool_error_raise_the_refusal_raises() -> None:
    model = ScriptedChatModel([ToolCall.from_arguments("numbers", {}, id="c1"), "done"])
    chain = Chain([ToolCallingAdvisor(on_tool_error="raise")], model=model, tools=TOOLS)
    with pytest.raises(ToolExecutionError, match="return a list") as caught:
        await chain.call("go")
    assert str(caught.value).count("failed") == 1
    assert isinstance(caught.value.__cause__, TypeError)


@pytest.mark.anyio
async def test_collections_are_still_converted() -> None:
    @tool
    def listed() -> list[int]:
        """A list."""
        return list(range(3))

    @tool
    def mapped() -> dict[str, tuple[int, ...]]:
        """A dict of tuples."""
        return {"a": (1, 2), "b": ()}

    replies: list[str | list[ToolCall]] = [
        [
            ToolCall.from_arguments("listed", {}, id="c1"),
            ToolCall.from_arguments("mapped", {}, id="c2"),
        ],
        "done",
    ]
    model = ScriptedChatModel(replies)
    chain = Chain([ToolCallingAdvisor()], model=model, tools=[listed, mapped])
    await chain.call("go")
    contents = [m.content for m in model.requests[1].messages if isinstance(m, ToolMessage)]
    assert contents == ["[0,1,2]", '{"a":[1,2],"b":[]}']
