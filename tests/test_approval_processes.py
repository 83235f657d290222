"""Exactly-once resumes across real OS processes, on SQLite and on a real PostgreSQL server.

Each worker (tests/approval_workers/resume_worker.py) is a separate Python process with its
own chain and its own store object on the shared database. The tool it runs appends its
PID to a log file, so the test counts executions across all of them. The tests are plain
sync functions; each worker runs its resume with `anyio.run` on asyncio.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest

from advisorchain import Chain, ToolCall, ToolCallingAdvisor, UserMessage, dump_messages, tool
from advisorchain.advisors import (
    ApprovalAdvisor,
    ApprovalStore,
    DeferredApprover,
    PostgresApprovalStore,
    SQLiteApprovalStore,
)
from advisorchain.providers import ScriptedChatModel

from postgres_support import drop_approval_tables, require_postgres_dsn

WORKER = Path(__file__).parent / "approval_workers" / "resume_worker.py"
DEADLINE = 60.0
"""Seconds the test waits for a worker to get somewhere: a liveness bound, not a timing."""


@dataclass
class Database:
    """Where the approvals live: `spec` for the workers, `store()` for this process."""

    spec: str
    store: Callable[[], ApprovalStore]


@pytest.fixture(params=["sqlite", "postgres"])
def database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Database]:
    if request.param == "sqlite":
        path = tmp_path / "approvals.db"
        yield Database(f"sqlite:{path}", lambda: SQLiteApprovalStore(path))
        return
    dsn = require_postgres_dsn()
    prefix = f"x{uuid.uuid4().hex[:10]}_"
    yield Database(f"postgres:{prefix}", lambda: PostgresApprovalStore(dsn, table_prefix=prefix))
    drop_approval_tables(dsn, prefix)


async def run_in_store(database: Database, fn: Callable[[ApprovalStore], Any]) -> Any:
    """`await fn(store)` on a fresh store object, closed afterwards."""
    store = database.store()
    try:
        return await fn(store)
    finally:
        if isinstance(store, PostgresApprovalStore):
            await store.aclose()


def in_store(database: Database, fn: Callable[[ApprovalStore], Any]) -> Any:
    return anyio.run(run_in_store, database, fn, backend="asyncio")


async def suspend(store: ApprovalStore, transcript: Path) -> str:
    """Run a turn in this process that ends waiting for approval of `transfer` (`c1`);
    its transcript goes to `transcript` (what the caller keeps), its approval id back."""

    @tool(requires_approval=True)
    async def transfer(to: str, amount: int) -> str:
        """Send money to an account."""
        raise AssertionError("the suspending process never runs the call")

    model = ScriptedChatModel(
        [[ToolCall.from_arguments("transfer", {"to": "bob", "amount": 5}, id="c1")]]
    )
    chain = Chain(
        [ToolCallingAdvisor(), ApprovalAdvisor(DeferredApprover(), store=store)],
        model=model,
        tools=[transfer],
    )
    response = await chain.call("pay bob")
    assert response.finish_reason == "deferred"
    saved = dump_messages([UserMessage(content="pay bob"), *response.messages])
    await anyio.Path(transcript).write_bytes(saved)
    approval_id: str = response.deferred[0].metadata["approval_id"]
    return approval_id


def start(stack: ExitStack, cwd: Path, *args: object) -> subprocess.Popen[str]:
    """A worker process; `stack` kills it (if still running) and reaps it on exit."""
    proc = stack.enter_context(
        subprocess.Popen(
            [sys.executable, str(WORKER), *map(str, args)],
            cwd=cwd,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
    )

    def kill() -> None:
        if proc.poll() is None:
            proc.kill()

    stack.callback(kill)
    return proc


def finish(proc: subprocess.Popen[str]) -> dict[str, Any]:
    """The worker's report, once it has exited 0."""
    out, err = proc.communicate(timeout=DEADLINE)
    assert proc.returncode == 0, f"worker {proc.pid} exited {proc.returncode}:\n{err}"
    report: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    report["pid"] = proc.pid
    return report


def executions(log: Path) -> list[int]:
    """The PIDs of the processes that ran the tool, in order."""
    if not log.exists():
        return []
    return [int(line) for line in log.read_text().split()]


def wait_for(condition: Callable[[], object], what: str) -> None:
    deadline = time.monotonic() + DEADLINE
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting: {what}")
        time.sleep(0.02)


@pytest.mark.parametrize("workers", [2, 4])
def test_racing_worker_processes_execute_the_call_once(
    database: Database, tmp_path: Path, workers: int
) -> None:
    transcript = tmp_path / "transcript.json"
    pending_id = in_store(database, lambda s: suspend(s, transcript))
    log, barrier, release = tmp_path / "executions.log", tmp_path / "barrier", tmp_path / "go"
    barrier.mkdir()
    with ExitStack() as stack:
        procs = [
            start(
                stack,
                tmp_path,
                database.spec,
                transcript,
                log,
                "--barrier",
                barrier,
                "--parties",
                workers,
                "--release",
                release,
            )
            for _ in range(workers)
        ]
        # Every worker has read the approval as waiting before any claims it (the barrier).
        # The winner holds its claim (its tool waits for `release`) until every other worker
        # has exited, so the losers lose against a live claim, not a completed approval.
        wait_for(
            lambda: sum(p.poll() is not None for p in procs) + len(executions(log)) >= workers,
            "every worker either ran the tool or exited",
        )
        release.touch()
        reports = [finish(p) for p in procs]

    winners = [r for r in reports if r["outcome"] == "resumed"]
    losers = [r for r in reports if r["outcome"] == "already_resolved"]
    assert len(winners) == 1 and len(losers) == workers - 1, reports
    (winner,) = winners
    assert executions(log) == [winner["pid"]]
    assert winner["results"] == [["c1", False, "sent 5 to bob"]]
    assert winner["detail"] == "Done."
    assert all("being resumed by another worker" in r["detail"] for r in losers), losers

    record = in_store(database, lambda s: s.get(pending_id))
    assert record is not None and record.status == "completed"
    (call,) = record.calls
    assert call.state == "done" and call.result is not None and call.result.outcome == "ok"
    audit = in_store(database, lambda s: s.audit(pending_id))
    assert [(a.call_id, a.decision) for a in audit] == [("c1", "approved")]


def test_a_worker_killed_mid_call_leaves_its_outcome_unknown(
    database: Database, tmp_path: Path
) -> None:
    transcript = tmp_path / "transcript.json"
    pending_id = in_store(database, lambda s: suspend(s, transcript))
    log = tmp_path / "executions.log"
    with ExitStack() as stack:
        doomed = start(
            stack,
            tmp_path,
            database.spec,
            transcript,
            log,
            "--release",
            tmp_path / "never",  # the tool blocks for good once it has recorded its start
            "--claim-timeout",
            1.0,
        )
        wait_for(
            lambda: executions(log) or doomed.poll() is not None, "the first worker ran the tool"
        )
        assert doomed.poll() is None, doomed.communicate()[1]
        doomed.send_signal(signal.SIGKILL)
        doomed.wait(DEADLINE)
        assert doomed.returncode == -signal.SIGKILL
        assert executions(log) == [doomed.pid]

        record = in_store(database, lambda s: s.get(pending_id))
        assert record is not None and record.status == "running"
        assert record.calls[0].state == "started" and record.claimed_until is not None
        lease_end: float = record.claimed_until
        wait_for(lambda: time.time() > lease_end, "the dead worker's claim expired")

        report = finish(start(stack, tmp_path, database.spec, transcript, log))

    assert report["outcome"] == "resumed"
    ((call_id, is_error, content),) = report["results"]
    assert (call_id, is_error) == ("c1", True) and "outcome of this call is unknown" in content
    assert executions(log) == [doomed.pid]  # not run again

    record = in_store(database, lambda s: s.get(pending_id))
    assert record is not None and record.status == "completed"
    (call,) = record.calls
    assert call.state == "done" and call.result is not None and call.result.outcome == "unknown"
    audit = in_store(database, lambda s: s.audit(pending_id))
    assert [(a.call_id, a.decision) for a in audit] == [("c1", "approved")]  # the first claim's
