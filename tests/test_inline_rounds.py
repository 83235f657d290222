"""A round whose calls cannot suspend runs without a task group, with the same outcome.

`ToolCallingManager` reads each async tool's bytecode (`core/_no_suspend.py`): when no
call of a round can suspend, it runs them one after the other in this task (what the
task-group path does for calls that never suspend) instead of opening a task group it
would never use. These tests run the same rounds down both paths and compare.
"""

from __future__ import annotations

import contextvars
import functools
from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from advisorchain import AssistantMessage, ChatRequest, TextPart, Tool, ToolCall, tool
from advisorchain.core import manager as manager_module
from advisorchain.core._no_suspend import never_suspends
from advisorchain.core.errors import ToolExecutionError
from advisorchain.core.manager import ToolCallingManager, ToolRound
from advisorchain.core.messages import UserMessage

# -- the bytecode reading -------------------------------------------------------------------
from path_support import answer


async def _returns() -> int:
    return 1


async def _calls_sync_code() -> int:
    def inner() -> int:
        return 2

    return inner() + len([i for i in range(3)])


async def _makes_but_does_not_await() -> Any:
    async def inner() -> None:
        await anyio.lowlevel.checkpoint()

    coro = inner()
    coro.close()
    return inner


async def _awaits() -> None:
    await anyio.lowlevel.checkpoint()


async def _awaits_in_a_branch(flag: bool = False) -> None:
    if flag:
        await anyio.lowlevel.checkpoint()


async def _enters() -> None:
    async with anyio.Lock():
        pass


async def _numbers() -> AsyncIterator[int]:
    yield 1


async def _iterates() -> None:
    async for _ in _numbers():
        pass


async def _awaits_in_a_comprehension() -> list[int]:
    return [await _returns() for _ in range(2)]


def _sync() -> int:
    return 1


class _Methods:
    async def plain(self) -> int:
        return 1

    async def waits(self) -> None:
        await anyio.lowlevel.checkpoint()

    async def __call__(self) -> int:
        return 1


@pytest.mark.parametrize(
    ("fn", "expected"),
    [
        (_returns, True),
        (_calls_sync_code, True),
        (_makes_but_does_not_await, True),
        (functools.partial(_returns), True),
        (functools.partial(functools.partial(_returns)), True),
        (_Methods().plain, True),
        (functools.partial(_Methods.plain, _Methods()), True),
        (_awaits, False),
        (_awaits_in_a_branch, False),  # conservative: any await counts
        (_enters, False),
        (_iterates, False),
        (_awaits_in_a_comprehension, False),
        (_numbers, False),  # an async generator is no coroutine function
        (_sync, False),
        (lambda: None, False),
        (_Methods().waits, False),
        (_Methods(), False),  # a callable object: unsure, so no
        (None, False),
    ],
)
def test_never_suspends_reads_the_code(fn: Callable[..., Any] | None, expected: bool) -> None:
    assert never_suspends(fn) is expected
    if expected:  # and it is true: the coroutine ends at its first step
        assert fn is not None
        coro = fn()
        with pytest.raises(StopIteration):
            coro.send(None)


def test_a_tool_is_read_once_its_way_of_running_is_known() -> None:
    @tool
    async def plain(city: str) -> str:
        """A look-up."""
        return city

    @tool
    async def waits(city: str) -> str:
        """Awaits."""
        await anyio.lowlevel.checkpoint()
        return city

    @tool
    def sync_inline(city: str) -> str:
        """A sync function."""
        return city

    @tool(idle_timeout=5)
    async def watched(city: str) -> str:
        """Runs under an idle timeout (a task group of its own)."""
        return city

    async def handler(arguments: dict[str, Any], context: object) -> str:
        return "x"

    class Custom(Tool):
        async def run(self, arguments: Any, context: Any, *, validated: Any = None) -> Any:
            return "custom"

    assert plain._never_suspends()
    assert Tool("h", "handler", None, handler)._never_suspends()
    assert not waits._never_suspends()
    assert not sync_inline._never_suspends()
    assert not watched._never_suspends()
    assert not Custom("c", "custom", None, handler)._never_suspends()


# -- both paths give the same round -----------------------------------------------------------

_var: contextvars.ContextVar[str] = contextvars.ContextVar("inline_round_var", default="unset")


class Halt(BaseException):
    """A framework's "stop now" signal."""


def _tools(ran: list[str], seen: dict[str, tuple[str, str]]) -> list[Tool]:
    @tool
    async def look_up(city: str) -> str:
        """Returns text; marks the context."""
        seen[city] = (_var.get(), "")
        _var.set(city)
        seen[city] = (seen[city][0], _var.get())
        ran.append(city)
        return f"sunny in {city}"

    @tool
    async def record(city: str) -> dict[str, Any]:
        """Returns a dict (JSON for the model)."""
        ran.append(f"record {city}")
        return {"city": city, "n": len(city)}

    @tool
    async def parts(city: str) -> list[Any]:
        """Returns content parts."""
        ran.append(f"parts {city}")
        return ["caption", TextPart(text=city)]

    @tool
    async def fails(city: str) -> str:
        """Raises an exception."""
        ran.append(f"fails {city}")
        raise ValueError(f"no weather for {city}")

    @tool
    async def halts(city: str) -> str:
        """Raises a BaseException."""
        ran.append(f"halts {city}")
        raise Halt(city)

    return [look_up, record, parts, fails, halts]


ROUNDS: dict[str, list[tuple[str, dict[str, Any]]]] = {
    "values": [("look_up", {"city": "Paris"}), ("record", {"city": "Lyon"})],
    "parts and text": [("parts", {"city": "Nice"}), ("look_up", {"city": "Metz"})],
    "an error result": [("look_up", {"city": "A"}), ("fails", {"city": "B"}), ("record", {})],
    "three of a kind": [("look_up", {"city": c}) for c in ("X", "Y", "Z")],
    # one call left to run: the one-call path, no task group either way
    "invalid and unknown": [("record", {"town": 1}), ("nope", {}), ("look_up", {"city": "C"})],
}


async def _round(
    calls: list[tuple[str, dict[str, Any]]], *, general: bool, **options: Any
) -> tuple[object, list[str], dict[str, tuple[str, str]], int]:
    ran: list[str] = []
    seen: dict[str, tuple[str, str]] = {}
    tools = tuple(_tools(ran, seen))
    manager = ToolCallingManager(**options)
    if general:  # the task-group path, as before the shortcut
        manager._never_suspend = lambda pending: False  # type: ignore[method-assign]
    inline_rounds = [0]
    real = manager_module._run_inline

    def counting(*args: Any) -> None:
        inline_rounds[0] += 1
        real(*args)

    message = AssistantMessage(
        tool_calls=tuple(
            ToolCall.from_arguments(name, args, id=f"c{i}") for i, (name, args) in enumerate(calls)
        )
    )
    request = ChatRequest(messages=(UserMessage(content="go"), message), tools=tools)
    token = _var.set("caller")
    outcome: object
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(manager_module, "_run_inline", counting)
        try:
            tool_round = await manager.execute(request, message)
        except BaseException as exc:  # noqa: BLE001 - compared between the paths
            outcome = ("raised", type(exc), str(exc))
        else:
            outcome = _comparable(tool_round)
        finally:
            leaked = _var.get()
            _var.reset(token)
    assert leaked == "caller"
    return outcome, ran, seen, inline_rounds[0]


def _comparable(tool_round: ToolRound) -> object:
    return (
        tool_round.calls,
        [
            (r.content, r.outcome, r.return_direct, r.value, type(r.error))
            for r in tool_round.results
        ],
        tool_round.messages,
        len(tool_round.durations),
    )


@pytest.mark.anyio
@pytest.mark.parametrize("name", list(ROUNDS))
@pytest.mark.parametrize("tool_timeout", [None, 5.0])
async def test_a_round_that_cannot_suspend_comes_out_as_on_the_task_group_path(
    name: str, tool_timeout: float | None
) -> None:
    fast = await _round(ROUNDS[name], general=False, tool_timeout=tool_timeout)
    general = await _round(ROUNDS[name], general=True, tool_timeout=tool_timeout)
    assert fast[:3] == general[:3]
    assert fast[3] == (0 if name == "invalid and unknown" else 1)  # the shortcut was taken
    assert general[3] == 0


@pytest.mark.anyio
@pytest.mark.parametrize("raiser", [0, 1, 2])
async def test_a_base_exception_stops_the_round_as_on_the_task_group_path(raiser: int) -> None:
    calls = [("look_up", {"city": f"c{i}"}) for i in range(3)]
    calls[raiser] = ("halts", {"city": f"c{raiser}"})
    fast = await _round(calls, general=False)
    general = await _round(calls, general=True)
    assert fast[:3] == general[:3]
    assert fast[0] == ("raised", Halt, f"c{raiser}")
    assert fast[1][-1] == f"halts c{raiser}"  # the calls after it never started
    assert fast[3] == 1


@pytest.mark.anyio
async def test_on_tool_error_raise_comes_out_as_on_the_task_group_path() -> None:
    calls = [("look_up", {"city": "A"}), ("fails", {"city": "B"}), ("record", {"city": "C"})]
    fast = await _round(calls, general=False, on_tool_error="raise")
    general = await _round(calls, general=True, on_tool_error="raise")
    assert fast[:3] == general[:3]
    assert isinstance(fast[0], tuple) and fast[0][:2] == ("raised", ToolExecutionError)
    assert fast[3] == 1


@pytest.mark.anyio
async def test_a_round_with_one_call_that_waits_still_runs_concurrently() -> None:
    """One tool waits for an event the next call of the round sets: run one after the
    other, the round could never end. It takes the task-group path."""
    ready = anyio.Event()

    @tool
    async def waiter(city: str) -> str:
        """Waits for the setter."""
        await ready.wait()
        return "woken"

    @tool
    async def setter(city: str) -> str:
        """Sets the event, without awaiting."""
        ready.set()
        return "set"

    message = AssistantMessage(
        tool_calls=(
            ToolCall.from_arguments("waiter", {"city": "a"}, id="c0"),
            ToolCall.from_arguments("setter", {"city": "b"}, id="c1"),
        )
    )
    request = ChatRequest(messages=(UserMessage(content="go"), message), tools=(waiter, setter))
    with anyio.fail_after(5):
        tool_round = await ToolCallingManager().execute(request, message)
    assert [r.content for r in tool_round.results] == ["woken", "set"]


@pytest.mark.anyio
async def test_hooks_and_concurrency_limits_keep_the_task_group_path() -> None:
    calls = [("look_up", {"city": "A"}), ("record", {"city": "B"})]
    limited = await _round(calls, general=False, max_concurrency=1)
    assert limited[3] == 0
    ran: list[str] = []
    tools = tuple(_tools(ran, {}))
    message = AssistantMessage(
        tool_calls=tuple(
            ToolCall.from_arguments(name, args, id=f"c{i}") for i, (name, args) in enumerate(calls)
        )
    )
    request = ChatRequest(messages=(UserMessage(content="go"), message), tools=tools)
    hooked: list[str] = []

    async def hook(invocation: Any, next: Any) -> Any:
        hooked.append(invocation.call.id)
        return await next(invocation)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(manager_module, "_run_inline", None)  # would fail if called
        tool_round = await ToolCallingManager().execute(request, message, hooks=(hook,))
    assert hooked == ["c0", "c1"] and [r.outcome for r in tool_round.results] == ["ok", "ok"]


@pytest.mark.anyio
@pytest.mark.parametrize("path", ["call", "stream"])
async def test_a_chain_runs_such_a_round_inline_on_both_paths(
    path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from advisorchain import Chain, ToolCallingAdvisor
    from advisorchain.providers import ScriptedChatModel

    @tool
    async def double(x: int) -> int:
        """Double x."""
        return 2 * x

    async def no_task_group(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("the round took the task-group path")

    monkeypatch.setattr(ToolCallingManager, "_run_all", no_task_group)
    calls = [ToolCall.from_arguments("double", {"x": i}, id=f"c{i}") for i in (1, 2)]
    chain = Chain(
        [ToolCallingAdvisor()],
        model=ScriptedChatModel([AssistantMessage(tool_calls=tuple(calls)), "done"]),
        tools=[double],
    )
    response = await answer(path, chain, "go")
    assert response.text == "done"
    results = [m.content for m in response.messages if m.role == "tool"]
    assert results == ["2", "4"]
