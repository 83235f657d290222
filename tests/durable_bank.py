"""The bank chain of the DBOS tests: a scripted three-round turn with a deferred approval.

Round 1 looks up a balance (`balance`: read-only), round 2 asks to transfer (`transfer`:
has effects, needs approval, so the turn defers), round 3 answers with the transfer's
result. A prompt with "look" stops after the look-up (two rounds, no approval).

The script is a function of the request (what the turn so far holds), so a worker that
recovers a turn answers as the first one would have. Test hooks, from the environment:

- `BANK_EFFECTS`: a SQLite file, or `postgres:TABLE` (DSN from
  ADVISORCHAIN_TEST_POSTGRES_DSN), where `transfer` inserts one row per run: its effect.
- `BANK_MODEL_LOG`: a file the model appends `<turn> <round> <pid>` to on each call.
- `BANK_KILL_AT`: the worker SIGKILLs itself at that point: `before-model-N`,
  `after-model-N` (the model answered round N, inside its step, before DBOS records it),
  `in-tool` (the transfer's row is written, the tool has not returned), `after-tool`
  (the tool returned, before the ledger records its result).
"""

from __future__ import annotations

import os
import signal
import sqlite3
from collections.abc import AsyncIterator

from advisorchain import AssistantMessage, Chain, ToolCall, ToolCallingAdvisor, tool
from advisorchain.advisors import ApprovalAdvisor, DeferredApprover, InMemoryApprovalStore
from advisorchain.core.events import StreamEvent
from advisorchain.core.model import WrapperModel
from advisorchain.core.request import ChatRequest
from advisorchain.core.response import ChatResponse
from advisorchain.durable.ledger import Claim, EffectLedger, StoredResult
from advisorchain.providers import ScriptedChatModel

KILL_AT = "BANK_KILL_AT"


def kill_if(point: str) -> None:
    """SIGKILL this process if the test asked for it at `point`."""
    if os.environ.get(KILL_AT) == point:
        os.kill(os.getpid(), signal.SIGKILL)


def _effects_connection() -> tuple[object, str]:
    where = os.environ["BANK_EFFECTS"]
    if where.startswith("postgres:"):
        import psycopg

        connection = psycopg.connect(os.environ["ADVISORCHAIN_TEST_POSTGRES_DSN"], autocommit=True)
        return connection, where.removeprefix("postgres:")
    return sqlite3.connect(where, isolation_level=None, timeout=30), "transfers"


def record_transfer(to: str, amount: int) -> None:
    """The transfer's effect: one row."""
    connection, table = _effects_connection()
    try:
        connection.execute(  # type: ignore[attr-defined]
            f"CREATE TABLE IF NOT EXISTS {table} (recipient TEXT, amount INTEGER, pid INTEGER)"
        )
        marker = "%s" if not isinstance(connection, sqlite3.Connection) else "?"
        connection.execute(  # type: ignore[attr-defined]
            f"INSERT INTO {table} VALUES ({marker}, {marker}, {marker})", (to, amount, os.getpid())
        )
    finally:
        connection.close()  # type: ignore[attr-defined]


def transfers() -> int:
    """How many times `transfer` took effect."""
    connection, table = _effects_connection()
    try:
        try:
            row = connection.execute(f"SELECT COUNT(*) FROM {table}").fetchone()  # type: ignore[attr-defined]
        except Exception:
            return 0
        return int(row[0])
    finally:
        connection.close()  # type: ignore[attr-defined]


@tool(read_only=True)
def balance(who: str) -> str:
    """The balance of an account."""
    return f"{who} has 10"


@tool(requires_approval=True)
def transfer(to: str, amount: int) -> str:
    """Send money."""
    record_transfer(to, amount)
    kill_if("in-tool")
    return f"sent {amount} to {to}"


def script(request: ChatRequest) -> AssistantMessage:
    results = [m for m in request.messages if m.role == "tool"]
    round = len(results) + 1
    log = os.environ.get("BANK_MODEL_LOG")
    if log:
        from dbos import DBOS

        with open(log, "a") as file:
            file.write(f"{DBOS.workflow_id} {round} {os.getpid()}\n")
    kill_if(f"before-model-{round}")
    first = next(m for m in request.messages if m.role == "user")
    if round == 1:
        call = ToolCall(id="c1", name="balance", arguments='{"who": "me"}')
        return AssistantMessage(content="Let me look.", tool_calls=(call,))
    if "look" in first.text:
        return AssistantMessage(content=f"You have: {results[-1].text}")
    if round == 2:
        call = ToolCall(id="c2", name="transfer", arguments='{"to": "bob", "amount": 5}')
        return AssistantMessage(content="Sending.", tool_calls=(call,))
    return AssistantMessage(content=f"Done: {results[-1].text}")


class KillAfterModel(WrapperModel):
    """Kills the worker after the model answered a round, inside the model step."""

    async def call(self, request: ChatRequest) -> ChatResponse:
        response = await self.inner.call(request)
        kill_if(f"after-model-{_round(request)}")
        return response

    async def stream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        async for event in self.inner.stream(request):
            yield event
        kill_if(f"after-model-{_round(request)}")


def _round(request: ChatRequest) -> int:
    return len([m for m in request.messages if m.role == "tool"]) + 1


class KillBeforeRecord:
    """A ledger that kills the worker before recording a result (`after-tool`)."""

    def __init__(self, inner: EffectLedger) -> None:
        self.inner = inner

    async def claim(self, run_id: str, call_id: str, fingerprint: str) -> Claim:
        return await self.inner.claim(run_id, call_id, fingerprint)

    async def complete(self, run_id: str, call_id: str, result: StoredResult) -> StoredResult:
        kill_if("after-tool")
        return await self.inner.complete(run_id, call_id, result)

    async def release(self, run_id: str, call_id: str) -> None:
        await self.inner.release(run_id, call_id)

    async def aclose(self) -> None:
        await self.inner.aclose()


def bank_chain(*, chunk_size: int = 4) -> Chain:
    """The chain every runner runs, in-process, on DBOS (and on Temporal)."""
    return Chain(
        [ApprovalAdvisor(DeferredApprover(), store=InMemoryApprovalStore()), ToolCallingAdvisor()],
        model=KillAfterModel(ScriptedChatModel(script, chunk_size=chunk_size)),
        tools=[balance, transfer],
    )
