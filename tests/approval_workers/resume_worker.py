"""One worker process resuming a deferred approval (run by tests/test_approval_processes.py).

    python resume_worker.py STORE TRANSCRIPT LOG [--barrier DIR --parties N] [--release FILE]
                            [--claim-timeout SECONDS]

STORE is `sqlite:PATH` or `postgres:TABLE_PREFIX` (the DSN comes from
ADVISORCHAIN_TEST_POSTGRES_DSN); TRANSCRIPT a file holding the deferred turn's transcript
(`dump_messages`), as the caller keeps it. The worker builds a fresh chain and a fresh
store on that database and approves call `c1`: `chain.call(transcript, decisions=...)`.

- `--barrier DIR`: after the resume's own `store.get` has read the approval, the worker
  waits until `--parties` workers have read it, so all of them go on to claim an approval
  that each has just seen waiting; then each claim lingers inside its transaction for a
  moment (`hold_claims`), so that claims which failed to exclude each other would overlap.
- The `transfer` tool appends one line `<pid>` to LOG (O_APPEND, fsync) before doing
  anything else, then waits for `--release` to exist (if given): the test decides when a
  winner may finish, or never lets it (and kills it).

It prints one JSON line: `{"outcome": "resumed" | "already_resolved", "detail": ...,
"results": [[call_id, is_error, content], ...]}` and exits 0; anything unexpected is a
traceback and exit status 1.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread

from advisorchain import Chain, ToolCallingAdvisor, ToolMessage, load_messages, tool
from advisorchain.advisors import (
    ApprovalAdvisor,
    ApprovalAlreadyResolved,
    ApprovalStore,
    Approve,
    DeferredApprover,
    PostgresApprovalStore,
    SQLiteApprovalStore,
)
from advisorchain.providers import ScriptedChatModel

DEADLINE = 120.0
"""Seconds any wait in a worker may last: a stuck worker fails instead of hanging."""
CLAIM_GRACE = 0.3
"""Seconds a claim lingers inside its transaction (see `hold_claims`)."""


def wait_until(condition: Callable[[], bool]) -> None:
    """Block until `condition()` holds (another process makes it so); fail after DEADLINE."""
    deadline = time.monotonic() + DEADLINE
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError("gave up waiting for the test")
        time.sleep(0.01)


def record_execution(log: Path) -> None:
    """Append this process's PID to `log`, durably, before the call has any effect."""
    fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{os.getpid()}\n".encode())
        os.fsync(fd)
    finally:
        os.close(fd)


def make_store(spec: str, claim_timeout: float | None) -> ApprovalStore:
    kind, _, where = spec.partition(":")
    options: dict[str, Any] = {}
    if claim_timeout is not None:
        options["claim_timeout"] = claim_timeout
    if kind == "sqlite":
        return SQLiteApprovalStore(where, **options)
    if kind == "postgres":
        dsn = os.environ["ADVISORCHAIN_TEST_POSTGRES_DSN"]
        return PostgresApprovalStore(dsn, table_prefix=where, **options)
    raise SystemExit(f"unknown store {spec!r}")


def meet(barrier: Path, parties: int) -> None:
    """Arrive at the barrier folder, then wait until `parties` processes have arrived."""
    barrier.mkdir(exist_ok=True)
    (barrier / str(os.getpid())).touch()
    wait_until(lambda: len(list(barrier.iterdir())) >= parties)


def with_barrier(store: ApprovalStore, barrier: Path, parties: int) -> None:
    """Make the store's first `get` wait until `parties` workers have made theirs."""
    original = store.get
    waited = False

    async def get(approval_id: str) -> Any:
        nonlocal waited
        record = await original(approval_id)
        if not waited:
            waited = True
            await anyio.to_thread.run_sync(meet, barrier, parties)
        return record

    store.get = get  # type: ignore[method-assign]


def hold_claims(store: Any, folder: Path, parties: int) -> None:
    """Make the store's first clock reading linger, to widen the race inside `claim`.

    The SQL stores read the clock once per claim, inside its transaction, after reading the
    approval and before deciding. The first reading waits until `parties` workers are at
    that point, or CLAIM_GRACE seconds: if claims lock the approval, the others cannot get
    there and the wait runs out; if they did not, every claim would overlap every other.
    """
    clock = store.clock
    first = True

    def lingering() -> float:
        nonlocal first
        if first:
            first = False
            (folder / str(os.getpid())).touch()
            end = time.monotonic() + CLAIM_GRACE
            while len(list(folder.iterdir())) < parties and time.monotonic() < end:
                time.sleep(0.01)
        now: float = clock()
        return now

    store.clock = lingering


async def main(args: argparse.Namespace) -> dict[str, Any]:
    log = Path(args.log)
    release = Path(args.release) if args.release else None

    @tool(requires_approval=True)
    async def transfer(to: str, amount: int) -> str:
        """Send money to an account."""
        await anyio.to_thread.run_sync(record_execution, log)
        if release is not None:
            await anyio.to_thread.run_sync(wait_until, release.exists)
        return f"sent {amount} to {to}"

    store = make_store(args.store, args.claim_timeout)
    if args.barrier:
        barrier = Path(args.barrier)
        (barrier / "claims").mkdir(exist_ok=True)
        with_barrier(store, barrier / "reads", args.parties)
        hold_claims(store, barrier / "claims", args.parties)
    chain = Chain(
        [ToolCallingAdvisor(), ApprovalAdvisor(DeferredApprover(), store=store)],
        model=ScriptedChatModel(["Done."]),
    )
    try:
        transcript = load_messages(await anyio.Path(args.transcript).read_bytes())
        response = await chain.call(transcript, decisions={"c1": Approve()}, tools=[transfer])
    except ApprovalAlreadyResolved as exc:
        return {"outcome": "already_resolved", "detail": str(exc), "results": []}
    finally:
        aclose = getattr(store, "aclose", None)
        if aclose is not None:
            await aclose()
    results = [
        [m.tool_call_id, m.is_error, m.content]
        for m in response.messages
        if isinstance(m, ToolMessage)
    ]
    return {"outcome": "resumed", "detail": response.text, "results": results}


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("store")
    parser.add_argument("transcript")
    parser.add_argument("log")
    parser.add_argument("--barrier")
    parser.add_argument("--parties", type=int, default=1)
    parser.add_argument("--release")
    parser.add_argument("--claim-timeout", type=float)
    return parser.parse_args(argv)


if __name__ == "__main__":
    report = anyio.run(main, parse(sys.argv[1:]), backend="asyncio")
    print(json.dumps(report), flush=True)
