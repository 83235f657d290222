"""`advisorchain run | approvals | conversation`, end to end as subprocesses (SQLite and
PostgreSQL stores), and the status line the run command draws."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from advisorchain import Chain, ToolCall, ToolCallingAdvisor, tool
from advisorchain.cli_commands import StatusLine, default_by, stream_turn
from advisorchain.providers import ScriptedChatModel

from postgres_support import drop_approval_tables, drop_tables

APP = textwrap.dedent(
    '''
    import os

    from advisorchain import Chain, ToolCallingAdvisor, tool
    from advisorchain.advisors import (
        ApprovalAdvisor, DeferredApprover, MemoryAdvisor, PostgresApprovalStore,
        PostgresChatMemoryStore, SQLiteApprovalStore, SQLiteChatMemoryStore,
    )
    from advisorchain.core.messages import ToolCall, ToolMessage, UserMessage
    from advisorchain.providers import ScriptedChatModel

    TARGET = os.environ["APP_STORE"]
    PREFIX = os.environ.get("APP_PREFIX", "advisorchain_")


    @tool(requires_approval=True)
    def refund(order_id: str, amount: int) -> str:
        """Refund an order."""
        return f"refunded {amount} EUR for order {order_id}"


    def reply(request):
        last = request.messages[-1]
        if isinstance(last, ToolMessage):
            return f"Done: {last.text}"
        if "refund" in last.text:
            return ToolCall.from_arguments(
                "refund", {"order_id": "7", "amount": 12}, id="call_1"
            )
        users = sum(isinstance(m, UserMessage) for m in request.messages)
        return f"You said: {last.text} ({users} user messages)"


    def chain():
        if TARGET.startswith("sqlite:"):
            approvals = SQLiteApprovalStore(TARGET[7:] + ".approvals", table_prefix=PREFIX)
            memory = SQLiteChatMemoryStore(TARGET[7:] + ".memory", table=PREFIX + "memory")
        else:
            approvals = PostgresApprovalStore(TARGET, table_prefix=PREFIX)
            memory = PostgresChatMemoryStore(TARGET, table_prefix=PREFIX)
        return Chain(
            [
                MemoryAdvisor(memory),
                ToolCallingAdvisor(),
                ApprovalAdvisor(DeferredApprover(), store=approvals),
            ],
            model=ScriptedChatModel(reply),
            tools=[refund],
        )
    '''
)


@dataclass
class Cli:
    folder: Path
    target: str  # sqlite:<base path> or a PostgreSQL DSN
    prefix: str

    def __call__(self, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
        env = {
            **os.environ,
            "APP_STORE": self.target,
            "APP_PREFIX": self.prefix,
            "NO_COLOR": "1",
            "USER": "alice",
            "LOGNAME": "alice",
        }
        return subprocess.run(
            [sys.executable, "-m", "advisorchain", *args],
            cwd=self.folder,
            env=env,
            input=stdin,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    def store(self, kind: str) -> list[str]:
        if self.target.startswith("sqlite:"):
            spec = f"{self.target}.{kind}"
        else:
            spec = self.target
        return ["--store", spec, "--table-prefix", self.prefix]


@pytest.fixture(params=["sqlite", "postgres"])
def cli(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Cli]:
    (tmp_path / "refunds_app.py").write_text(APP, encoding="utf-8")
    if request.param == "sqlite":
        yield Cli(tmp_path, f"sqlite:{tmp_path / 'app.db'}", "advisorchain_")
        return
    dsn: str = request.getfixturevalue("postgres_dsn")
    prefix = f"cli_{uuid.uuid4().hex[:8]}_"
    try:
        yield Cli(tmp_path, dsn, prefix)
    finally:
        drop_approval_tables(dsn, prefix)
        drop_tables(dsn, f"{prefix}memory")


def _pending_id(stderr: str) -> str:
    found = re.search(r"approval pending: (\S+) \(refund\)", stderr)
    assert found, stderr
    return found.group(1)


def test_run_streams_the_answer_of_a_prompt(cli: Cli) -> None:
    done = cli("run", "refunds_app:chain", "-p", "hello")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "You said: hello (1 user messages)\n"
    assert "\x1b" not in done.stderr  # no status line when stderr is not a terminal


def test_run_can_force_the_status_line_and_print_the_transcript(tmp_path: Path) -> None:
    (tmp_path / "refunds_app.py").write_text(APP, encoding="utf-8")
    cli = Cli(tmp_path, f"sqlite:{tmp_path / 'app.db'}", "advisorchain_")
    done = cli("run", "refunds_app:chain", "-p", "hello", "--status", "--transcript")
    assert done.returncode == 0, done.stderr
    # (text mode reads the carriage returns as newlines)
    assert "\n\x1b[2K… waiting for the model (" in done.stderr
    assert done.stderr.endswith("\n\x1b[2K")  # cleared before the answer
    lines = done.stdout.splitlines()
    assert lines[:2] == [
        "You said: hello (1 user messages)",
        "assistant: You said: hello (1 user messages)",
    ]
    assert lines[2].startswith("-- finish: stop · ") and len(lines) == 3


def test_run_reads_the_prompt_from_standard_input(cli: Cli) -> None:
    done = cli("run", "refunds_app:chain", stdin="from a pipe\n")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "You said: from a pipe\n (1 user messages)\n"


def test_an_interactive_session_keeps_its_history(cli: Cli) -> None:
    done = cli("run", "refunds_app:chain", "-i", stdin="hello\nagain\nexit\n")
    assert done.returncode == 0, done.stderr
    assert "assistant> You said: hello (1 user messages)" in done.stdout
    assert "assistant> You said: again (2 user messages)" in done.stdout


def test_approve_from_the_cli_resumes_the_turn_audited(cli: Cli) -> None:
    asked = cli("run", "refunds_app:chain", "-p", "refund order 7", "--conversation-id", "c-42")
    assert asked.returncode == 0, asked.stderr
    pending = _pending_id(asked.stderr)

    listed = cli("approvals", "list", *cli.store("approvals"))
    assert listed.returncode == 0, listed.stderr
    assert pending in listed.stdout and "c-42" in listed.stdout
    assert 'refund({"amount": 12, "order_id": "7"})' in listed.stdout

    memory = cli.store("memory")[1]
    shown = cli("approvals", "show", pending, *cli.store("approvals"), "--memory", memory)
    assert shown.returncode == 0, shown.stderr
    assert f"approval {pending}: pending, conversation c-42" in shown.stdout
    assert "user: refund order 7" in shown.stdout  # the transcript so far, from memory

    approved = cli("approvals", "approve", pending, "--chain", "refunds_app:chain")
    assert approved.returncode == 0, approved.stderr
    assert approved.stdout == "Done: refunded 12 EUR for order 7\n"
    assert "approved: call_1" in approved.stderr

    audited = cli("approvals", "show", pending, *cli.store("approvals"))
    assert "completed" in audited.stdout
    assert re.search(r"call_1 refund approved by cli:alice", audited.stdout), audited.stdout
    assert pending not in cli("approvals", "list", *cli.store("approvals")).stdout

    again = cli("approvals", "approve", pending, "--chain", "refunds_app:chain")
    assert again.returncode == 1 and "already decided" in again.stderr
    assert "approved:" not in again.stderr  # nothing claims to have been decided

    conversation = cli("conversation", "show", "c-42", *cli.store("memory"))
    assert conversation.returncode == 0, conversation.stderr
    lines = conversation.stdout.splitlines()
    assert lines[0] == "user: refund order 7"
    assert 'assistant → refund(order_id="7", amount=12)  [call_1]' in lines
    assert "tool refund [call_1] ok: refunded 12 EUR for order 7" in lines
    assert lines[-1] == "assistant: Done: refunded 12 EUR for order 7"


def test_edit_runs_the_edited_arguments_and_audits_both(cli: Cli) -> None:
    pending = _pending_id(
        cli("run", "refunds_app:chain", "-p", "refund order 7", "--conversation-id", "c-7").stderr
    )
    edited = cli(
        "approvals",
        "edit",
        pending,
        "call_1",
        "--arguments",
        json.dumps({"order_id": "7", "amount": 5}),
        "--chain",
        "refunds_app:chain",
        "--by",
        "bob",
    )
    assert edited.returncode == 0, edited.stderr
    # the model reads that the arguments were changed, and the result of what ran
    assert "changed the arguments of this call to" in edited.stdout
    assert edited.stdout.endswith("refunded 5 EUR for order 7\n")
    shown = cli("approvals", "show", pending, *cli.store("approvals")).stdout
    assert 'call_1 refund edited by bob to {"amount": 5, "order_id": "7"}' in shown


def test_reject_tells_the_model_why(cli: Cli) -> None:
    pending = _pending_id(
        cli("run", "refunds_app:chain", "-p", "refund order 7", "--conversation-id", "c-8").stderr
    )
    rejected = cli(
        "approvals", "reject", pending, "--reason", "too much", "--chain", "refunds_app:chain"
    )
    assert rejected.returncode == 0, rejected.stderr
    assert rejected.stdout == "Done: Error: not executed, the call was rejected: too much\n"
    shown = cli("approvals", "show", pending, *cli.store("approvals")).stdout
    assert "call_1 refund rejected by cli:alice (too much)" in shown


def test_a_turn_no_memory_stored_is_not_decided_from_the_cli(cli: Cli) -> None:
    pending = _pending_id(cli("run", "refunds_app:chain", "-p", "refund order 7").stderr)
    approved = cli("approvals", "approve", pending, "--chain", "refunds_app:chain")
    assert approved.returncode == 1
    assert "no memory stored" in approved.stderr
    assert "approved:" not in approved.stderr  # nothing claims to have been decided
    shown = cli("approvals", "show", pending, *cli.store("approvals")).stdout
    assert f"approval {pending}: pending" in shown


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["approvals", "approve", "x"], "give the chain that suspended it"),
        (["approvals", "list"], "give the store"),
        (["approvals", "list", "--store", "mysql://db"], "a store is sqlite:PATH"),
        (["approvals", "list", "--store", "sqlite:missing.db"], "no SQLite database"),
        (["run", "no_such_module:chain", "-p", "x"], "cannot import 'no_such_module'"),
        (["run", "refunds_app:nothing", "-p", "x"], "has no attribute 'nothing'"),
        (["run", "refunds_app", "-p", "x"], "module:attribute"),
        (["run", "refunds_app:TARGET", "-p", "x"], "is a str, not a Chain"),
    ],
)
def test_usage_errors_exit_2_with_what_to_give(tmp_path: Path, args: list[str], says: str) -> None:
    (tmp_path / "refunds_app.py").write_text(APP, encoding="utf-8")
    done = Cli(tmp_path, f"sqlite:{tmp_path / 'app.db'}", "advisorchain_")(*args)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert says in done.stderr
    assert "Traceback" not in done.stderr


def test_a_missing_approval_is_exit_1(tmp_path: Path) -> None:
    (tmp_path / "refunds_app.py").write_text(APP, encoding="utf-8")
    cli = Cli(tmp_path, f"sqlite:{tmp_path / 'app.db'}", "advisorchain_")
    done = cli("approvals", "approve", "nope", "--chain", "refunds_app:chain")
    assert done.returncode == 1 and "no pending approval 'nope'" in done.stderr


# -- the status line, in this process ---------------------------------------------------------


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@tool
def slow_lookup(order_id: str) -> str:
    """Look an order up."""
    return f"order {order_id}: shipped"


@pytest.mark.anyio
async def test_the_status_line_says_what_runs_and_is_cleared_before_text() -> None:
    chain = Chain(
        [ToolCallingAdvisor()],
        model=ScriptedChatModel(
            [ToolCall.from_arguments("slow_lookup", {"order_id": "7"}), "Shipped."]
        ),
        tools=[slow_lookup],
    )
    out, err = io.StringIO(), Terminal()
    ticks = iter(range(100))
    status = StatusLine(err, enabled=True, clock=lambda: float(next(ticks)))
    response = await stream_turn(chain, (), out=out, status=status, conversation_id=None)
    assert response.text == out.getvalue().strip() == "Shipped."
    drawn = err.getvalue()
    assert "\r\x1b[2K… waiting for the model" in drawn
    assert "… running slow_lookup" in drawn
    assert drawn.endswith("\r\x1b[2K")  # cleared: the answer's line is clean


def test_a_disabled_status_line_writes_nothing() -> None:
    err = Terminal()
    status = StatusLine(err, enabled=False)
    status.set("working")
    status.clear()
    assert err.getvalue() == ""


def test_decided_by_defaults_to_the_login_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOGNAME", "carol")
    monkeypatch.setenv("USER", "carol")
    assert default_by() == "cli:carol"


def test_listed_and_shown_arguments_have_their_secrets_redacted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from advisorchain.advisors import ApprovalAdvisor, DeferredApprover, SQLiteApprovalStore
    from advisorchain.cli import run as cli_run

    @tool(requires_approval=True)
    def charge(card: str) -> str:
        """Charge a card."""
        return "charged"

    database = tmp_path / "approvals.db"
    chain = Chain(
        [
            ToolCallingAdvisor(),
            ApprovalAdvisor(DeferredApprover(), store=SQLiteApprovalStore(database)),
        ],
        model=ScriptedChatModel(
            [ToolCall.from_arguments("charge", {"card": "4242 4242 4242 4242"}, id="c1")]
        ),
        tools=[charge],
    )
    pending = chain.call_sync("charge my card")
    assert pending.finish_reason == "deferred"
    assert cli_run(["approvals", "list", "--store", f"sqlite:{database}"]) == 0
    approval_id = pending.deferred[0].metadata["approval_id"]
    assert cli_run(["approvals", "show", approval_id, "--store", f"sqlite:{database}"]) == 0
    shown = capsys.readouterr().out
    assert "4242 4242" not in shown
    assert shown.count("[REDACTED:card]") >= 2  # listed, and the call shown
