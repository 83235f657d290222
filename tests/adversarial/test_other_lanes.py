"""Regression tests, from the adversarial suite's side, of the issue 15 defects fixed
elsewhere (marked with the issue's item), and of what the suite found outside its own lane
(a SQLite memory store losing a turn with a lone surrogate)."""

from __future__ import annotations

import logging
import os
import socket
from pathlib import Path
from typing import Any

import httpx
import pytest

from advisorchain import (
    Chain,
    ChatOptions,
    ProviderError,
    ToolCall,
    ToolCallingAdvisor,
    ToolMessage,
    tool,
)
from advisorchain.advisors import (
    ApprovalAdvisor,
    ApprovalRequest,
    Approve,
    CallbackApprover,
    MemoryAdvisor,
    Reject,
    SQLiteChatMemoryStore,
)
from advisorchain.core.scrub import describe_exception
from advisorchain.providers import OpenAIChatModel, ScriptedChatModel
from advisorchain.providers.http.retry import retry_after

from .support import KEY, exception_chain_text


@pytest.mark.issue15(1)
@pytest.mark.anyio
async def test_duplicate_call_ids_cannot_smuggle_a_call_past_approval() -> None:
    sent: list[str] = []

    @tool(requires_approval=True)
    def transfer(to: str, amount: int) -> str:
        """Send money."""
        sent.append(to)
        return "sent"

    def decide(request: ApprovalRequest) -> list[Approve | Reject]:
        return [
            Approve() if int(c.arguments["amount"]) <= 100 else Reject("too much")
            for c in request.calls
        ]

    calls = [
        ToolCall.from_arguments("transfer", {"to": "bob", "amount": 5}, id="call_1"),
        ToolCall.from_arguments("transfer", {"to": "mallory", "amount": 1_000_000}, id="call_1"),
    ]
    chain = Chain(
        [ToolCallingAdvisor(), ApprovalAdvisor(CallbackApprover(decide))],
        model=ScriptedChatModel([calls, "done"]),
        tools=[transfer],
    )
    await chain.call("pay")
    assert sent == ["bob"]


@pytest.mark.issue15(2)
@pytest.mark.anyio
async def test_api_key_with_a_trailing_newline_does_not_leak() -> None:
    from advisorchain import ChatRequest, UserMessage

    with socket.socket() as listener:  # accepts connections (backlog), never answers
        listener.bind(("127.0.0.1", 0))
        listener.listen(4)
        port = listener.getsockname()[1]
        async with OpenAIChatModel(
            "m",
            base_url=f"http://127.0.0.1:{port}/v1",
            api_key=KEY + "\n",
            max_retries=0,
            timeout=1.0,
        ) as model:
            with pytest.raises(ProviderError) as caught:
                await model.call(ChatRequest(messages=(UserMessage(content="hi"),)))
    assert KEY not in exception_chain_text(caught.value)


@pytest.mark.issue15(5)
@pytest.mark.anyio
async def test_deeply_nested_arguments_become_an_error_result() -> None:
    @tool
    def f(x: Any) -> str:
        """Anything."""
        return "ok"

    deep = '{"x": ' + "[" * 10_000 + "]" * 10_000 + "}"
    chain = Chain(
        [ToolCallingAdvisor()],
        model=ScriptedChatModel([ToolCall(id="a", name="f", arguments=deep), "done"]),
        tools=[f],
    )
    try:
        response = await chain.call("go")
    except RecursionError:
        raise AssertionError("RecursionError escaped from chain.call") from None
    assert response.text == "done"


@pytest.mark.issue15(7)
def test_retry_after_date_with_minus_zero_offset() -> None:
    wait = retry_after(httpx.Headers({"retry-after": "Wed, 21 Oct 2015 07:28:00 -0000"}))
    assert wait == 0.0


@pytest.mark.issue15(6)
@pytest.mark.parametrize(
    "path",
    [
        r"C:\\Users\\alice\\secrets\\key.pem",
        r"C:\Program Files\Acme Corp\config.ini",
        r"\\fileserver\share\payroll\2026.xlsx",
    ],
)
def test_windows_paths_in_tool_errors_are_redacted(path: str) -> None:
    message = describe_exception(FileNotFoundError(2, "No such file", path))
    assert "alice" not in message and "Acme" not in message and "payroll" not in message


class Abort(BaseException):
    """A custom BaseException, as a tool or a framework might raise."""


@pytest.mark.issue15(8)
@pytest.mark.anyio
async def test_base_exception_from_a_tool_is_the_same_in_any_round() -> None:
    @tool
    def stop() -> str:
        """Stop."""
        raise Abort("stop")

    @tool
    def fine() -> str:
        """Fine."""
        return "ok"

    calls = [
        ToolCall(id="a", name="fine", arguments="{}"),
        ToolCall(id="b", name="stop", arguments="{}"),
    ]
    chain = Chain([ToolCallingAdvisor()], model=ScriptedChatModel([calls]), tools=[stop, fine])
    try:
        await chain.call("go")
    except Abort:
        return
    except BaseException as exc:  # a group, today: caught here so it cannot end the session
        raise AssertionError(f"got {type(exc).__name__}, not Abort") from None
    raise AssertionError("nothing raised")


@pytest.mark.issue15(10)
@pytest.mark.anyio
async def test_forced_tool_choice_is_relaxed_after_a_round() -> None:
    @tool
    def get_weather() -> str:
        """The weather."""
        return "sunny"

    def script(request: Any) -> Any:
        if request.options.tool_choice == "get_weather":
            return ToolCall(id=f"c{len(request.messages)}", name="get_weather", arguments="{}")
        return "It is sunny."

    chain = Chain([ToolCallingAdvisor()], model=ScriptedChatModel(script), tools=[get_weather])
    response = await chain.call("weather?", options=ChatOptions(tool_choice="get_weather"))
    assert response.text == "It is sunny."


@pytest.mark.issue15(11)
@pytest.mark.anyio
async def test_an_approver_that_raises_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    @tool(requires_approval=True)
    def act() -> str:
        """Act."""
        return "done"

    def broken(request: ApprovalRequest) -> list[Approve]:
        raise AttributeError("no such attribute")

    chain = Chain(
        [ToolCallingAdvisor(), ApprovalAdvisor(CallbackApprover(broken))],
        model=ScriptedChatModel([ToolCall(id="a", name="act", arguments="{}"), "ok"]),
        tools=[act],
    )
    with caplog.at_level(logging.WARNING):
        await chain.call("go")
    assert any("AttributeError" in r.getMessage() for r in caplog.records)


@pytest.mark.anyio
async def test_memory_store_keeps_a_turn_with_lone_surrogates(tmp_path: Path) -> None:
    # Found by the adversarial suite: the turn was lost with a raw PydanticSerializationError.
    @tool
    def list_files() -> str:
        """List the working directory."""
        return ", ".join(os.fsdecode(name) for name in (b"report-\xff.txt",))

    async with SQLiteChatMemoryStore(tmp_path / "memory.db") as store:
        chain = Chain(
            [MemoryAdvisor(store), ToolCallingAdvisor()],
            model=ScriptedChatModel([ToolCall(id="a", name="list_files", arguments="{}"), "ok"]),
            tools=[list_files],
        )
        response = await chain.call("what is here?", conversation_id="c")
        assert response.text == "ok"
        stored = [m for m in await store.load("c") if isinstance(m, ToolMessage)]
        assert [m.text for m in stored] == ["report-\ufffd.txt"]  # as the providers send it
