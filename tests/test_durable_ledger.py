"""The effects-once ledger (`durable.ledger`): in memory, SQLite and PostgreSQL.

A tool with effects runs at most once per `(run_id, call_id)`: a retry reads the recorded
result, a claim that was never completed answers `unknown`, and of racing claims (tasks,
processes) exactly one runs the tool. The process tests run tests/durable_workers/
ledger_worker.py, whose tool appends a line to a file before answering, so the test counts
effects across processes; one worker SIGKILLs itself after the effect.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import anyio
import pytest

from advisorchain import tool
from advisorchain.advisors.approval.types import StoredResult
from advisorchain.core.invocation import ToolResult
from advisorchain.core.parts import ImagePart, TextPart
from advisorchain.durable.ledger import (
    UNKNOWN_OUTCOME,
    Claimed,
    Done,
    EffectLedger,
    LedgerConflict,
    LedgerError,
    MemoryLedger,
    PostgresLedger,
    SQLiteLedger,
    Unknown,
    call_fingerprint,
    needs_ledger,
    run_once,
)

from postgres_support import drop_tables, require_postgres_dsn

WORKER = Path(__file__).parent / "durable_workers" / "ledger_worker.py"
FP = call_fingerprint("send", '{"to": "bob"}')
OK = StoredResult(content="sent", outcome="ok")


@pytest.fixture(params=["memory", "sqlite", "postgres"])
async def ledger(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[EffectLedger]:
    if request.param == "memory":
        yield MemoryLedger()
        return
    if request.param == "sqlite":
        found: EffectLedger = SQLiteLedger(tmp_path / "effects.db")
        yield found
        await found.aclose()
        return
    dsn = require_postgres_dsn()
    prefix = f"l{uuid.uuid4().hex[:10]}_"
    found = PostgresLedger(dsn, table_prefix=prefix)
    yield found
    await found.aclose()
    drop_tables(dsn, prefix + "effects")


@pytest.mark.anyio
async def test_claim_then_complete_then_done(ledger: EffectLedger) -> None:
    assert await ledger.claim("run", "c1", FP) == Claimed()
    assert await ledger.claim("run", "c1", FP) == Unknown()  # claimed, never completed
    assert await ledger.complete("run", "c1", OK) == OK
    assert await ledger.claim("run", "c1", FP) == Done(OK)
    # another call, another run: their own claims
    assert await ledger.claim("run", "c2", FP) == Claimed()
    assert await ledger.claim("other", "c1", FP) == Claimed()


@pytest.mark.anyio
async def test_first_completion_wins(ledger: EffectLedger) -> None:
    await ledger.claim("run", "c1", FP)
    assert await ledger.complete("run", "c1", OK) == OK
    late = StoredResult(content="late", outcome="error")
    assert await ledger.complete("run", "c1", late) == OK
    assert await ledger.claim("run", "c1", FP) == Done(OK)


@pytest.mark.anyio
async def test_other_arguments_under_a_used_id_conflict(ledger: EffectLedger) -> None:
    await ledger.claim("run", "c1", FP)
    other = call_fingerprint("send", '{"to": "mallory"}')
    with pytest.raises(LedgerConflict):
        await ledger.claim("run", "c1", other)
    await ledger.complete("run", "c1", OK)
    with pytest.raises(LedgerConflict):
        await ledger.claim("run", "c1", other)


@pytest.mark.anyio
async def test_completing_an_unclaimed_call_fails(ledger: EffectLedger) -> None:
    with pytest.raises(LedgerError, match="never claimed"):
        await ledger.complete("run", "c9", OK)


@pytest.mark.anyio
async def test_release_forgets_a_claim_but_not_a_result(ledger: EffectLedger) -> None:
    await ledger.claim("run", "c1", FP)
    await ledger.release("run", "c1")
    assert await ledger.claim("run", "c1", FP) == Claimed()
    await ledger.complete("run", "c1", OK)
    await ledger.release("run", "c1")
    assert await ledger.claim("run", "c1", FP) == Done(OK)


@pytest.mark.anyio
@pytest.mark.parametrize("bad", ["", "a\x00b", "a\ud800"])
async def test_ids_a_database_cannot_hold_are_refused(ledger: EffectLedger, bad: str) -> None:
    with pytest.raises(LedgerError):
        await ledger.claim(bad, "c1", FP)
    with pytest.raises(LedgerError):
        await ledger.claim("run", bad, FP)
    with pytest.raises(LedgerError):
        await ledger.complete("run", bad, OK)


@pytest.mark.anyio
async def test_parts_results_round_trip(ledger: EffectLedger) -> None:
    parts = (TextPart(text="chart"), ImagePart(data=b"\x89PNG", media_type="image/png"))
    result = StoredResult(content=parts, outcome="ok")
    await ledger.claim("run", "c1", FP)
    await ledger.complete("run", "c1", result)
    assert await ledger.claim("run", "c1", FP) == Done(result)


@pytest.mark.anyio
async def test_concurrent_claims_have_one_winner(ledger: EffectLedger) -> None:
    answers: list[object] = []

    async def claim() -> None:
        answers.append(await ledger.claim("run", "c1", FP))

    async with anyio.create_task_group() as tg:
        for _ in range(8):
            tg.start_soon(claim)
    assert answers.count(Claimed()) == 1
    assert answers.count(Unknown()) == 7


# -- run_once ----------------------------------------------------------------------------


class Sender:
    """A tool with effects: counts its runs."""

    def __init__(self, result: ToolResult | None = None, fail: bool = False) -> None:
        self.runs = 0
        self.result = result or ToolResult(content="sent", value={"id": 7})
        self.fail = fail

    async def __call__(self) -> ToolResult:
        self.runs += 1
        if self.fail:
            raise ConnectionError("the worker lost its connection mid-call")
        return self.result


@pytest.mark.anyio
async def test_run_once_runs_then_answers_from_the_ledger(ledger: EffectLedger) -> None:
    send = Sender()
    first = await run_once(ledger, "run", "c1", FP, send)
    assert first is send.result  # the tool's own result, `value` and all
    again = await run_once(ledger, "run", "c1", FP, send)
    assert (again.content, again.outcome) == ("sent", "ok")
    assert send.runs == 1


@pytest.mark.anyio
async def test_run_once_after_a_failure_mid_call_answers_unknown(ledger: EffectLedger) -> None:
    failing = Sender(fail=True)
    with pytest.raises(ConnectionError):
        await run_once(ledger, "run", "c1", FP, failing)
    send = Sender()
    retried = await run_once(ledger, "run", "c1", FP, send)
    assert (retried.content, retried.outcome) == (UNKNOWN_OUTCOME, "unknown")
    assert retried.is_error
    assert send.runs == 0
    assert await ledger.claim("run", "c1", FP) == Unknown()  # still claimed, no result


@pytest.mark.anyio
async def test_the_owner_s_result_wins_over_a_racer_s_unknown(ledger: EffectLedger) -> None:
    racer = Sender()
    results: list[ToolResult] = []

    async def owner() -> ToolResult:
        # while the owner runs, a racer finds the claim and answers unknown
        results.append(await run_once(ledger, "run", "c1", FP, racer))
        return ToolResult(content="sent")

    first = await run_once(ledger, "run", "c1", FP, owner)
    assert first.text == "sent"
    assert [r.outcome for r in results] == ["unknown"] and racer.runs == 0
    assert await ledger.claim("run", "c1", FP) == Done(StoredResult(content="sent", outcome="ok"))


@pytest.mark.anyio
async def test_run_once_releases_a_deferred_call(ledger: EffectLedger) -> None:
    deferring = Sender(ToolResult.defer("external", {"job": "j1"}))
    result = await run_once(ledger, "run", "c1", FP, deferring)
    assert result.outcome == "deferred"
    assert await ledger.claim("run", "c1", FP) == Claimed()


@pytest.mark.anyio
async def test_run_once_error_results_are_recorded(ledger: EffectLedger) -> None:
    refused = Sender(ToolResult(content="Error: insufficient funds", outcome="error"))
    await run_once(ledger, "run", "c1", FP, refused)
    again = await run_once(ledger, "run", "c1", FP, refused)
    assert (again.text, again.outcome, refused.runs) == ("Error: insufficient funds", "error", 1)


def test_which_tools_need_the_ledger() -> None:
    @tool
    def pay(to: str) -> str:
        """Pay."""
        return to

    @tool(idempotent=True)
    def upsert(key: str) -> str:
        """Upsert."""
        return key

    @tool(read_only=True)
    def look(key: str) -> str:
        """Look."""
        return key

    assert needs_ledger(pay)
    assert not needs_ledger(upsert)
    assert not needs_ledger(look)


def test_fingerprints_bind_tool_and_arguments() -> None:
    assert call_fingerprint("send", '{"a": 1, "b": 2}') == call_fingerprint("send", '{"b":2,"a":1}')
    assert call_fingerprint("send", '{"a": 1}') != call_fingerprint("send", '{"a": 2}')
    assert call_fingerprint("send", '{"a": 1}') != call_fingerprint("sent", '{"a": 1}')
    assert call_fingerprint("send", "{not json") != call_fingerprint("send", "{not json!")


def test_a_bad_table_prefix_is_refused(tmp_path: Path) -> None:
    with pytest.raises(LedgerError, match="table prefix"):
        SQLiteLedger(tmp_path / "x.db", table_prefix="x; DROP TABLE y")


# -- across processes --------------------------------------------------------------------


@dataclass
class Shared:
    spec: str
    effects: Path


@pytest.fixture(params=["sqlite", "postgres"])
def shared(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Shared]:
    effects = tmp_path / "effects.log"
    if request.param == "sqlite":
        yield Shared(f"sqlite:{tmp_path / 'effects.db'}", effects)
        return
    dsn = require_postgres_dsn()
    prefix = f"p{uuid.uuid4().hex[:10]}_"
    yield Shared(f"postgres:{prefix}", effects)
    drop_tables(dsn, prefix + "effects")


def start(shared: Shared, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(WORKER), shared.spec, "run-1", "c1", str(shared.effects), *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=os.environ.copy(),
    )


def answer(process: subprocess.Popen[str]) -> dict[str, str]:
    out, err = process.communicate(timeout=120)
    assert process.returncode == 0, err
    found: dict[str, str] = json.loads(out.strip().splitlines()[-1])
    return found


def effects(shared: Shared) -> list[str]:
    return shared.effects.read_text().split() if shared.effects.exists() else []


def test_racing_processes_run_the_tool_once(shared: Shared, tmp_path: Path) -> None:
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    workers = [start(shared, "--barrier", str(barrier), "--parties", "4") for _ in range(4)]
    answers = [answer(w) for w in workers]
    ran = effects(shared)
    assert len(ran) == 1
    # the others read the winner's recorded result, or `unknown` while it was running
    sent = {"outcome": "ok", "content": f"sent by {ran[0]}"}
    assert sent in answers
    assert all(a in (sent, {"outcome": "unknown", "content": UNKNOWN_OUTCOME}) for a in answers)


def test_a_worker_killed_after_the_effect_leaves_unknown(shared: Shared) -> None:
    killed = start(shared, "--die")
    killed.communicate(timeout=120)
    assert killed.returncode == -9
    assert len(effects(shared)) == 1
    retried = answer(start(shared))
    assert retried == {"outcome": "unknown", "content": UNKNOWN_OUTCOME}
    assert len(effects(shared)) == 1  # not run again
    assert answer(start(shared)) == retried


def test_a_finished_call_is_answered_from_the_ledger_in_a_new_process(shared: Shared) -> None:
    first = answer(start(shared))
    assert first["outcome"] == "ok"
    assert answer(start(shared)) == first
    assert len(effects(shared)) == 1
