"""The `advisorchain` commands for the jobs users do by hand: `run` a chain, decide
pending `approvals`, show a stored `conversation`. `cli.py` parses; this module acts.

A chain is named `module:attribute` (`myapp.agents:chain`; the current directory is on
the import path, as for `python -m`): the attribute is a `Chain`, or a function taking no
arguments that returns one. A store is named `sqlite:PATH` or by a PostgreSQL URL
(`postgresql://user@host/db`; the `postgres` extra).

Deciding an approval resumes the deferred turn (`chain.call(decisions=...,
conversation_id=...)`, memory supplying the transcript): it runs the approved
calls through the chain that suspended it and asks its model to go on, so `approve`,
`edit` and `reject` take that chain (`--chain`); its `ApprovalAdvisor`'s store is the
store. Every decision is audited with `decided_by` = `--by`, by default `cli:<login>`.
"""

from __future__ import annotations

import argparse
import getpass
import importlib
import json
import os
import sys
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import IO, Any

import anyio

from .advisors.approval import (
    ApprovalAdvisor,
    ApprovalStore,
    Approve,
    PendingRecord,
    PostgresApprovalStore,
    Reject,
    SQLiteApprovalStore,
)
from .advisors.memory import ChatMemoryStore, PostgresChatMemoryStore, SQLiteChatMemoryStore
from .advisors.redaction import RedactionAdvisor
from .core.chain import Chain
from .core.events import ResponseCompleted, TextDelta, ToolCallFinished, ToolCallStarted
from .core.messages import Message, UserMessage
from .core.response import ChatResponse
from .transcript import SECRET_RULES, format_transcript, supports_color


class UsageError(Exception):
    """A command line that cannot work (exit status 2): the message says what to give."""


# -- naming things ----------------------------------------------------------------------------


def load_chain(spec: str) -> Chain:
    """The `Chain` that `module:attribute` names (a chain, or a function returning one)."""
    module_name, sep, attribute = spec.partition(":")
    if not sep or not module_name or not attribute:
        raise UsageError(f"name the chain as module:attribute (myapp.agents:chain), not {spec!r}")
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        value: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise UsageError(f"cannot import {module_name!r}: {exc}") from None
    for name in attribute.split("."):
        if not hasattr(value, name):
            raise UsageError(f"{module_name!r} has no attribute {attribute!r}")
        value = getattr(value, name)
    if not isinstance(value, Chain) and callable(value):
        value = value()
    if not isinstance(value, Chain):
        raise UsageError(f"{spec} is a {type(value).__name__}, not a Chain")
    return value


def _store_target(spec: str) -> tuple[str, str]:
    if spec.startswith("sqlite:"):
        path = spec.removeprefix("sqlite:")
        if path.startswith("///"):  # sqlite:///abs/path, as in SQLAlchemy URLs
            path = path[2:]
        if not path:
            raise UsageError("give the database file: sqlite:PATH")
        return "sqlite", path
    if spec.startswith(("postgresql://", "postgres://")):
        return "postgres", spec
    raise UsageError(f"a store is sqlite:PATH or postgresql://..., not {spec!r}")


def approval_store(spec: str, table_prefix: str) -> ApprovalStore:
    """The approval store `spec` names."""
    kind, target = _store_target(spec)
    if kind == "sqlite":
        if not os.path.exists(target):
            raise UsageError(f"no SQLite database at {target!r}")
        return SQLiteApprovalStore(target, table_prefix=table_prefix)
    return PostgresApprovalStore(target, table_prefix=table_prefix)


def memory_store(spec: str, table_prefix: str) -> ChatMemoryStore:
    """The memory store `spec` names."""
    kind, target = _store_target(spec)
    if kind == "sqlite":
        if not os.path.exists(target):
            raise UsageError(f"no SQLite database at {target!r}")
        return SQLiteChatMemoryStore(target, table=f"{table_prefix}memory")
    return PostgresChatMemoryStore(target, table_prefix=table_prefix)


def chain_approvals(chain: Chain) -> ApprovalAdvisor:
    """The chain's `ApprovalAdvisor` (the one that suspends and resumes its turns)."""
    for link in chain.advisors:
        if isinstance(link, ApprovalAdvisor):
            return link
    raise UsageError("the chain has no ApprovalAdvisor: it has no approvals to decide")


@asynccontextmanager
async def _closing(store: object) -> AsyncIterator[None]:
    try:
        yield
    finally:
        aclose = getattr(store, "aclose", None)
        if aclose is not None:
            await aclose()


def default_by() -> str:
    """Who decides, by default: `cli:<login name>`."""
    try:
        return f"cli:{getpass.getuser()}"
    except (KeyError, OSError):  # no login name (a container without a passwd entry)
        return f"cli:uid-{os.getuid()}"


# -- run ----------------------------------------------------------------------------------------


class StatusLine:
    """One line on a terminal saying what the chain is doing, with the time it took so far;
    written over in place and cleared before text is printed. Disabled, it writes nothing."""

    def __init__(self, stream: IO[str], enabled: bool, clock: Callable[[], float] = time.monotonic):
        self.stream = stream
        self.enabled = enabled
        self.clock = clock
        self.what = ""
        self.since = clock()
        self.shown = False

    def set(self, what: str) -> None:
        """Show `what` (the time restarts)."""
        self.what = what
        self.since = self.clock()
        self.draw()

    def draw(self) -> None:
        """Write the line again (the elapsed time changed)."""
        if not self.enabled or not self.what:
            return
        elapsed = self.clock() - self.since
        self.stream.write(f"\r\x1b[2K… {self.what} ({elapsed:.1f}s)")
        self.stream.flush()
        self.shown = True

    def clear(self) -> None:
        """Remove the line (before the caller prints)."""
        if self.enabled and self.shown:
            self.stream.write("\r\x1b[2K")
            self.stream.flush()
            self.shown = False
        self.what = ""


async def stream_turn(
    chain: Chain,
    prompt: Sequence[Message],
    *,
    out: IO[str],
    status: StatusLine,
    conversation_id: str | None,
    prefix: str = "",
) -> ChatResponse:
    """Stream one turn to `out` (its text as it comes, after `prefix`), with `status`
    saying what runs meanwhile."""
    response: ChatResponse | None = None
    wrote_text = False
    status.set("waiting for the model")
    async with anyio.create_task_group() as tasks:

        async def tick() -> None:
            while True:
                await anyio.sleep(0.2)
                status.draw()

        if status.enabled:
            tasks.start_soon(tick)
        try:
            async for event in chain.stream(prompt, conversation_id=conversation_id):
                if isinstance(event, TextDelta):
                    if status.what:
                        status.clear()
                    if not wrote_text:
                        out.write(prefix)
                    out.write(event.text)
                    out.flush()
                    wrote_text = True
                elif isinstance(event, ToolCallStarted):
                    status.set(f"running {event.call.name}")
                elif isinstance(event, ToolCallFinished):
                    status.set("waiting for the model")
                elif isinstance(event, ResponseCompleted):
                    response = event.response
        finally:
            status.clear()
            tasks.cancel_scope.cancel()
    assert response is not None  # Chain.stream ends with ResponseCompleted or raises
    if not wrote_text and response.text:
        out.write(prefix + response.text)
    if wrote_text or response.text:
        out.write("\n")
    out.flush()
    return response


def _report_pending(response: ChatResponse, chain_spec: str, err: IO[str]) -> None:
    """One line per call that waits for approval, with the command that decides it."""
    for waiting in response.deferred:
        approval_id = waiting.metadata.get("approval_id")
        if waiting.kind != "approval" or not isinstance(approval_id, str):
            err.write(f"waiting ({waiting.kind}): {waiting.name} [{waiting.id}]\n")
            continue
        err.write(
            f"approval pending: {approval_id} ({waiting.name}); decide with: advisorchain "
            f"approvals approve {approval_id} --chain {chain_spec}\n"
        )


async def run_command(args: argparse.Namespace, out: IO[str], err: IO[str], inp: IO[str]) -> int:
    """`advisorchain run`: one prompt, or an interactive session."""
    chain = load_chain(args.chain)
    show_status = args.status if args.status is not None else err.isatty()
    status = StatusLine(err, show_status)
    interactive = args.interactive or (args.prompt is None and inp.isatty())
    if not interactive:
        text = args.prompt if args.prompt is not None else inp.read()
        if not text.strip():
            raise UsageError("give a prompt: -p TEXT, on standard input, or -i")
        response = await stream_turn(
            chain,
            (UserMessage(content=text),),
            out=out,
            status=status,
            conversation_id=args.conversation_id,
        )
        _report_pending(response, args.chain, err)
        if args.transcript:
            out.write(format_transcript(response, color=supports_color(out)))
        return 0
    history: list[Message] = []
    while True:
        out.write("you> ")
        out.flush()
        line = await anyio.to_thread.run_sync(inp.readline)
        if not line:  # end of input
            out.write("\n")
            return 0
        text = line.strip()
        if text in ("exit", "quit", "/exit", "/quit"):
            return 0
        if not text:
            continue
        user = UserMessage(content=text)
        # With a conversation id the chain's memory holds the history; else this session does.
        prompt = (user,) if args.conversation_id else (*history, user)
        response = await stream_turn(
            chain,
            prompt,
            out=out,
            status=status,
            conversation_id=args.conversation_id,
            prefix="assistant> ",
        )
        _report_pending(response, args.chain, err)
        history.extend((user, *response.messages))


# -- approvals ----------------------------------------------------------------------------------


def _when(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _secret_free(text: str) -> str:
    """`text` with the secrets a transcript hides (API keys, card numbers) redacted."""
    return _SECRETS.redact(text)


_SECRETS = RedactionAdvisor(SECRET_RULES, apply_to=("answer",))


def _call_text(name: str, arguments: Any) -> str:
    text = json.dumps(dict(arguments), ensure_ascii=False, sort_keys=True, default=str)
    return _secret_free(f"{name}({text})")


def _store_of(args: argparse.Namespace) -> ApprovalStore:
    if args.store:
        return approval_store(args.store, args.table_prefix)
    if args.chain:
        return chain_approvals(load_chain(args.chain)).store
    raise UsageError("give the store: --store sqlite:PATH | postgresql://... (or --chain)")


async def approvals_command(args: argparse.Namespace, out: IO[str], err: IO[str]) -> int:
    """`advisorchain approvals list|show|approve|edit|reject`."""
    if args.action in ("list", "show"):
        store = _store_of(args)
        async with _closing(store):
            if args.action == "list":
                return await _list(store, args, out)
            return await _show(store, args, out)
    if not args.chain:
        raise UsageError(
            f"approvals {args.action} continues the suspended turn (it runs the approved calls "
            "and asks the model to go on): give the chain that suspended it, --chain "
            "module:attribute"
        )
    chain = load_chain(args.chain)
    store = chain_approvals(chain).store
    record = await store.get(args.id)
    if record is None:
        err.write(f"advisorchain: no pending approval {args.id!r}\n")
        return 1
    if record.status == "completed":
        err.write(f"advisorchain: approval {args.id!r} was already decided and resumed\n")
        return 1
    if record.conversation_id is None:
        err.write(
            f"advisorchain: approval {args.id!r} belongs to a turn no memory stored (no "
            "conversation id): decide it in the program that keeps its transcript, with "
            "chain.call(transcript, decisions=...)\n"
        )
        return 1
    decisions = _decisions(record, args)
    for call in record.calls:
        decision = decisions[call.id]
        verdict = "approved" if isinstance(decision, Approve) else "rejected"
        arguments = decision.arguments if isinstance(decision, Approve) else None
        shown = _call_text(call.name, arguments if arguments is not None else call.arguments)
        edited = " (edited)" if arguments is not None else ""
        err.write(f"{verdict}{edited}: {call.id} {shown}\n")
    # The chain's memory supplies the transcript; the store checks it against the record.
    response = await chain.call(decisions=decisions, conversation_id=record.conversation_id)
    if response.text:
        out.write(response.text + "\n")
    _report_pending(response, args.chain, err)
    return 0


def _decisions(record: PendingRecord, args: argparse.Namespace) -> dict[str, Approve | Reject]:
    by = args.by or default_by()
    ids = [c.id for c in record.calls]
    named: list[str] = list(args.call or [])
    edited: dict[str, dict[str, Any]] = {}
    if args.action == "edit":
        try:
            arguments = json.loads(args.arguments)
        except ValueError as exc:
            raise UsageError(f"--arguments must be a JSON object: {exc}") from None
        if not isinstance(arguments, dict):
            raise UsageError("--arguments must be a JSON object")
        edited[args.call_id] = arguments
        named.append(args.call_id)
    unknown = [c for c in named if c not in ids]
    if unknown:
        raise UsageError(f"{args.id} has no pending call {unknown[0]!r} (its calls: {ids})")
    if args.action == "reject":
        return {i: Reject(args.reason, by=by) for i in ids}
    approved = set(named) if named else set(ids)
    reason = args.reason or f"not approved by {by}"
    return {
        i: Approve(arguments=edited.get(i), by=by) if i in approved else Reject(reason, by=by)
        for i in ids
    }


async def _list(store: ApprovalStore, args: argparse.Namespace, out: IO[str]) -> int:
    records = await store.waiting(args.conversation_id)
    if not records:
        out.write("no pending approvals\n")
        return 0
    for record in records:
        calls = ", ".join(_call_text(c.name, c.arguments) for c in record.calls)
        conversation = record.conversation_id or "-"
        out.write(f"{record.id}  {_when(record.created_at)}  {conversation}  {calls}\n")
    return 0


async def _show(store: ApprovalStore, args: argparse.Namespace, out: IO[str]) -> int:
    record = await store.get(args.id)
    if record is None:
        raise UsageError(f"no pending approval {args.id!r}")
    out.write(
        f"approval {record.id}: {record.status}, conversation "
        f"{record.conversation_id or '-'}, created {_when(record.created_at)}\n"
    )
    for call in record.calls:
        decision = ""
        if isinstance(call.decision, Approve):
            decision = f", approved by {call.decision.by or '-'}"
        elif isinstance(call.decision, Reject):
            decision = f", rejected by {call.decision.by or '-'}: {call.decision.reason}"
        out.write(f"  call {call.id}: {_call_text(call.name, call.arguments)} [{call.state}]")
        out.write(decision + "\n")
    if record.round:
        # The store keeps no transcript (the caller or a memory does): the round it checks.
        others = ", ".join(f"{c.name} [{c.id}]" for c in record.round)
        out.write(f"round: {others}\n")
    if args.memory and record.conversation_id:
        memory = memory_store(args.memory, args.table_prefix)
        async with _closing(memory):
            messages = await memory.load(record.conversation_id)
        out.write("transcript:\n")
        out.write(format_transcript(messages, color=supports_color(out)))
    audit = await store.audit(record.id)
    if audit:
        out.write("audit:\n")
        for entry in audit:
            edited = (
                " to "
                + _secret_free(
                    json.dumps(dict(entry.edited_arguments), sort_keys=True, default=str)
                )
                if entry.edited_arguments is not None
                else ""
            )
            reason = f" ({entry.reason})" if entry.reason else ""
            out.write(
                f"  {_when(entry.decided_at)} {entry.call_id} {entry.tool_name} "
                f"{entry.decision} by {entry.decided_by}{edited}{reason}\n"
            )
    return 0


# -- conversation -------------------------------------------------------------------------------


async def conversation_command(args: argparse.Namespace, out: IO[str]) -> int:
    """`advisorchain conversation show ID --store ...`."""
    store = memory_store(args.store, args.table_prefix)
    async with _closing(store):
        messages = await store.load(args.id)
    if not messages:
        out.write(f"no messages stored for conversation {args.id!r}\n")
        return 1
    if args.last:
        messages = messages[-args.last :]
    out.write(format_transcript(messages, color=supports_color(out)))
    return 0


def add_parsers(commands: Any) -> None:
    """Add `run`, `approvals` and `conversation` to the `advisorchain` parser's commands."""
    _add_run(commands)
    _add_approvals(commands)
    _add_conversation(commands)


def _add_run(commands: Any) -> None:
    run = commands.add_parser(
        "run",
        help="run a chain (module:attribute) on a prompt, or interactively",
        description="Stream a chain's answer. Without -p, read the prompt from standard "
        "input, or start an interactive session when it is a terminal (or with -i).",
    )
    run.add_argument("chain", metavar="module:attribute", help="the Chain (or its factory)")
    run.add_argument("-p", "--prompt", help="the user's message")
    run.add_argument("-i", "--interactive", action="store_true", help="an interactive session")
    run.add_argument("--conversation-id", help="the conversation (for the chain's memory)")
    run.add_argument(
        "--transcript", action="store_true", help="print the turn's transcript after the answer"
    )
    status = run.add_mutually_exclusive_group()
    status.add_argument(
        "--status", dest="status", action="store_true", default=None,
        help="a status line on stderr while the model works (default: when stderr is a terminal)",
    )  # fmt: skip
    status.add_argument("--no-status", dest="status", action="store_false")


def _add_approvals(commands: Any) -> None:
    approvals = commands.add_parser(
        "approvals",
        help="list, show and decide pending approvals in a store",
        description="Pending approvals of a SQLite or PostgreSQL store. approve, edit and "
        "reject continue the suspended turn through its chain (--chain).",
    )
    actions = approvals.add_subparsers(dest="action", required=True, metavar="action")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--store", help="sqlite:PATH or postgresql://...")
    common.add_argument("--chain", help="module:attribute of the chain that suspended the turn")
    common.add_argument(
        "--table-prefix", default="advisorchain_", help="the tables' prefix (default advisorchain_)"
    )
    listing = actions.add_parser("list", parents=[common], help="the approvals still waiting")
    listing.add_argument("--conversation-id", help="only this conversation's")
    show = actions.add_parser("show", parents=[common], help="one approval, transcript, audit")
    show.add_argument("id")
    show.add_argument(
        "--memory", help="the memory store holding its conversation (sqlite:PATH, postgresql://)"
    )
    deciding = argparse.ArgumentParser(add_help=False, parents=[common])
    deciding.add_argument("--by", help="who decides, for the audit (default: cli:<login>)")
    approve = actions.add_parser(
        "approve", parents=[deciding], help="approve the calls (or those named by --call)"
    )
    approve.add_argument("id")
    approve.add_argument(
        "--call", action="append", metavar="CALL_ID", help="approve this call; the others are "
        "rejected (repeatable; default: approve every call)",
    )  # fmt: skip
    approve.add_argument("--reason", help="why the other calls are rejected")
    edit = actions.add_parser(
        "edit", parents=[deciding], help="approve one call with other arguments"
    )
    edit.add_argument("id")
    edit.add_argument("call_id", metavar="CALL_ID")
    edit.add_argument("--arguments", required=True, help="the arguments to run, a JSON object")
    edit.add_argument(
        "--call", action="append", metavar="CALL_ID", help="also approve this call as it is "
        "(repeatable); the other calls are rejected",
    )  # fmt: skip
    edit.add_argument("--reason", help="why the other calls are rejected")
    reject = actions.add_parser("reject", parents=[deciding], help="reject every call")
    reject.add_argument("id")
    reject.add_argument("--reason", required=True, help="what the model is told")
    reject.set_defaults(call=None)


def _add_conversation(commands: Any) -> None:
    conversation = commands.add_parser("conversation", help="show a stored conversation")
    conversation_actions = conversation.add_subparsers(dest="action", required=True)
    show_conversation = conversation_actions.add_parser("show", help="its transcript")
    show_conversation.add_argument("id")
    show_conversation.add_argument("--store", required=True, help="sqlite:PATH or postgresql://")
    show_conversation.add_argument("--last", type=int, help="only the last N messages")
    show_conversation.add_argument(
        "--table-prefix", default="advisorchain_", help="the tables' prefix"
    )


def dispatch(args: argparse.Namespace) -> int | None:
    """Run the command `args` names if it is one of this module's; `None` otherwise."""
    if args.command == "run":
        return anyio.run(lambda: run_command(args, sys.stdout, sys.stderr, sys.stdin))
    if args.command == "approvals":
        return anyio.run(lambda: approvals_command(args, sys.stdout, sys.stderr))
    if args.command == "conversation":
        return anyio.run(lambda: conversation_command(args, sys.stdout))
    return None


__all__ = [
    "StatusLine",
    "UsageError",
    "add_parsers",
    "approval_store",
    "chain_approvals",
    "default_by",
    "dispatch",
    "load_chain",
    "memory_store",
    "stream_turn",
]
