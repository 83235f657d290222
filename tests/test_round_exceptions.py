"""A `BaseException` a tool raises reaches the caller as itself, whatever the round is like."""

from __future__ import annotations

import anyio
import anyio.lowlevel
import pytest

from advisorchain import Chain, ToolCall, ToolCallingAdvisor, tool
from advisorchain.providers import ScriptedChatModel


class Halt(BaseException):
    """A custom BaseException (as a framework's "stop now" signal may be)."""


def exceptions() -> list[BaseException]:
    return [SystemExit(3), KeyboardInterrupt(), Halt("stop")]


ROUNDS = [(1, 0), (3, 0), (3, 1), (3, 2)]  # (calls in the round, which one raises)


async def run(chain: Chain, path: str) -> None:
    if path == "call":
        await chain.call("go")
    else:
        async for _ in chain.stream("go"):
            pass


@pytest.mark.anyio
@pytest.mark.parametrize("path", ["call", "stream"])
@pytest.mark.parametrize("max_concurrency", [None, 2])
@pytest.mark.parametrize(("calls", "raiser"), ROUNDS)
@pytest.mark.parametrize("suspends", [False, True], ids=["at-once", "after-await"])
@pytest.mark.parametrize("kind", range(3), ids=["SystemExit", "KeyboardInterrupt", "Halt"])
async def test_the_original_exception_comes_out(
    path: str, max_concurrency: int | None, calls: int, raiser: int, suspends: bool, kind: int
) -> None:
    error = exceptions()[kind]
    ran: list[int] = []

    @tool
    async def step(i: int) -> str:
        """One step."""
        if suspends:
            await anyio.lowlevel.checkpoint()
        if i == raiser:
            raise error
        await anyio.lowlevel.checkpoint()
        ran.append(i)
        return "ok"

    round_ = [ToolCall.from_arguments("step", {"i": i}, id=f"c{i}") for i in range(calls)]
    model = ScriptedChatModel([round_, "done"])
    chain = Chain([ToolCallingAdvisor(max_concurrency=max_concurrency)], model=model, tools=[step])
    with pytest.raises(BaseException) as caught:
        await run(chain, path)
    assert caught.value is error


@pytest.mark.anyio
@pytest.mark.parametrize("path", ["call", "stream"])
@pytest.mark.parametrize("max_concurrency", [None, 3])
async def test_of_several_base_exceptions_the_first_in_call_order_comes_out(
    path: str, max_concurrency: int | None
) -> None:
    errors = {1: Halt("second call"), 2: Halt("third call")}

    @tool
    async def step(i: int) -> str:
        """One step."""
        if i == 0:
            await anyio.sleep_forever()  # cancelled when another call raises
        raise errors[i]

    round_ = [ToolCall.from_arguments("step", {"i": i}, id=f"c{i}") for i in range(3)]
    chain = Chain(
        [ToolCallingAdvisor(max_concurrency=max_concurrency)],
        model=ScriptedChatModel([round_]),
        tools=[step],
    )
    with pytest.raises(Halt) as caught:
        await run(chain, path)
    assert caught.value is errors[1]


@pytest.mark.anyio
async def test_cancelling_a_round_from_outside_still_cancels() -> None:
    started = anyio.Event()

    @tool
    async def wait(i: int) -> str:
        """Waits forever."""
        started.set()
        await anyio.sleep_forever()
        return "never"

    round_ = [ToolCall.from_arguments("wait", {"i": i}, id=f"c{i}") for i in range(3)]
    chain = Chain([ToolCallingAdvisor()], model=ScriptedChatModel([round_]), tools=[wait])
    with anyio.CancelScope() as scope:
        async with anyio.create_task_group() as group:
            group.start_soon(chain.call, "go")
            await started.wait()
            scope.cancel()
    assert scope.cancelled_caught
