"""Approvers: who decides. A terminal prompt, a callback, or "later" (deferred)."""

from __future__ import annotations

import inspect
import json
import sys
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any, Protocol, TextIO, runtime_checkable

import anyio
import anyio.to_thread

from ...core.arguments import ArgumentsError, parse_arguments
from ...core.checks import require_callable
from .types import ApprovalCall, ApprovalRequest, Approve, Decision, Decisions, Defer, Reject


@runtime_checkable
class Approver(Protocol):
    """Decides on the calls of one round: one `Approve`, `Reject` or `Defer` per call.

    Answer with a mapping from call id to decision, or a sequence in the order of
    `request.calls`. A call left without a valid decision is rejected (fail closed).
    """

    async def decide(self, request: ApprovalRequest) -> Decisions:
        """The decisions on `request.calls`."""
        ...


class CallbackApprover:
    """An approver that asks a function: `fn(request) -> decisions`, sync or async.

    An async function runs on the event loop. A sync function runs in a worker thread,
    so that it may block (a prompt, a web form, a queue) without stalling other turns,
    and so that `ApprovalAdvisor(timeout=...)` can give up on it: the thread is then left
    to finish on its own (threads cannot be interrupted) and its late answer is ignored.
    `run_inline=True` calls a sync function on the event loop instead, for a function that
    never blocks (a rule over the arguments): it saves the thread hop (a few hundred
    microseconds a round), but `timeout` can then not interrupt it.
    """

    def __init__(
        self,
        fn: Callable[[ApprovalRequest], Decisions | Awaitable[Decisions]],
        *,
        name: str = "",
        run_inline: bool = False,
    ) -> None:
        require_callable(fn, "CallbackApprover's function", "fn(request) -> decisions")
        self.fn = fn
        self.name = name or str(getattr(fn, "__name__", "callback"))
        self.run_inline = run_inline

    def __repr__(self) -> str:
        return f"CallbackApprover({self.name})"

    async def decide(self, request: ApprovalRequest) -> Decisions:
        """Call the function (a sync one in a worker thread)."""
        if self.run_inline or _is_async_callable(self.fn):
            answer = self.fn(request)
        else:
            answer = await anyio.to_thread.run_sync(self.fn, request, abandon_on_cancel=True)
        if inspect.isawaitable(answer):
            decisions: Decisions = await answer
            return decisions
        return answer


def _is_async_callable(fn: Callable[..., Any]) -> bool:
    while isinstance(fn, partial):
        fn = fn.func
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
        getattr(fn, "__call__", None)  # noqa: B004
    )


class DeferredApprover:
    """An approver that always decides later: every call is deferred until a resume
    (`chain.call(transcript, decisions=...)`)."""

    def __repr__(self) -> str:
        return "DeferredApprover()"

    async def decide(self, request: ApprovalRequest) -> Decisions:
        """Defer every call."""
        return [Defer() for _ in request.calls]


class ConsoleApprover:
    """Asks a person at a terminal: approve, edit the arguments, or reject with a reason.

    Shows each call's tool, description and arguments, then reads one answer per call:
    `a` (approve), `aa` (approve, and always allow this tool for the rest of the
    conversation: `Approve(remember="tool")`), `e` (edit: type new arguments as a JSON
    object), `r` (reject: type a reason). Input is read in a worker thread, so the event
    loop keeps running; end of input rejects what is left. `input_fn` and `output` can be
    replaced (tests, other UIs).

    One prompt at a time: concurrent `decide` calls (two turns sharing the approver, or
    an advisor that asks per call) wait for each other, so a person answers the calls in
    the order they are shown and an answer can never go to another call's prompt.
    """

    def __init__(
        self,
        *,
        input_fn: Callable[[], str] = input,
        output: TextIO | None = None,
        user: str = "console",
    ) -> None:
        require_callable(input_fn, "input_fn", "input_fn() -> the typed answer")
        self.input_fn = input_fn
        self.output = output
        self.user = user
        self._prompting: anyio.Lock | None = None

    def __repr__(self) -> str:
        return f"ConsoleApprover(user={self.user!r})"

    async def decide(self, request: ApprovalRequest) -> Decisions:
        """Prompt for each call in turn, after any other `decide` of this approver ended."""
        if self._prompting is None:
            self._prompting = anyio.Lock()
        async with self._prompting:
            return await self._prompt(request)

    async def _prompt(self, request: ApprovalRequest) -> Decisions:
        n = len(request.calls)
        self._say(f"\nApproval needed for {n} tool call{'s' if n != 1 else ''}:")
        decisions: list[Decision] = []
        for i, call in enumerate(request.calls, 1):
            self._describe(i, n, call)
            try:
                decisions.append(await self._ask(call))
            except EOFError:
                self._say("  (end of input: rejecting the remaining calls)")
                reason = "no answer from the console"
                decisions += [Reject(reason, by=self.user)] * (n - len(decisions))
                break
        return decisions

    def _describe(self, i: int, n: int, call: ApprovalCall) -> None:
        self._say(f"\n[{i}/{n}] {call.name}: {call.description}")
        for key, value in call.arguments.items():
            self._say(f"    {key} = {json.dumps(value, ensure_ascii=False, default=str)}")
        for key, value in call.details.items():
            self._say(f"    ({key}: {value})")

    async def _ask(self, call: ApprovalCall) -> Decision:
        while True:
            answer = (
                (await self._read("  approve (a), always allow (aa), edit (e) or reject (r)? "))
                .strip()
                .lower()
            )
            if answer in ("a", "approve", "y", "yes"):
                return Approve(by=self.user)
            if answer in ("aa", "always"):
                return Approve(by=self.user, remember="tool")
            if answer in ("r", "reject", "n", "no"):
                reason = (await self._read("  reason: ")).strip()
                return Reject(reason or "rejected at the console", by=self.user)
            if answer in ("e", "edit"):
                edited = await self._edit(call)
                if edited is not None:
                    return Approve(edited, by=self.user)
                continue
            self._say("  please answer a, aa, e or r")

    async def _edit(self, call: ApprovalCall) -> dict[str, Any] | None:
        current = json.dumps(dict(call.arguments), ensure_ascii=False, default=str)
        self._say(f"  current arguments: {current}")
        text = (await self._read("  new arguments (JSON object, empty to go back): ")).strip()
        if not text:
            return None
        try:
            value = parse_arguments(text)
        except ArgumentsError as exc:
            self._say(f"  cannot use these arguments: {exc}")
            return None
        if not isinstance(value, dict):
            self._say("  the arguments must be a JSON object")
            return None
        return value

    async def _read(self, prompt: str) -> str:
        out = self.output or sys.stdout
        out.write(prompt)
        out.flush()
        return await anyio.to_thread.run_sync(self.input_fn, abandon_on_cancel=True)

    def _say(self, line: str) -> None:
        out = self.output or sys.stdout
        out.write(line + "\n")
        out.flush()


__all__ = ["Approver", "CallbackApprover", "ConsoleApprover", "DeferredApprover"]
