"""ApprovalAdvisor failing closed: sync approvers past their timeout, logged failures."""

from __future__ import annotations

import logging
import threading
from typing import Any

import anyio
import anyio.lowlevel
import anyio.to_thread
import pytest

from advisorchain import Chain, ToolCall, ToolCallingAdvisor, ToolMessage, tool
from advisorchain.advisors import ApprovalAdvisor, ApprovalRequest, Approve, CallbackApprover
from advisorchain.advisors.approval import Decisions
from advisorchain.providers import ScriptedChatModel

SECRET = "mallory-7731"


def bank_chain(approver: Any, sent: list[tuple[str, int]], **options: Any) -> Chain:
    @tool(requires_approval=True)
    def transfer(to: str, amount: int) -> str:
        """Send money to an account."""
        sent.append((to, amount))
        return f"sent {amount} to {to}"

    model = ScriptedChatModel(
        [ToolCall.from_arguments("transfer", {"to": SECRET, "amount": 990001}, id="c1"), "ok"]
    )
    return Chain(
        [ToolCallingAdvisor(), ApprovalAdvisor(approver, **options)], model=model, tools=[transfer]
    )


def tool_results(chain: Chain) -> list[ToolMessage]:
    model = chain.model
    assert isinstance(model, ScriptedChatModel)
    return [m for m in model.requests[1].messages if isinstance(m, ToolMessage)]


async def run(chain: Chain, path: str) -> None:
    if path == "call":
        await chain.call("pay")
    else:
        async for _ in chain.stream("pay"):
            pass


@pytest.fixture(params=["call", "stream"])
def path(request: pytest.FixtureRequest) -> str:
    value: str = request.param
    return value


@pytest.mark.anyio
async def test_a_sync_approver_answering_after_the_timeout_is_not_obeyed(path: str) -> None:
    entered, release, returned = threading.Event(), threading.Event(), threading.Event()

    def slow(request: ApprovalRequest) -> Decisions:
        entered.set()
        try:
            release.wait(5)  # released only after the turn: an answer after the timeout
            return [Approve()]
        finally:
            returned.set()

    sent: list[tuple[str, int]] = []
    chain = bank_chain(CallbackApprover(slow), sent, timeout=0.05)
    loop_ran_while_the_approver_blocked = False
    async with anyio.create_task_group() as group:
        group.start_soon(run, chain, path)
        await anyio.to_thread.run_sync(entered.wait, 5)
        loop_ran_while_the_approver_blocked = not returned.is_set()
    release.set()
    await anyio.to_thread.run_sync(returned.wait, 5)
    await anyio.lowlevel.checkpoint()
    assert sent == []
    assert loop_ran_while_the_approver_blocked
    (message,) = tool_results(chain)
    assert message.is_error and "no decision within 0.05 s" in message.content


@pytest.mark.anyio
async def test_a_sync_approver_in_time_is_obeyed() -> None:
    sent: list[tuple[str, int]] = []
    chain = bank_chain(CallbackApprover(lambda r: [Approve()]), sent, timeout=5)
    await chain.call("pay")
    assert sent == [(SECRET, 990001)]


@pytest.mark.anyio
async def test_an_approver_that_raises_is_logged_without_arguments(
    path: str, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(request: ApprovalRequest) -> Decisions:
        raise AttributeError("'NoneType' object has no attribute 'decide'")

    sent: list[tuple[str, int]] = []
    chain = bank_chain(CallbackApprover(broken, name="reviewers"), sent)
    with caplog.at_level(logging.WARNING, logger="advisorchain"):
        await run(chain, path)
    assert sent == []
    (record,) = [r for r in caplog.records if r.name == "advisorchain.approval"]
    assert record.levelno == logging.WARNING
    text = record.getMessage()
    assert "AttributeError" in text and "has no attribute 'decide'" in text
    assert "transfer" in text and "reviewers" in text
    assert SECRET not in text and "990001" not in text
    assert SECRET not in str(record.__dict__) and "990001" not in str(record.__dict__)


@pytest.mark.anyio
async def test_approver_timeouts_and_malformed_answers_are_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def never(request: ApprovalRequest) -> Decisions:
        await anyio.sleep_forever()
        raise AssertionError

    sent: list[tuple[str, int]] = []
    with caplog.at_level(logging.WARNING, logger="advisorchain"):
        await bank_chain(CallbackApprover(never), sent, timeout=0.01).call("pay")
        await bank_chain(CallbackApprover(lambda r: "yes please"), sent).call("pay")  # type: ignore[arg-type, return-value]
        await bank_chain(CallbackApprover(lambda r: {"c1": "approve"}), sent).call("pay")  # type: ignore[dict-item]
    messages = [r.getMessage() for r in caplog.records if r.name == "advisorchain.approval"]
    assert len(messages) == 3
    assert "no decision within 0.01 s" in messages[0]
    assert "malformed" in messages[1]
    assert "no valid decision" in messages[2] and "transfer (call c1)" in messages[2]
    assert all(SECRET not in m for m in messages)
    assert sent == []


@pytest.mark.anyio
async def test_a_policy_that_raises_asks_and_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    def policy(tool: Any, arguments: Any, context: Any) -> bool:
        raise KeyError("limit")

    asked: list[ApprovalRequest] = []

    def approve(request: ApprovalRequest) -> Decisions:
        asked.append(request)
        return [Approve()]

    sent: list[tuple[str, int]] = []
    with caplog.at_level(logging.WARNING, logger="advisorchain"):
        await bank_chain(CallbackApprover(approve), sent, policy=policy).call("pay")
    assert len(asked) == 1 and sent == [(SECRET, 990001)]
    texts = [r.getMessage() for r in caplog.records if r.name == "advisorchain.approval"]
    assert texts  # the policy is consulted once per check of the call
    for text in texts:
        assert "policy failed" in text and "KeyError" in text and "transfer" in text
        assert SECRET not in text and "990001" not in text


@pytest.mark.anyio
@pytest.mark.parametrize("run_inline", [False, True])
async def test_a_sync_callback_runs_in_a_worker_thread_unless_inline(run_inline: bool) -> None:
    threads: list[int] = []

    def approve(request: ApprovalRequest) -> list[Approve]:
        threads.append(threading.get_ident())
        return [Approve() for _ in request.calls]

    sent: list[tuple[str, int]] = []
    chain = bank_chain(CallbackApprover(approve, run_inline=run_inline), sent)
    await chain.call("pay")
    assert sent == [(SECRET, 990001)]
    assert (threads == [threading.get_ident()]) is run_inline


class UnprintableError(Exception):
    def __str__(self) -> str:
        raise ValueError("no str for you")


@pytest.mark.issue32(7)
@pytest.mark.anyio
async def test_an_approver_whose_error_cannot_be_printed_fails_closed(path: str) -> None:
    def broken(request: ApprovalRequest) -> Decisions:
        raise UnprintableError()

    sent: list[tuple[str, int]] = []
    chain = bank_chain(CallbackApprover(broken, name="reviewers"), sent)
    await run(chain, path)
    assert sent == []
    [result] = tool_results(chain)
    assert result.is_error
