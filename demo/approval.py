"""The demo's approval step: ask before running a tool that `requires_approval`.

A stand-in for the library's `ApprovalAdvisor`/`ConsoleApprover` (integration point:
`build_chain` swaps it for them): an advisor on the public `call_tool` hook, and three
ways to decide: ask in the terminal, approve everything (`--yes`), reject everything
(`--no-input`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import anyio.to_thread

from ..core.advisor import Advisor, ToolNext
from ..core.invocation import ToolInvocation, ToolResult


@dataclass(frozen=True, slots=True)
class Decision:
    """A human's answer: approve, or reject with a reason the model reads."""

    approved: bool
    reason: str = ""


class Approver(Protocol):
    """Decides about one tool call."""

    async def decide(self, invocation: ToolInvocation) -> Decision:
        """Approve or reject `invocation`."""
        ...


def describe_call(invocation: ToolInvocation) -> str:
    """`name(arg=value, ...)` for prompts and logs."""
    args = ", ".join(f"{k}={json.dumps(v)}" for k, v in invocation.arguments.items())
    return f"{invocation.name}({args})"


Say = Callable[[str], None]
"""Prints one line for the user (the demo's renderer)."""


class AutoApprover:
    """Approves every call (`--yes`), saying so."""

    def __init__(self, say: Say) -> None:
        self.say = say

    async def decide(self, invocation: ToolInvocation) -> Decision:
        """Approve."""
        self.say(f"  ? {describe_call(invocation)} needs approval: approved (--yes)")
        return Decision(True)


class RejectingApprover:
    """Rejects every call (`--no-input`: nobody is there to ask)."""

    def __init__(self, say: Say) -> None:
        self.say = say

    async def decide(self, invocation: ToolInvocation) -> Decision:
        """Reject, with a reason the model can pass on."""
        self.say(f"  ? {describe_call(invocation)} needs approval: rejected (--no-input)")
        return Decision(False, "nobody could approve it (the demo ran with --no-input)")


class TerminalApprover:
    """Asks on the terminal; anything but y/yes (or end of input) rejects."""

    def __init__(self, say: Say, read: Callable[[str], str] = input) -> None:
        self.say = say
        self.read = read

    async def decide(self, invocation: ToolInvocation) -> Decision:
        """Ask, reading the answer in a worker thread so the event loop stays free."""
        self.say(f"  ? {describe_call(invocation)} needs approval.")
        try:
            answer = await anyio.to_thread.run_sync(self.read, "    Allow it? [y/N] ")
        except EOFError:
            answer = ""
        if answer.strip().lower() in ("y", "yes"):
            return Decision(True)
        return Decision(False, "the customer said no")


class DemoApprovalAdvisor(Advisor):
    """Runs tools that `requires_approval` only if the approver approves.

    Control flow: `call_tool` passes other tools straight through; for the others it
    asks the approver and either calls `next` or short-circuits with a `rejected`
    result that tells the model why.
    """

    def __init__(self, approver: Approver) -> None:
        self.approver = approver

    async def call_tool(self, invocation: ToolInvocation, next: ToolNext) -> ToolResult:
        if not invocation.tool.requires_approval:
            return await next(invocation)
        decision = await self.approver.decide(invocation)
        if decision.approved:
            return await next(invocation)
        return ToolResult(
            content=f"Not done: the customer rejected {invocation.name}: {decision.reason}.",
            outcome="rejected",
        )
