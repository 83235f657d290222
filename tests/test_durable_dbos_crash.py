"""Effects once on DBOS, proven by killing workers (issue 33, item 5).

Each test starts a real worker process (tests/durable_workers/dbos_worker.py) running the
bank chain's three-round turn with a deferred approval, SIGKILLs it at one step, starts a
new worker with the same executor id, which recovers the turn, and checks: the turn
finishes; `transfer` (a tool with effects, writing a row) took effect at most once; the
model read `unknown` where the effect cannot be known (killed inside the tool, or after
it returned and before the ledger recorded it); otherwise the final transcript equals
that of a run nobody killed. The approval comes from this process, through
`DBOSTurnClient`, at whatever point the turn waits.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest

pytest.importorskip("dbos")

from advisorchain.core.deferred import Approve  # noqa: E402
from advisorchain.core.events import AnswerDiscarded, ResponseCompleted, TextDelta  # noqa: E402
from advisorchain.core.messages import dump_messages  # noqa: E402
from advisorchain.durable.dbos import DBOSTurnClient  # noqa: E402
from advisorchain.durable.steps import UNKNOWN_OUTCOME  # noqa: E402
from advisorchain.durable.steps import response_from_json as load_response  # noqa: E402

from postgres_support import drop_tables, require_postgres_dsn  # noqa: E402

WORKERS = Path(__file__).parent / "durable_workers"
WORKER = WORKERS / "dbos_worker.py"

from durable_bank import transfers  # noqa: E402

DEADLINE = 120.0
"""Seconds a worker may take to get somewhere: a liveness bound, not a timing."""


@dataclass
class Site:
    """Where one test's databases live."""

    system_db: str
    ledger: str
    env: dict[str, str]

    def client(self) -> DBOSTurnClient:
        return DBOSTurnClient(self.system_db, name="bank")


@pytest.fixture(params=["sqlite", "postgres"])
def site(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Site]:
    env = os.environ.copy()
    env["BANK_MODEL_LOG"] = str(tmp_path / "model.log")
    if request.param == "sqlite":
        env["BANK_EFFECTS"] = str(tmp_path / "bank.db")
        os.environ["BANK_EFFECTS"] = env["BANK_EFFECTS"]
        yield Site(f"sqlite:///{tmp_path / 'dbos.sqlite'}", f"sqlite:{tmp_path / 'l.db'}", env)
        return
    dsn = require_postgres_dsn()
    tag = uuid.uuid4().hex[:10]
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as connection:
        connection.execute(f"CREATE DATABASE dbos_{tag}")
    system_db = dsn.rsplit("/", 1)[0] + f"/dbos_{tag}"
    env["BANK_EFFECTS"] = f"postgres:bank_{tag}"
    os.environ["BANK_EFFECTS"] = env["BANK_EFFECTS"]
    yield Site(system_db, f"postgres:l{tag}_", env)
    drop_tables(dsn, f"bank_{tag}", f"l{tag}_effects")
    with psycopg.connect(dsn, autocommit=True) as connection:
        connection.execute(f"DROP DATABASE IF EXISTS dbos_{tag} WITH (FORCE)")


def worker(site: Site, *args: str, kill_at: str | None = None) -> subprocess.Popen[str]:
    env = dict(site.env)
    if kill_at:
        env["BANK_KILL_AT"] = kill_at
    process = subprocess.Popen(
        [sys.executable, str(WORKER), site.system_db, site.ledger, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert process.stdout is not None
    line = process.stdout.readline()  # launched: the system database exists
    if line.strip() != "ready":
        process.kill()
        _, err = process.communicate()
        raise AssertionError(f"the worker did not start: {line!r} {err[-3000:]}")
    return process


def finished(process: subprocess.Popen[str]) -> dict[str, Any]:
    out, err = process.communicate(timeout=DEADLINE)
    assert process.returncode == 0, err[-3000:]
    turns: dict[str, Any] = json.loads(out.strip().splitlines()[-1])["turns"]
    return turns


def killed(process: subprocess.Popen[str]) -> None:
    _, err = process.communicate(timeout=DEADLINE)
    assert process.returncode == -signal.SIGKILL, err[-3000:]


async def approve_when_waiting(site: Site, turn: str) -> None:
    client = site.client()
    try:
        waiting = await client.waiting(turn, wait_seconds=DEADLINE)
        assert waiting is not None and [c.call.id for c in waiting.calls] == ["c2"]
        await client.decide(turn, {"c2": Approve(by="test")}, shown=waiting.calls)
    finally:
        client.close()


def approve(site: Site, turn: str) -> None:
    anyio.run(approve_when_waiting, site, turn, backend="asyncio")


def transcript(payload: dict[str, Any]) -> bytes:
    """The turn's messages as JSON, the approval's id (random in every run) left out."""
    text = dump_messages(load_response(payload).messages)
    return re.sub(rb"approval_[0-9a-f]{32}", b"approval_<id>", text)


def run_uncrashed(site: Site, turn: str, *extra: str) -> dict[str, Any]:
    process = worker(site, "--start", turn, "--wait", turn, *extra)
    approve(site, turn)
    result: dict[str, Any] = finished(process)[turn]
    return result


BEFORE_APPROVAL = ["before-model-1", "after-model-1", "before-model-2", "after-model-2"]
AFTER_APPROVAL = ["in-tool", "after-tool", "before-model-3", "after-model-3"]
UNKNOWABLE = {"in-tool", "after-tool"}


@pytest.mark.parametrize("kill_at", [*BEFORE_APPROVAL, "waiting", *AFTER_APPROVAL])
def test_a_killed_worker_s_turn_finishes_on_a_new_one(site: Site, kill_at: str) -> None:
    baseline = run_uncrashed(site, "baseline")
    assert transfers() == 1
    turn = f"turn-{kill_at}"
    first = worker(site, "--start", turn, "--wait", turn, kill_at=kill_at)
    if kill_at in AFTER_APPROVAL:
        approve(site, turn)
    if kill_at == "waiting":
        anyio.run(_wait_until_waiting, site, turn, backend="asyncio")
        first.send_signal(signal.SIGKILL)
    killed(first)
    second = worker(site, "--wait", turn)
    if kill_at not in AFTER_APPROVAL:
        approve(site, turn)
    result = finished(second)[turn]
    assert transfers() == 2  # the baseline's and this turn's: once each
    response = load_response(result)
    assert response.finish_reason == "stop"
    sent = [m for m in response.messages if m.role == "tool"][-1]
    if kill_at in UNKNOWABLE:
        assert sent.text == UNKNOWN_OUTCOME
        assert response.message.text == f"Done: {UNKNOWN_OUTCOME}"
    else:
        assert sent.text == "sent 5 to bob"
        assert transcript(result) == transcript(baseline)


async def _wait_until_waiting(site: Site, turn: str) -> None:
    client = site.client()
    try:
        assert await client.waiting(turn, wait_seconds=DEADLINE) is not None
    finally:
        client.close()


def test_a_stream_marks_the_retried_model_step(site: Site) -> None:
    """Killed inside the last model step after its deltas went out: the reader is told to
    drop them (`AnswerDiscarded`) before the retried step's text."""
    turn = "streamed"
    first = worker(site, "--start", turn, "--stream", "--wait", turn, kill_at="after-model-3")
    approve(site, turn)
    killed(first)
    result = finished(worker(site, "--wait", turn))[turn]
    events = anyio.run(_read_all, site, turn, 0, backend="asyncio")
    kinds = [type(e).__name__ for _, e in events]
    discarded = kinds.index("AnswerDiscarded")
    text_before = "".join(e.text for _, e in events[:discarded] if isinstance(e, TextDelta))
    text_after = "".join(e.text for _, e in events[discarded:] if isinstance(e, TextDelta))
    assert text_before.endswith("Done: sent 5 to bob")
    assert text_after == "Done: sent 5 to bob"
    assert isinstance(events[-1][1], ResponseCompleted)
    assert load_response(result).message.text == "Done: sent 5 to bob"
    assert sum(isinstance(e, AnswerDiscarded) for _, e in events) == 1
    # a reader that reconnects from an offset gets the rest, and only the rest
    middle = len(events) // 2
    offset = events[middle][0]
    again = anyio.run(_read_all, site, turn, offset, backend="asyncio")
    assert [o for o, _ in again] == [o for o, _ in events[middle:]]


async def _read_all(site: Site, turn: str, offset: int) -> list[tuple[int, Any]]:
    client = site.client()
    try:
        return [item async for item in client.events(turn, offset=offset)]
    finally:
        client.close()


def test_two_workers_run_each_turn_once(site: Site, tmp_path: Path) -> None:
    if site.system_db.startswith("sqlite"):
        pytest.skip("several workers share a PostgreSQL system database; SQLite is one process")
    turns = [f"look-{i}" for i in range(6)]
    workers = [worker(site, "--executor", f"w{i}", "--wait", *turns) for i in range(2)]
    anyio.run(_enqueue, site, turns, backend="asyncio")
    results = [finished(w) for w in workers]
    for turn in turns:
        answers = {transcript(r[turn]) for r in results}
        assert len(answers) == 1  # both read the one run's result
        assert load_response(results[0][turn]).message.text == "You have: me has 10"
    calls = Path(site.env["BANK_MODEL_LOG"]).read_text().split("\n")
    rounds = [tuple(line.split()[:2]) for line in calls if line]
    assert sorted(rounds) == sorted((t, r) for t in turns for r in ("1", "2"))


async def _enqueue(site: Site, turns: list[str]) -> None:
    client = site.client()
    try:
        for turn in turns:
            await client.start("look at my balance", turn_id=turn)
    finally:
        client.close()
