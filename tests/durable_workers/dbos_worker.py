"""A DBOS worker process running the bank chain (tests/durable_bank.py).

    python dbos_worker.py SYSTEM_DB LEDGER [--start TURN [--prompt TEXT] [--stream]]
                          [--wait TURN ...] [--executor ID]

SYSTEM_DB is DBOS's system database URL (`sqlite:///PATH` or `postgresql://...`); LEDGER
`sqlite:PATH` or `postgres:TABLE_PREFIX` (DSN from ADVISORCHAIN_TEST_POSTGRES_DSN). The
worker launches DBOS with the runner `bank` (recovering the turns its executor left
pending), optionally starts a turn, waits until every `--wait` turn has ended, prints `ready` once
launched, then one JSON line `{"turns": {turn: response payload}}` and exits 0. The hooks of bank.py
(BANK_KILL_AT, ...) come from the environment.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent.parent))  # tests/: durable_bank

from dbos import DBOS  # noqa: E402

from advisorchain.durable.dbos import DBOSRunner  # noqa: E402
from advisorchain.durable.ledger import EffectLedger, PostgresLedger, SQLiteLedger  # noqa: E402
from advisorchain.durable.steps import response_to_json  # noqa: E402

from durable_bank import KillBeforeRecord, bank_chain  # noqa: E402


def open_ledger(spec: str) -> EffectLedger:
    kind, _, where = spec.partition(":")
    if kind == "sqlite":
        return SQLiteLedger(where)
    return PostgresLedger(os.environ["ADVISORCHAIN_TEST_POSTGRES_DSN"], table_prefix=where)


async def main(args: argparse.Namespace) -> None:
    DBOS(
        config={
            "name": "bank",
            "system_database_url": args.system_db,
            "executor_id": args.executor,
            "notification_listener_polling_interval_sec": 0.05,
            "log_level": "WARNING",
        }
    )
    runner = DBOSRunner(
        bank_chain(),
        ledger=KillBeforeRecord(open_ledger(args.ledger)),
        name="bank",
        polling_interval=0.05,
    )
    DBOS.launch()
    await runner.ready()
    print("ready", flush=True)
    if args.start:
        await runner.start(args.prompt, turn_id=args.start, stream=args.stream)
    results = {}
    for turn in args.wait:
        while await DBOS.get_workflow_status_async(turn) is None:  # noqa: ASYNC110 (polls the database)
            await asyncio.sleep(0.05)
        results[turn] = response_to_json(await runner.result(turn))
    print(json.dumps({"turns": results}), flush=True)
    DBOS.destroy()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("system_db")
    parser.add_argument("ledger")
    parser.add_argument("--start")
    parser.add_argument("--prompt", default="Pay bob 5")
    parser.add_argument("--stream", action="store_true")
    parser.add_argument("--wait", nargs="*", default=[])
    parser.add_argument("--executor", default="worker-1")
    asyncio.run(main(parser.parse_args()))
