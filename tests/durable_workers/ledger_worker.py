"""One process using the effects ledger (run by tests/test_durable_ledger.py).

    python ledger_worker.py LEDGER RUN_ID CALL_ID EFFECTS [--barrier DIR --parties N] [--die]

LEDGER is `sqlite:PATH` or `postgres:TABLE_PREFIX` (the DSN comes from
ADVISORCHAIN_TEST_POSTGRES_DSN). The worker runs one call of a tool with effects through
`run_once`: the tool appends one line `<pid>` to the file EFFECTS (O_APPEND, fsync), then
answers `"sent by <pid>"`. With `--die` it SIGKILLs its own process right after the effect,
before the ledger records the result. With `--barrier`, the worker waits until `--parties`
workers are ready before claiming, so their claims race.

It prints one JSON line `{"outcome": ..., "content": ...}` (the result the call answered).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from pathlib import Path

import anyio

from advisorchain.core.invocation import ToolResult
from advisorchain.durable.ledger import (
    EffectLedger,
    PostgresLedger,
    SQLiteLedger,
    call_fingerprint,
    run_once,
)


def open_ledger(spec: str) -> EffectLedger:
    kind, _, where = spec.partition(":")
    if kind == "sqlite":
        return SQLiteLedger(where)
    return PostgresLedger(os.environ["ADVISORCHAIN_TEST_POSTGRES_DSN"], table_prefix=where)


def wait_for(barrier: Path, parties: int) -> None:
    (barrier / str(os.getpid())).touch()
    deadline = time.monotonic() + 60
    while len(list(barrier.iterdir())) < parties:
        if time.monotonic() > deadline:
            raise TimeoutError("the other workers never came")
        time.sleep(0.005)


async def main(args: argparse.Namespace) -> None:
    ledger = open_ledger(args.ledger)

    async def send() -> ToolResult:
        fd = os.open(args.effects, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        try:
            os.write(fd, f"{os.getpid()}\n".encode())
            os.fsync(fd)
        finally:
            os.close(fd)
        if args.die:
            os.kill(os.getpid(), signal.SIGKILL)
        return ToolResult(content=f"sent by {os.getpid()}")

    if args.barrier:
        wait_for(Path(args.barrier), args.parties)
    fingerprint = call_fingerprint("send", '{"to": "bob"}')
    result = await run_once(ledger, args.run_id, args.call_id, fingerprint, send)
    await ledger.aclose()
    print(json.dumps({"outcome": result.outcome, "content": result.text}))


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("ledger")
    parser.add_argument("run_id")
    parser.add_argument("call_id")
    parser.add_argument("effects")
    parser.add_argument("--barrier")
    parser.add_argument("--parties", type=int, default=1)
    parser.add_argument("--die", action="store_true")
    anyio.run(main, parser.parse_args(), backend="asyncio")
    sys.exit(0)
