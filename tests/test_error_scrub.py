"""Issue 32 items 6 and 7 (first part): what a tool's exception tells the model is scrubbed
of secrets by one function for local tools and MCP servers, keeps URLs readable, and an
exception whose `__str__` raises is an error result like any other, on both paths."""

from __future__ import annotations

import sys

import pytest

from advisorchain import (
    Chain,
    ResponseCompleted,
    ToolCall,
    ToolCallFinished,
    ToolCallingAdvisor,
    ToolExecutionError,
    ToolMessage,
    tool,
)
from advisorchain.core.scrub import describe_exception, scrub_error_text
from advisorchain.providers import ScriptedChatModel
from advisorchain.toolsets import McpToolset

KEY = "sk-proj-" + "Zx9_" * 10
ENV_SECRET = "tok-9f8e7d6c5b4a"


@pytest.mark.issue32(6)
@pytest.mark.parametrize(
    ("message", "expected"),
    [
        ("connect failed: password=hunter2", "connect failed: password=<redacted>"),
        (
            "login as bob with DB_PASSWORD = 'hunter2'",
            "login as bob with DB_PASSWORD = '<redacted>'",
        ),
        (
            'rejected {"api_key": "abc123", "user": "bob"}',
            'rejected {"api_key": "<redacted>", "user": "bob"}',
        ),
        ("header Authorization: Bearer abcdef123456", "header Authorization: Bearer <redacted>"),
        ("sent Bearer abcdefgh12345678 upstream", "sent Bearer <redacted> upstream"),
        (f"invalid key {KEY} given", "invalid key <redacted> given"),
        ("aws AKIAIOSFODNN7EXAMPLE denied", "aws <redacted> denied"),
        (
            "cannot reach https://db.internal:5432/app/users (timeout)",
            "cannot reach https://db.internal:5432/app/users (timeout)",
        ),
        (
            "cannot reach postgresql://admin:s3cret@db.internal:5432/app",
            "cannot reach postgresql://<redacted>@db.internal:5432/app",
        ),
        (
            "GET https://api.example.com/v1/items?token=abc123456&page=2 failed",
            "GET https://api.example.com/v1/items?token=<redacted>&page=2 failed",
        ),
        ("open file:///home/me/secret.txt failed", "open file://<path> failed"),
        (
            "https://cdn.example.com/a/b.js then /home/me/secret.txt",
            "https://cdn.example.com/a/b.js then <path>",
        ),
        ("boom\nTraceback (most recent call last):\n  File x", "boom [traceback removed]"),
    ],
)
def test_error_text_is_scrubbed(message: str, expected: str) -> None:
    assert scrub_error_text(message) == expected
    assert describe_exception(RuntimeError(message)) == f"RuntimeError: {expected}"


@pytest.mark.issue32(6)
def test_environment_secrets_are_scrubbed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BILLING_API_TOKEN", ENV_SECRET)
    described = describe_exception(RuntimeError(f"upstream refused {ENV_SECRET}!"))
    assert described == "RuntimeError: upstream refused <redacted>!"


@pytest.mark.issue32(6)
def test_mcp_server_text_goes_through_the_same_scrub(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BILLING_API_TOKEN", ENV_SECRET)
    toolset = McpToolset.stdio(sys.executable, ["-c", "pass"], env={"DB_URL": "given-value-123"})
    text = (
        f"failed: password=hunter2 {ENV_SECRET} given-value-123 {KEY} at /srv/app/x.py "
        "via https://u:p@db.internal:5432/app"
    )
    assert toolset._server_text(text) == (
        "failed: password=<redacted> <redacted> <redacted> <redacted> at /srv/app/x.py "
        "via https://<redacted>@db.internal:5432/app"
    )


@tool
def connect() -> str:
    """Connects to the database."""
    raise RuntimeError(
        f"connect failed: password=hunter2 key={KEY} env {ENV_SECRET} "
        "url postgresql://admin:s3cret@db.internal:5432/app file /home/me/app/db.py"
    )


@pytest.mark.issue32(6)
@pytest.mark.anyio
@pytest.mark.parametrize("streaming", [False, True])
async def test_a_local_tools_error_reaches_the_model_scrubbed(
    streaming: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BILLING_API_TOKEN", ENV_SECRET)
    model = ScriptedChatModel([ToolCall.from_arguments("connect", {}, id="c1"), "Sorry."])
    chain = Chain([ToolCallingAdvisor()], model=model, tools=[connect])
    if streaming:
        events = [e async for e in chain.stream("go")]
        assert isinstance(events[-1], ResponseCompleted)
        finished = [e.result for e in events if isinstance(e, ToolCallFinished)]
        assert finished[0].is_error
    else:
        await chain.call("go")
    [sent] = [m for m in model.requests[1].messages if isinstance(m, ToolMessage)]
    assert sent.is_error
    text = sent.text
    for secret in ("hunter2", KEY, ENV_SECRET, "s3cret", "admin", "/home/me"):
        assert secret not in text
    assert "postgresql://<redacted>@db.internal:5432/app" in text
    assert "password=<redacted>" in text


class UnprintableError(Exception):
    def __str__(self) -> str:
        raise ValueError("no str for you")


@tool
def fragile() -> str:
    """Fails in a way that cannot be printed."""
    raise UnprintableError()


@pytest.mark.issue32(7)
@pytest.mark.anyio
@pytest.mark.parametrize("streaming", [False, True])
async def test_an_exception_whose_str_raises_is_an_error_result(streaming: bool) -> None:
    model = ScriptedChatModel([ToolCall.from_arguments("fragile", {}, id="c1"), "It broke."])
    chain = Chain([ToolCallingAdvisor()], model=model, tools=[fragile])
    if streaming:
        events = [e async for e in chain.stream("go")]
        final = events[-1]
        assert isinstance(final, ResponseCompleted)
        response = final.response
    else:
        response = await chain.call("go")
    assert response.text == "It broke."
    [sent] = [m for m in response.messages if isinstance(m, ToolMessage)]
    assert sent.is_error
    assert sent.text == "Error: UnprintableError: <exception str() failed: UnprintableError>"


@pytest.mark.issue32(7)
@pytest.mark.anyio
@pytest.mark.parametrize("streaming", [False, True])
async def test_an_unprintable_exception_is_raised_wrapped_when_asked(streaming: bool) -> None:
    model = ScriptedChatModel([ToolCall.from_arguments("fragile", {}, id="c1"), "never"])
    chain = Chain([ToolCallingAdvisor(on_tool_error="raise")], model=model, tools=[fragile])
    with pytest.raises(ToolExecutionError, match="UnprintableError") as caught:
        if streaming:
            [e async for e in chain.stream("go")]
        else:
            await chain.call("go")
    assert isinstance(caught.value.__cause__, UnprintableError)
