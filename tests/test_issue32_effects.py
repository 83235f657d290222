"""Issue 32, items 4 and 5: an MCP server's hints cannot lift an approval the app
imposed, and `FallbackModel` never repeats a tool's effect."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any, cast

import pytest

try:
    import mcp_types  # noqa: F401
except ImportError:  # pragma: no cover - only without the extra
    if os.environ.get("CI"):
        raise
    pytest.skip("needs the 'mcp' extra: pip install -e '.[mcp]'", allow_module_level=True)

from advisorchain import (
    Chain,
    ChatModel,
    ChatResponse,
    ResponseCompleted,
    StreamEvent,
    ToolCall,
    ToolCallingAdvisor,
    ToolMessage,
    tool,
)
from advisorchain.advisors import (
    ApprovalAdvisor,
    ApprovalRequest,
    CallbackApprover,
    Reject,
    ToolResultCacheAdvisor,
    ToolRetryAdvisor,
)
from advisorchain.providers import (
    FallbackAfterEffectsError,
    FallbackModel,
    ProviderUnavailableError,
    ScriptedChatModel,
)
from advisorchain.toolsets import McpToolset

pytestmark = pytest.mark.anyio

LIAR = str(Path(__file__).parent / "mcp_servers" / "lying_server.py")


async def turn(chain: Chain, prompt: str, streamed: bool) -> tuple[ChatResponse, list[StreamEvent]]:
    if not streamed:
        return await chain.call(prompt), []
    events = [e async for e in chain.stream(prompt)]
    final = events[-1]
    assert isinstance(final, ResponseCompleted)
    return final.response, events


# -- item 4: hints add caution, never remove it ----------------------------------------------


@pytest.mark.issue32(4)
@pytest.mark.parametrize("streamed", [False, True])
@pytest.mark.parametrize(
    ("policy", "name"),
    [(True, "wipe"), (["wipe"], "wipe"), ("destructive", "purge"), (True, "purge")],
)
async def test_a_lying_server_cannot_lift_the_approval(
    tmp_path: Path, streamed: bool, policy: Any, name: str
) -> None:
    effects = tmp_path / "effects.txt"
    effects.touch()
    asked: list[str] = []

    def decide(request: ApprovalRequest) -> list[Reject]:
        asked.extend(c.name for c in request.calls)
        return [Reject("no") for _ in request.calls]

    async with McpToolset.stdio(
        sys.executable, [LIAR, str(effects)], name="liar", requires_approval=policy
    ) as toolset:
        tools = await toolset.tools()
        by_name = {t.name: t for t in tools}
        assert by_name[name].requires_approval
        # The server's read-only and idempotent hints are dropped, not just for approval:
        # no cache, no retry, no fallback over it either.
        assert not by_name[name].read_only and not by_name[name].idempotent
        model = ScriptedChatModel(
            [ToolCall.from_arguments(name, {"path": "/", "table": "t"}), "ok"]
        )
        chain = Chain(
            [
                ToolCallingAdvisor(),
                ToolResultCacheAdvisor(),
                ToolRetryAdvisor(),
                ApprovalAdvisor(CallbackApprover(decide), auto_approve_read_only=True),
            ],
            model=model,
            tools=tools,
        )
        response, _ = await turn(chain, "clean up", streamed)
    assert asked == [name]  # before: wipe/purge ran without asking
    assert effects.read_text() == ""
    [result] = [m for m in response.messages if isinstance(m, ToolMessage)]
    assert result.is_error and "rejected" in result.text


@pytest.mark.issue32(4)
async def test_hints_still_apply_where_the_app_left_approval_to_them(tmp_path: Path) -> None:
    async with McpToolset.stdio(
        sys.executable, [LIAR, str(tmp_path / "e.txt")], name="liar", requires_approval=["purge"]
    ) as toolset:
        by_name = {t.name: t for t in await toolset.tools()}
    # Not chosen for approval by the app: the server's word is kept (docs/mcp.md).
    assert by_name["wipe"].read_only and by_name["wipe"].idempotent
    assert not by_name["wipe"].requires_approval
    assert by_name["purge"].requires_approval and not by_name["purge"].read_only


# -- item 5: fallback never repeats an effect ------------------------------------------------


class Account:
    def __init__(self) -> None:
        self.paid: list[int] = []
        self.reads = 0

        @tool
        def pay(amount: int) -> str:
            """Pay an amount (not idempotent)."""
            self.paid.append(amount)
            return "paid"

        @tool(read_only=True)
        def balance() -> int:
            """Read the balance."""
            self.reads += 1
            return 100

        @tool(idempotent=True)
        def set_limit(amount: int) -> str:
            """Set the limit (idempotent)."""
            return "set"

        self.tools = [pay, balance, set_limit]


def fallback(account: Account, first_call: ToolCall) -> FallbackModel:
    primary = Chain(
        [ToolCallingAdvisor()],
        model=ScriptedChatModel([first_call, ProviderUnavailableError("503 from upstream")]),
        tools=account.tools,
    )
    backup = Chain(
        [ToolCallingAdvisor()],
        model=ScriptedChatModel([first_call, "done by the backup"]),
        tools=account.tools,
    )
    return FallbackModel([cast(ChatModel, primary), cast(ChatModel, backup)])


async def run_model(model: FallbackModel, streamed: bool) -> str:
    outer = Chain([], model=model)
    response, _ = await turn(outer, "pay 5", streamed)
    return response.text


@pytest.mark.issue32(5)
@pytest.mark.parametrize("streamed", [False, True])
async def test_no_fallback_after_a_tool_with_effects_ran(streamed: bool) -> None:
    account = Account()
    model = fallback(account, ToolCall.from_arguments("pay", {"amount": 5}, id="p1"))
    with pytest.raises(FallbackAfterEffectsError) as caught:
        await run_model(model, streamed)
    assert account.paid == [5]  # before: [5, 5] on call (the backup paid again)
    error = caught.value
    assert [(c.name, c.id) for c in error.calls] == [("pay", "p1")]
    assert error.index == 0 and isinstance(error.__cause__, ProviderUnavailableError)
    assert "pay (call p1)" in str(error) and "amount" not in str(error)


@pytest.mark.issue32(5)
@pytest.mark.parametrize("streamed", [False, True])
@pytest.mark.parametrize("name", ["balance", "set_limit"])
async def test_fallback_goes_on_after_read_only_and_idempotent_tools(
    streamed: bool, name: str
) -> None:
    account = Account()
    arguments = {"amount": 5} if name == "set_limit" else {}
    model = fallback(account, ToolCall.from_arguments(name, arguments, id="r1"))
    if streamed:
        # A stream that already yielded events never falls back (as before).
        with pytest.raises(ProviderUnavailableError):
            await run_model(model, streamed)
    else:
        assert await run_model(model, streamed) == "done by the backup"
    assert account.paid == []


@pytest.mark.issue32(5)
@pytest.mark.parametrize("streamed", [False, True])
async def test_a_plain_provider_failure_still_falls_back(streamed: bool) -> None:
    primary = ScriptedChatModel([ProviderUnavailableError("503")])
    backup = ScriptedChatModel(["backup"])
    assert await run_model(FallbackModel([primary, backup]), streamed) == "backup"
