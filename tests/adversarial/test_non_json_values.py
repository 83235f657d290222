"""Values that are not JSON wherever JSON is parsed or fingerprinted. A model can write
`NaN`, `Infinity`, `-Infinity`, `1e999` or a 400-digit integer in a tool call's arguments,
and Python's `json` reads them all; an approver or a tool can hand back dates, `Decimal`s,
bytes and sets. Each must be treated the same by every provider (on `call` and `stream`)
and every store: the same tool result, the same fingerprint, the same typed error, and a
next request that can still be sent."""

from __future__ import annotations

import datetime
import decimal
import json
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from advisorchain import AdvisorChainError, Chain, ToolCall, ToolCallingAdvisor, tool
from advisorchain.advisors import InMemoryApprovalStore
from advisorchain.advisors.approval.postgres_store import PostgresApprovalStore
from advisorchain.advisors.approval.sqlite_store import SQLiteApprovalStore
from advisorchain.advisors.approval.types import (
    ApprovalCall,
    Approve,
    PendingCall,
    PendingRecord,
    arguments_fingerprint,
)

from .support import dump_findings
from postgres_support import drop_approval_tables
from provider_cases import CASES, Answer
from provider_support import HTTPX_ABANDONED_GENERATORS, Recorder, sse_response

pytestmark = HTTPX_ABANDONED_GENERATORS

NOT_JSON_NUMBERS = {
    "NaN": "NaN",
    "Infinity": "Infinity",
    "-Infinity": "-Infinity",
    "1e999": "1e999",
    "400 digits": "1" + "0" * 400,
}
"""What Python's `json` reads although JSON has no such number (or no float holds it)."""


@tool
def scale(x: float) -> str:
    """Scale a number."""
    return f"scaled {x!r}"


async def _turn(case: Any, arguments: str, streamed: bool) -> str:
    """The tool result the provider's next request carries, or what went wrong."""
    import httpx

    call = ToolCall(id="call_1", name="scale", arguments=arguments)
    first = Answer(calls=(call,))
    second = Answer(text="ok")
    if streamed:
        replies = [sse_response(case.stream(first)), sse_response(case.stream(second))]
    else:
        replies = [
            httpx.Response(200, json=None, content=json.dumps(case.reply(a)).encode())
            for a in (first, second)
        ]
    recorder = Recorder(*replies)
    chain = Chain([ToolCallingAdvisor()], model=case.model(recorder.client(), "k"), tools=[scale])
    try:
        if streamed:
            [e async for e in chain.stream("go")]
        else:
            await chain.call("go")
    except AdvisorChainError as exc:
        return f"typed {type(exc).__name__}"
    except Exception as exc:  # noqa: BLE001 - what the suite looks for
        return f"raw {type(exc).__name__}"
    body = recorder.bodies[1]
    if case.name == "gemini":  # an error result is `response.error` there
        [response] = [
            p["functionResponse"]["response"]
            for c in body["contents"]
            for p in c["parts"]
            if "functionResponse" in p
        ]
        return _kind(str(response.get("output", response.get("error"))))
    [result] = case.tool_results(body)
    return _kind(result[1])


def _kind(result: str) -> str:
    """An error result by its kind (the detail in brackets quotes the number as each API
    wrote it: `1e999`, or `Infinity` where the body was read as an object first)."""
    return result.split(" (")[0] if result.startswith("Error:") else result


@pytest.mark.anyio
async def test_non_json_numbers_in_tool_arguments_are_read_alike_by_every_provider() -> None:
    outcomes: dict[str, dict[str, str]] = {}
    for name, number in NOT_JSON_NUMBERS.items():
        arguments = f'{{"x": {number}}}'
        for case in CASES:
            for streamed in (False, True):
                where = f"{case.name} {'stream' if streamed else 'call'}"
                outcomes.setdefault(name, {})[where] = await _turn(case, arguments, streamed)
    found: dict[str, str] = {}
    for name, by_path in outcomes.items():
        if len(set(by_path.values())) != 1 or any(
            o.startswith(("raw", "typed")) for o in by_path.values()
        ):
            found[name] = json.dumps(by_path)[:600]
    dump_findings("non-JSON numbers in tool arguments", found, len(NOT_JSON_NUMBERS) * 8)
    assert found == {}, found


# --- approval stores ----------------------------------------------------------------------------

NOT_JSON_VALUES: dict[str, Any] = {
    "nan": float("nan"),
    "infinity": float("inf"),
    "date": datetime.date(2026, 12, 7),
    "datetime": datetime.datetime(2026, 12, 7, 3, 4, 5, tzinfo=datetime.UTC),
    "decimal": decimal.Decimal("1.10"),
    "bytes": b"\x00\xff",
    "set": {"b", "a", "c"},
    "tuple": (1, 2),
    "uuid": uuid.UUID(int=7),
    "big int": 10**40,
}


def _record(approval_id: str, value: Any) -> PendingRecord:
    call = ApprovalCall(id="c1", name="transfer", arguments={"v": value}, details={"v": value})
    return PendingRecord(
        id=approval_id,
        status="pending",
        conversation_id="conv",
        created_at=1.0,
        calls=(PendingCall(call=call),),
    )


async def _store_outcomes(store: Any) -> dict[str, str]:
    """For each value: whether save, get, a claim with the value as edited arguments, and
    the audit read back give the same fingerprint as the value had when it was asked."""
    outcomes: dict[str, str] = {}
    for name, value in NOT_JSON_VALUES.items():
        approval_id = f"a{uuid.uuid4().hex[:8]}"
        try:
            record = _record(approval_id, value)
            await store.save(record)
            loaded = await store.get(approval_id)
            assert loaded is not None
            same = loaded.calls[0].call.fingerprint == arguments_fingerprint({"v": value})
            claimed = await store.claim(approval_id, "t", {"c1": Approve({"v": value})}, [])
            decision = claimed.calls[0].decision
            assert isinstance(decision, Approve) and decision.arguments is not None
            edited = arguments_fingerprint(decision.arguments) == arguments_fingerprint(
                {"v": value}
            )
            outcomes[name] = f"fingerprint kept: {same}, edited kept: {edited}"
        except AdvisorChainError as exc:
            outcomes[name] = f"typed {type(exc).__name__}"
        except Exception as exc:  # noqa: BLE001 - what the suite looks for
            outcomes[name] = f"raw {type(exc).__name__}"
    return outcomes


StoreMaker = Callable[[], Any]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def sql_stores(
    tmp_path: Path, request: pytest.FixtureRequest
) -> AsyncIterator[dict[str, Any]]:
    stores: dict[str, Any] = {
        "memory": InMemoryApprovalStore(),
        "sqlite": SQLiteApprovalStore(tmp_path / "a.db"),
    }
    dsn: str | None = None
    prefix = f"t{uuid.uuid4().hex[:10]}_"
    try:
        dsn = request.getfixturevalue("postgres_dsn")
    except pytest.skip.Exception:
        dsn = None
    if dsn is not None:
        stores["postgres"] = PostgresApprovalStore(dsn, table_prefix=prefix)
    try:
        yield stores
    finally:
        for store in stores.values():
            close = getattr(store, "aclose", None)
            if close is not None:
                await close()
        if dsn is not None:
            await anyio.to_thread.run_sync(drop_approval_tables, dsn, prefix)


@pytest.mark.anyio
async def test_every_approval_store_keeps_non_json_values_alike(sql_stores: dict[str, Any]) -> None:
    by_store = {name: await _store_outcomes(store) for name, store in sql_stores.items()}
    found: dict[str, str] = {}
    for value in NOT_JSON_VALUES:
        seen = {name: outcomes[value] for name, outcomes in by_store.items()}
        if len(set(seen.values())) != 1 or any(o.startswith("raw") for o in seen.values()):
            found[value] = json.dumps(seen)
    dump_findings("non-JSON values in approval stores", found, len(NOT_JSON_VALUES) * len(by_store))
    assert found == {}, found
