"""ToolCallingAdvisor: rounds, concurrency, return-direct, limits, errors, cancellation."""

from __future__ import annotations

import contextvars
import json
import threading
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from advisorchain import (
    AssistantMessage,
    Chain,
    ChatRequest,
    Message,
    ToolCall,
    ToolCallingAdvisor,
    ToolCallLimitExceeded,
    ToolExecutionError,
    ToolInvocation,
    ToolMessage,
    UserMessage,
    advisor,
    tool,
)
from advisorchain.providers import Reply, ScriptedChatModel


def call(tool_name: str, id: str, **arguments: Any) -> ToolCall:
    return ToolCall.from_arguments(tool_name, arguments, id=id)


def assert_every_call_answered_once(messages: tuple[Message, ...]) -> None:
    asked = [c.id for m in messages if isinstance(m, AssistantMessage) for c in m.tool_calls]
    answered = [m.tool_call_id for m in messages if isinstance(m, ToolMessage)]
    assert sorted(asked) == sorted(answered)
    assert len(set(answered)) == len(answered)


@tool
def echo(text: str) -> str:
    """Echo text."""
    return text


@tool(return_direct=True)
def order_link(order_id: str) -> str:
    """A link to the order page."""
    return f"https://shop.example/orders/{order_id}"


@tool
def explode(reason: str) -> str:
    """Always fails."""
    raise FileNotFoundError(f"[Errno 2] No such file: '/srv/app/secrets/{reason}.key'")


@pytest.mark.anyio
async def test_loop_runs_until_the_model_answers() -> None:
    model = ScriptedChatModel(
        [
            [call("echo", "a", text="one"), call("echo", "b", text="two")],
            call("echo", "c", text="three"),
            "final",
        ]
    )
    chain = Chain([ToolCallingAdvisor()], model=model, tools=[echo])
    response = await chain.call("go")
    assert response.text == "final"
    assert response.finish_reason == "stop"
    assert response.usage.requests == 3
    roles = [m.role for m in response.messages]
    assert roles == ["assistant", "tool", "tool", "assistant", "tool", "assistant"]
    # each round's request carries the previous rounds, tool results in call order
    second = model.requests[1].messages
    assert [m.role for m in second] == ["user", "assistant", "tool", "tool"]
    assert [m.content for m in second[2:]] == ["one", "two"]
    assert len(model.requests[2].messages) == 6
    assert_every_call_answered_once(response.messages)


@pytest.mark.anyio
async def test_usage_is_summed_over_rounds() -> None:
    model = ScriptedChatModel([call("echo", "a", text="x"), "done"])
    response = await Chain([ToolCallingAdvisor()], model=model, tools=[echo]).call("go")
    single = await Chain([], model=ScriptedChatModel([call("echo", "a", text="x")])).call("go")
    assert response.usage.requests == 2
    assert response.usage.input_tokens > single.usage.input_tokens
    assert response.usage.output_tokens > single.usage.output_tokens


@pytest.mark.anyio
async def test_calls_of_a_round_run_concurrently() -> None:
    started: list[str] = []
    both_started = anyio.Event()

    @tool
    async def wait_for_peer(name: str) -> str:
        """Wait until both calls have started."""
        started.append(name)
        if len(started) == 2:
            both_started.set()
        with anyio.fail_after(5):
            await both_started.wait()
        return name

    model = ScriptedChatModel(
        [[call("wait_for_peer", "1", name="x"), call("wait_for_peer", "2", name="y")], "ok"]
    )
    response = await Chain([ToolCallingAdvisor()], model=model, tools=[wait_for_peer]).call("go")
    assert [m.content for m in response.messages if isinstance(m, ToolMessage)] == ["x", "y"]


@pytest.mark.anyio
async def test_max_concurrency_limits_parallelism() -> None:
    running = 0
    peak = 0

    @tool
    async def busy(n: int) -> int:
        """Busy."""
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await anyio.sleep(0.01)
        running -= 1
        return n

    calls = [call("busy", str(i), n=i) for i in range(5)]
    model = ScriptedChatModel([calls, "ok"])
    chain = Chain([ToolCallingAdvisor(max_concurrency=2)], model=model, tools=[busy])
    response = await chain.call("go")
    assert peak == 2
    assert [m.content for m in response.messages if isinstance(m, ToolMessage)] == [
        "0",
        "1",
        "2",
        "3",
        "4",
    ]


@pytest.mark.anyio
async def test_return_direct_round_ends_the_turn_with_all_results() -> None:
    model = ScriptedChatModel(
        [[call("order_link", "a", order_id="1"), call("order_link", "b", order_id="2")]]
    )
    response = await Chain([ToolCallingAdvisor()], model=model, tools=[order_link]).call("links")
    assert response.finish_reason == "return_direct"
    assert response.text == "https://shop.example/orders/1\n\nhttps://shop.example/orders/2"
    assert len(model.requests) == 1
    assert [m.role for m in response.messages] == ["assistant", "tool", "tool", "assistant"]


@pytest.mark.anyio
async def test_mixed_round_goes_back_to_the_model() -> None:
    model = ScriptedChatModel(
        [[call("order_link", "a", order_id="1"), call("echo", "b", text="hi")], "both"]
    )
    chain = Chain([ToolCallingAdvisor()], model=model, tools=[order_link, echo])
    response = await chain.call("go")
    assert response.finish_reason == "stop"
    assert response.text == "both"


@pytest.mark.anyio
async def test_bad_calls_are_reported_to_the_model_and_nothing_runs() -> None:
    executed: list[str] = []

    @tool
    def record(n: int) -> str:
        """Record n."""
        executed.append(str(n))
        return "ok"

    model = ScriptedChatModel(
        [
            [
                ToolCall(id="1", name="nope", arguments="{}"),
                ToolCall(id="2", name="record", arguments='{"n": 1'),
                ToolCall(id="3", name="record", arguments='{"n": "many"}'),
                ToolCall(id="4", name="record", arguments="[1]"),
                ToolCall(id="5", name="record", arguments='{"n": 2, "extra": true}'),
            ],
            "sorry",
        ]
    )
    response = await Chain([ToolCallingAdvisor()], model=model, tools=[record]).call("go")
    results = [m for m in response.messages if isinstance(m, ToolMessage)]
    assert executed == []
    assert all(m.is_error for m in results)
    assert "unknown tool 'nope'" in results[0].content and "record" in results[0].content
    assert "not valid JSON" in results[1].content
    assert "n: Input should be a valid integer" in results[2].content
    assert "must be a JSON object" in results[3].content
    assert "extra: unexpected argument" in results[4].content
    assert_every_call_answered_once(response.messages)


@pytest.mark.anyio
async def test_tool_exceptions_become_sanitized_error_results() -> None:
    model = ScriptedChatModel([call("explode", "1", reason="db"), "it failed"])
    response = await Chain([ToolCallingAdvisor()], model=model, tools=[explode]).call("go")
    result = response.messages[1]
    assert isinstance(result, ToolMessage) and result.is_error
    assert isinstance(result.content, str)
    assert result.content.startswith("Error: FileNotFoundError:")
    assert "/srv/app" not in result.content and "<path>" in result.content
    assert "Traceback" not in result.content


@pytest.mark.anyio
async def test_on_tool_error_raise() -> None:
    model = ScriptedChatModel([call("explode", "1", reason="db")])
    chain = Chain([ToolCallingAdvisor(on_tool_error="raise")], model=model, tools=[explode])
    with pytest.raises(ToolExecutionError) as info:
        await chain.call("go")
    assert info.value.tool_name == "explode" and info.value.call_id == "1"
    assert isinstance(info.value.__cause__, FileNotFoundError)


@pytest.mark.anyio
async def test_on_tool_error_callable_maps_the_text() -> None:
    def explain(exc: BaseException, invocation: ToolInvocation) -> str:
        return f"{invocation.name} is down, try later"

    model = ScriptedChatModel([call("explode", "1", reason="db"), "ok"])
    chain = Chain([ToolCallingAdvisor(on_tool_error=explain)], model=model, tools=[explode])
    response = await chain.call("go")
    assert response.messages[1].content == "explode is down, try later"


@pytest.mark.anyio
async def test_per_tool_timeout() -> None:
    @tool(timeout=0.05)
    async def slow() -> str:
        """Too slow."""
        await anyio.sleep(10)
        return "never"

    model = ScriptedChatModel([[call("slow", "1"), call("echo", "2", text="fast")], "ok"])
    response = await Chain([ToolCallingAdvisor()], model=model, tools=[slow, echo]).call("go")
    timed_out, fast = response.messages[1], response.messages[2]
    assert isinstance(timed_out, ToolMessage) and timed_out.is_error
    assert "timed out after 0.05 s" in timed_out.content
    assert fast.content == "fast"


@pytest.mark.anyio
async def test_call_limits_raise_with_the_partial_transcript() -> None:
    model = ScriptedChatModel([call("echo", str(i), text="x") for i in range(4)])
    chain = Chain([ToolCallingAdvisor(max_calls_per_tool=2)], model=model, tools=[echo])
    with pytest.raises(ToolCallLimitExceeded, match="at most 2 times") as info:
        await chain.call("go")
    assert info.value.tool_name == "echo"
    transcript = info.value.messages
    assert [m.role for m in transcript] == ["assistant", "tool"] * 3
    last = transcript[-1]
    assert isinstance(last.content, str)
    assert last.content.startswith("Not executed")
    assert_every_call_answered_once(transcript)
    assert len(model.requests) == 3


@pytest.mark.anyio
async def test_total_limit_and_per_tool_override_report_mode() -> None:
    executed: list[str] = []

    @tool
    def hit(n: int) -> str:
        """Hit."""
        executed.append(str(n))
        return "hit"

    model = ScriptedChatModel(
        [[call("hit", "1", n=1), call("hit", "2", n=2), call("echo", "3", text="e")], "done"]
    )
    chain = Chain(
        [ToolCallingAdvisor(tool_limits={"hit": 1}, max_calls=10, on_limit="report")],
        model=model,
        tools=[hit, echo],
    )
    response = await chain.call("go")
    results = [m for m in response.messages if isinstance(m, ToolMessage)]
    assert executed == ["1"]
    assert [m.is_error for m in results] == [False, True, False]
    assert "at most 1 times" in results[1].content
    model2 = ScriptedChatModel([[call("echo", str(i), text="x") for i in range(3)], "done"])
    chain2 = Chain([ToolCallingAdvisor(max_calls=2, on_limit="report")], model=model2, tools=[echo])
    response2 = await chain2.call("go")
    assert [m.is_error for m in response2.messages if isinstance(m, ToolMessage)] == [
        False,
        False,
        True,
    ]


@pytest.mark.anyio
async def test_limits_count_from_the_last_user_message() -> None:
    earlier: list[Message] = [
        UserMessage(content="before"),
        AssistantMessage(
            tool_calls=(call("echo", "old1", text="x"), call("echo", "old2", text="x"))
        ),
        ToolMessage(tool_call_id="old1", name="echo", content="x"),
        ToolMessage(tool_call_id="old2", name="echo", content="x"),
        AssistantMessage(content="ok"),
        UserMessage(content="again"),
    ]
    model = ScriptedChatModel([call("echo", "n1", text="y"), call("echo", "n2", text="y"), "done"])
    chain = Chain([ToolCallingAdvisor(max_calls_per_tool=2)], model=model, tools=[echo])
    response = await chain.call(earlier)
    assert response.text == "done"


@pytest.mark.anyio
async def test_cancelling_the_caller_cancels_running_tools() -> None:
    started = anyio.Event()
    finished: list[str] = []
    cancelled: list[str] = []

    @tool
    async def forever(name: str) -> str:
        """Runs until cancelled."""
        started.set()
        try:
            await anyio.sleep(30)
        except anyio.get_cancelled_exc_class():
            cancelled.append(name)
            raise
        finished.append(name)
        return name

    model = ScriptedChatModel([[call("forever", "1", name="a"), call("forever", "2", name="b")]])
    chain = Chain([ToolCallingAdvisor()], model=model, tools=[forever])
    with anyio.move_on_after(5):
        async with anyio.create_task_group() as group:
            group.start_soon(chain.call, "go")
            await started.wait()
            await anyio.sleep(0.01)
            group.cancel_scope.cancel()
    assert sorted(cancelled) == ["a", "b"]
    assert finished == []


@pytest.mark.anyio
async def test_without_the_loop_tool_calls_come_back_unexecuted() -> None:
    executed: list[str] = []

    @tool
    def act() -> str:
        """Act."""
        executed.append("x")
        return "x"

    model = ScriptedChatModel([call("act", "1")])
    response = await Chain([], model=model, tools=[act]).call("go")
    assert response.finish_reason == "tool_calls"
    assert [c.name for c in response.tool_calls] == ["act"]
    assert executed == []


@pytest.mark.anyio
async def test_loop_only_recalls_the_links_after_it() -> None:
    calls_seen: list[str] = []

    def counting(name: str) -> Any:
        async def hook(request: ChatRequest) -> ChatRequest:
            calls_seen.append(name)
            return request

        return advisor(before=hook, name=name)

    script: list[Reply] = [call("echo", "1", text="x"), call("echo", "2", text="y"), "done"]
    model = ScriptedChatModel(script * 2)
    chain = Chain(
        [counting("outer"), ToolCallingAdvisor(), counting("inner")], model=model, tools=[echo]
    )
    await chain.call("go")
    assert calls_seen == ["outer", "inner", "inner", "inner"]
    calls_seen.clear()
    async for _ in chain.stream("go"):
        pass
    assert calls_seen == ["outer", "inner", "inner", "inner"]


def test_tool_arguments_roundtrip_json() -> None:
    assert json.loads(call("echo", "1", text="é").arguments) == {"text": "é"}


@pytest.mark.anyio
async def test_timeout_of_a_hanging_sync_tool_does_not_hang_the_turn() -> None:
    release = threading.Event()

    @tool(timeout=0.05)
    def hangs() -> str:
        """Blocks until released."""
        release.wait()
        return "late"

    model = ScriptedChatModel([call("hangs", "1"), "gave up"])
    chain = Chain([ToolCallingAdvisor()], model=model, tools=[hangs])
    try:
        with anyio.fail_after(5):
            response = await chain.call("go")
    finally:
        release.set()
    assert response.messages[1].content == "Error: 'hangs' timed out after 0.05 s."


_round_var: contextvars.ContextVar[str] = contextvars.ContextVar("round_var", default="unset")


@pytest.mark.anyio
@pytest.mark.parametrize("path", ["call", "stream"])
@pytest.mark.parametrize("max_concurrency", [None, 1, 2])
@pytest.mark.parametrize("suspend", [False, True])
async def test_calls_of_a_round_do_not_share_context_changes(
    suspend: bool, max_concurrency: int | None, path: str
) -> None:
    seen: dict[str, tuple[str, str]] = {}

    @tool
    async def mark(name: str) -> str:
        """Sets a context variable and reads it back."""
        before = _round_var.get()
        _round_var.set(name)
        if suspend:
            await anyio.lowlevel.checkpoint()
        seen[name] = (before, _round_var.get())
        return name

    token = _round_var.set("caller")
    try:
        calls = [call("mark", str(i), name=f"t{i}") for i in range(3)]
        model = ScriptedChatModel([calls, "ok"])
        chain = Chain(
            [ToolCallingAdvisor(max_concurrency=max_concurrency)], model=model, tools=[mark]
        )
        if path == "call":
            await chain.call("go")
        else:
            async for _ in chain.stream("go"):
                pass
        assert _round_var.get() == "caller"
    finally:
        _round_var.reset(token)
    assert seen == {f"t{i}": ("caller", f"t{i}") for i in range(3)}
