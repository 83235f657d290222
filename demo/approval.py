"""The demo's approvers: the library's `ConsoleApprover`, or a fixed answer for scripts.

`--yes` approves every call and `--no-input` rejects every call (nobody is there to ask);
both say what they decided on the terminal, so a scripted run still shows the approval.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Literal, TextIO

from ..advisors.approval import (
    ApprovalCall,
    ApprovalRequest,
    Approve,
    Approver,
    CallbackApprover,
    ConsoleApprover,
    Reject,
)

Say = Callable[[str], None]
"""Prints one line for the user (the demo's renderer)."""

NO_INPUT_REASON = "nobody could approve it (the demo ran with --no-input)"


def describe_call(call: ApprovalCall) -> str:
    """`name(arg=value, ...)` for the terminal."""
    args = ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in call.arguments.items())
    return f"{call.tool_name}({args})"


def make_approver(
    mode: Literal["ask", "yes", "no"], *, say: Say, read: Callable[[str], str], out: TextIO
) -> Approver:
    """The approver for `--yes` (`yes`), `--no-input` (`no`) or a person at the terminal."""
    if mode == "ask":
        return ConsoleApprover(input_fn=lambda: read(""), output=out, user="customer")

    def decide(request: ApprovalRequest) -> list[Approve | Reject]:
        decisions: list[Approve | Reject] = []
        for call in request.calls:
            if mode == "yes":
                say(f"  ? {describe_call(call)} needs approval: approved (--yes)")
                decisions.append(Approve(by="--yes"))
            else:
                say(f"  ? {describe_call(call)} needs approval: rejected (--no-input)")
                decisions.append(Reject(NO_INPUT_REASON, by="--no-input"))
        return decisions

    return CallbackApprover(decide, name=f"--{'yes' if mode == 'yes' else 'no-input'}")


__all__ = ["NO_INPUT_REASON", "Say", "describe_call", "make_approver"]
