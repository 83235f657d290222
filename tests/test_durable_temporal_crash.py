"""Effects once on Temporal, proven by killing workers: a real worker process is SIGKILLed
at each step of the bank's three-round turn with a deferred approval (before and after a
model call, inside the tool, after the tool and before its completion was recorded, while
the workflow waits for the decision); a new worker finishes the turn. The transfer's row
is written at most once, the model reads `unknown` where it cannot be known, and the
transcript equals the uncrashed run's where nothing was unknown. Two workers on one task
queue run each turn once."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from advisorchain import ChatResponse, Message, ResponseCompleted, UserMessage
from advisorchain.advisors import Approve

from durable_bank import bank_chain, transfers
from temporal_support import temporal_address

if os.environ.get("CI") != "true":
    pytest.importorskip("temporalio")

from temporalio.client import Client  # noqa: E402

from advisorchain.durable.steps import UNKNOWN_OUTCOME  # noqa: E402
from advisorchain.durable.temporal import TemporalConversation, data_converter  # noqa: E402

__all__ = ["temporal_address"]

pytestmark = pytest.mark.anyio
WORKER = Path(__file__).parent / "durable_workers" / "temporal_worker.py"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Workers:
    """Worker processes on one task queue, sharing a ledger and an effects table."""

    def __init__(self, address: str, folder: Path) -> None:
        self.address = address
        self.queue = f"bank-{uuid.uuid4().hex}"
        self.folder = folder
        self.processes: list[subprocess.Popen[bytes]] = []
        self.env = {
            **os.environ,
            "BANK_EFFECTS": str(folder / "effects.db"),
            "TEMPORAL_MODEL_LOG": str(folder / "model.log"),
        }

    def start(self, kill_at: str | None = None) -> subprocess.Popen[bytes]:
        env = dict(self.env)
        env.pop("BANK_KILL_AT", None)
        if kill_at:
            env["BANK_KILL_AT"] = kill_at
        process = subprocess.Popen(
            [sys.executable, str(WORKER), self.address, self.queue, str(self.folder / "ledger.db")],
            env=env,
            stdout=subprocess.PIPE,
        )
        assert process.stdout is not None
        assert process.stdout.readline().strip() == b"ready"
        self.processes.append(process)
        return process

    def model_calls(self) -> int:
        log = self.folder / "model.log"
        return len(log.read_text().splitlines()) if log.exists() else 0

    def stop(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                process.terminate()
        for process in self.processes:
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            if process.stdout is not None:
                process.stdout.close()


@pytest.fixture
def workers(temporal_address: str, tmp_path: Path) -> Iterator[Workers]:
    found = Workers(temporal_address, tmp_path)
    os.environ["BANK_EFFECTS"] = str(tmp_path / "effects.db")  # read by transfers()
    try:
        yield found
    finally:
        found.stop()
        os.environ.pop("BANK_EFFECTS", None)


async def _finish(
    workers: Workers, first: subprocess.Popen[bytes], turn: asyncio.Task[ChatResponse]
) -> ChatResponse:
    """`turn`'s response; when the first worker dies before it ends, a new one takes over."""
    while not turn.done():
        if first.poll() is not None and len(workers.processes) == 1:
            assert first.returncode == -signal.SIGKILL
            workers.start()
        await asyncio.sleep(0.05)
    return turn.result()


def shape(messages: tuple[Message, ...]) -> list[Any]:
    """A transcript without its approval ids (random per run)."""
    return [
        (m.role, m.text, [(c.id, c.name, c.arguments) for c in getattr(m, "tool_calls", ())])
        for m in messages
    ]


async def uncrashed() -> list[Any]:
    chain = bank_chain()
    first = await chain.call("Pay bob 5")
    history = (UserMessage(content="Pay bob 5"), *first.messages)
    second = await chain.call(history, decisions={"c2": Approve()})
    return shape((*history, *second.messages))


KILL_POINTS = [
    "before-model-1",
    "after-model-1",
    "before-model-2",
    "after-model-2",
    "in-tool",
    "after-tool",
    "before-model-3",
    "after-model-3",
    "waiting",
]


async def streamed(conversation: TemporalConversation, *args: Any, **kw: Any) -> ChatResponse:
    """A streamed turn's response (its last event)."""
    events = [event async for event in conversation.stream(*args, **kw)]
    last = events[-1]
    assert isinstance(last, ResponseCompleted)
    return last.response


@pytest.mark.parametrize(
    ("kill_at", "path"),
    [(point, "call") for point in KILL_POINTS]
    + [("after-model-2", "stream"), ("after-tool", "stream")],
)
async def test_a_killed_worker_is_replaced_and_the_transfer_happens_at_most_once(
    kill_at: str, path: str, workers: Workers, temporal_address: str
) -> None:
    os.environ["BANK_EFFECTS"] = str(workers.folder / "effects.db")
    first = workers.start(None if kill_at == "waiting" else kill_at)
    client = await Client.connect(temporal_address, data_converter=data_converter())
    conversation = TemporalConversation(
        client, f"bank-{uuid.uuid4().hex}", task_queue=workers.queue
    )
    await conversation.start()
    run = conversation.call if path == "call" else partial(streamed, conversation)
    deferred = await _finish(workers, first, asyncio.ensure_future(run("Pay bob 5")))
    assert deferred.finish_reason == "deferred" and [d.id for d in deferred.deferred] == ["c2"]
    if kill_at == "waiting":  # the workflow waits for the decision: its worker dies
        first.send_signal(signal.SIGKILL)
        first.wait()
    done = await _finish(workers, first, asyncio.ensure_future(run(decisions={"c2": Approve()})))
    assert first.poll() is not None, "the worker was never killed: the kill point is dead code"
    transcript = await conversation.transcript()
    assert transfers() <= 1
    if kill_at in ("in-tool", "after-tool"):  # claimed, never completed: unknown
        assert transfers() == 1
        assert done.messages[0].text == UNKNOWN_OUTCOME
    else:
        assert transfers() == 1
        assert done.text == "Done: sent 5 to bob"
        assert shape(transcript) == await uncrashed()


async def test_two_workers_on_one_queue_run_each_turn_once(
    workers: Workers, temporal_address: str
) -> None:
    workers.start()
    workers.start()
    client = await Client.connect(temporal_address, data_converter=data_converter())

    async def one(index: int) -> ChatResponse:
        conversation = TemporalConversation(client, f"look-{index}-{uuid.uuid4().hex}",
                                            task_queue=workers.queue)  # fmt: skip
        await conversation.start()
        return await conversation.call("look at my balance")

    responses = await asyncio.gather(*(one(i) for i in range(6)))
    assert all(r.text == "You have: me has 10" for r in responses)
    assert workers.model_calls() == 6 * 2  # two rounds a turn, each model call once
