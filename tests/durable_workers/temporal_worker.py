"""A Temporal worker process serving the bank chain (tests/durable_bank.py).

    python temporal_worker.py ADDRESS TASK_QUEUE LEDGER_PATH

Runs until killed. Prints `ready` once polling. The bank's hooks (BANK_KILL_AT,
BANK_EFFECTS) come from the environment; TEMPORAL_MODEL_LOG, if set, is a file the worker's
model appends `<pid>` to on each call (to count the model calls of a turn).
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent.parent))  # tests/: durable_bank

from temporalio.client import Client  # noqa: E402
from temporalio.common import RetryPolicy  # noqa: E402

from advisorchain import Chain  # noqa: E402
from advisorchain.core.events import StreamEvent  # noqa: E402
from advisorchain.core.model import WrapperModel  # noqa: E402
from advisorchain.core.request import ChatRequest  # noqa: E402
from advisorchain.core.response import ChatResponse  # noqa: E402
from advisorchain.durable.ledger import SQLiteLedger, StepLedger  # noqa: E402
from advisorchain.durable.temporal import (  # noqa: E402
    DurableOptions,
    create_worker,
    data_converter,
)

from durable_bank import KillBeforeRecord, bank_chain  # noqa: E402


class Counted(WrapperModel):
    """Appends this process's id to TEMPORAL_MODEL_LOG on each model call."""

    def _log(self) -> None:
        log = os.environ.get("TEMPORAL_MODEL_LOG")
        if log:
            with open(log, "a") as file:
                file.write(f"{os.getpid()}\n")

    async def call(self, request: ChatRequest) -> ChatResponse:
        self._log()
        return await self.inner.call(request)

    async def stream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        self._log()
        async for event in self.inner.stream(request):
            yield event


def chain() -> Chain:
    bank = bank_chain()
    return Chain(bank.advisors, model=Counted(bank.model), tools=bank.tools)


OPTIONS = DurableOptions(
    heartbeat_timeout=timedelta(seconds=1),
    retry=RetryPolicy(
        initial_interval=timedelta(milliseconds=100),
        maximum_interval=timedelta(milliseconds=500),
        maximum_attempts=20,
    ),
)


async def main(address: str, queue: str, ledger_path: str) -> None:
    client = await Client.connect(address, data_converter=data_converter())
    ledger = StepLedger(KillBeforeRecord(SQLiteLedger(ledger_path)))
    worker = create_worker(
        client,
        queue,
        chain,
        ledger=ledger,
        options=OPTIONS,
        sticky_queue_schedule_to_start_timeout=timedelta(seconds=1),
    )
    async with worker:
        print("ready", flush=True)
        await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:4]))
