"""Every row a store reads back is untrusted: another process, a migration, a disk or a
person may have written it. Each stored column of each SQL store (memory and approvals on
SQLite and PostgreSQL, the tool-search caches on `KeyedBlobs`) is overwritten with values
of the wrong shape or type, and every reading operation must then answer with the store's
typed error (`ChatMemoryStoreError`, `InvalidApprovalRecord`, `ApprovalNotFound`...) or,
for a cache, a miss: never a raw `TypeError`, `KeyError`, `ValidationError`,
`JSONDecodeError` or `MemoryError`, and never an allocation sized by the row."""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from advisorchain import AdvisorChainError, AssistantMessage, ToolCall, ToolMessage, UserMessage
from advisorchain.advisors import (
    PostgresChatMemoryStore,
    SQLiteChatMemoryStore,
)
from advisorchain.advisors.approval.postgres_store import PostgresApprovalStore
from advisorchain.advisors.approval.sqlite_store import SQLiteApprovalStore
from advisorchain.advisors.approval.types import (
    ApprovalCall,
    Approve,
    AuditRecord,
    PendingCall,
    PendingRecord,
    RoundCall,
    StandingRule,
    StoredResult,
    arguments_fingerprint,
)
from advisorchain.advisors.tool_search.embedding import EmbeddingCache
from advisorchain.advisors.tool_search.examples import ExampleCache

from .support import dump_findings
from postgres_support import drop_approval_tables, drop_tables


@pytest.fixture
def anyio_backend() -> str:
    """Stores run their drivers in worker threads: one event loop is enough here."""
    return "asyncio"


DEEP = "[" * 100_000 + "]" * 100_000
TEXT_VALUES: dict[str, Any] = {
    "not json": "{not json",
    "empty": "",
    "null json": "null",
    "number json": "1e999",
    "list json": "[1, 2]",
    "empty object": "{}",
    "wrong shape": '{"role": "user", "content": 5}',
    "deep json": DEEP,
    "lone surrogate escape": '"\\udcff"',
}
"""What a TEXT column may hold that its writer never wrote (JSON columns, names, states)."""

SQLITE_ONLY: dict[str, Any] = {
    "integer": 5,
    "huge integer": 2**62,
    "real": 1.5e300,
    "blob": b"\x00\xff\xfe",
}
"""What SQLite's dynamic typing lets any column hold."""

NUMBER_VALUES_SQLITE: dict[str, Any] = {
    "text": "abc",
    "blob": b"\x01",
    "huge": 2**63 - 1,
    "negative": -(2**63),
    "real": 1e308,
}
NUMBER_VALUES_POSTGRES: dict[str, Any] = {"huge": 2**63 - 1, "negative": -(2**63)}
REAL_VALUES_POSTGRES: dict[str, Any] = {"nan": float("nan"), "infinity": float("inf")}


# --- chat memory -----------------------------------------------------------------------------

TURN = (
    UserMessage(content="hi"),
    AssistantMessage(tool_calls=(ToolCall(id="c1", name="look", arguments='{"q": 1}'),)),
    ToolMessage(tool_call_id="c1", name="look", content="found"),
    AssistantMessage(content="done"),
)


async def _memory_readers(store: Any) -> dict[str, Callable[[], Awaitable[Any]]]:
    return {
        "load": lambda: store.load("conv"),
        "load_tail": lambda: store.load_tail("conv", 2),
        "append": lambda: store.append("conv", [UserMessage(content="more")]),
        "clear": lambda: store.clear("conv"),
    }


MEMORY_COLUMNS = {"conversation_id": "text", "seq": "number", "role": "text", "message": "text"}


async def _corrupt_memory(
    store: Any, write: Callable[[str, Any], None], values_for: Callable[[str], dict[str, Any]]
) -> dict[str, str]:
    raw: dict[str, str] = {}
    cases = 0
    for column, kind in MEMORY_COLUMNS.items():
        for name, value in values_for(kind).items():
            await store.clear("conv")
            await store.append("conv", TURN)
            try:
                write(column, value)
            except Exception:  # the column's own type refuses it: not a reachable row
                continue
            cases += 1
            for reader, run in (await _memory_readers(store)).items():
                try:
                    await run()
                except AdvisorChainError:
                    pass
                except Exception as exc:
                    raw[f"{column}={name}: {reader}"] = type(exc).__name__
    dump_findings(f"memory {type(store).__name__}", raw, cases)
    return raw


@pytest.mark.anyio
async def test_a_corrupt_sqlite_memory_row_is_a_typed_error(tmp_path: Path) -> None:
    path = tmp_path / "memory.db"
    async with SQLiteChatMemoryStore(path) as store:
        await store.append("warm", [UserMessage(content="x")])

        def write(column: str, value: Any) -> None:
            with sqlite3.connect(path) as db:
                db.execute(
                    f"UPDATE advisorchain_memory SET {column} = ? "
                    "WHERE conversation_id = 'conv' AND seq = 1",
                    (value,),
                )

        def values_for(kind: str) -> dict[str, Any]:
            if kind == "number":
                return NUMBER_VALUES_SQLITE
            return {**TEXT_VALUES, **SQLITE_ONLY}

        raw = await _corrupt_memory(store, write, values_for)
    assert raw == {}, raw


@pytest.mark.anyio
async def test_a_corrupt_postgres_memory_row_is_a_typed_error(postgres_dsn: str) -> None:
    import psycopg

    prefix = f"t{uuid.uuid4().hex[:10]}_"
    store = PostgresChatMemoryStore(postgres_dsn, table_prefix=prefix)
    try:
        await store.append("warm", [UserMessage(content="x")])

        def write(column: str, value: Any) -> None:
            with psycopg.connect(postgres_dsn, autocommit=True) as db:
                db.execute(
                    f"UPDATE {prefix}memory SET {column} = %s "
                    "WHERE conversation_id = 'conv' AND seq = 1",
                    (value,),
                )

        def values_for(kind: str) -> dict[str, Any]:
            return NUMBER_VALUES_POSTGRES if kind == "number" else TEXT_VALUES

        raw = await _corrupt_memory(store, write, values_for)
    finally:
        await store.aclose()
        await anyio.to_thread.run_sync(drop_tables, postgres_dsn, f"{prefix}memory")
    assert raw == {}, raw


# --- approvals -------------------------------------------------------------------------------


def _record(approval_id: str) -> PendingRecord:
    asked = ApprovalCall(id="c1", name="transfer", arguments={"amount": 5}, details={"k": "v"})
    done = ApprovalCall(id="c2", name="transfer", arguments={"amount": 6})
    return PendingRecord(
        id=approval_id,
        status="pending",
        conversation_id="conv",
        created_at=1.0,
        round=(
            RoundCall(id="c1", name="transfer", fingerprint=arguments_fingerprint({"amount": 5})),
            RoundCall(id="c2", name="transfer", fingerprint=arguments_fingerprint({"amount": 6})),
        ),
        calls=(
            PendingCall(call=asked),
            PendingCall(
                call=done,
                state="done",
                decision=Approve({"amount": 6}, by="ann"),
                result=StoredResult(content="sent", outcome="ok"),
            ),
        ),
    )


APPROVAL_COLUMNS: dict[str, dict[str, str]] = {
    "approvals": {
        "status": "text",
        "conversation_id": "text",
        "created_at": "real",
        "state": "text",
        "claim_token": "text",
        "claimed_until": "real",
        "completed_at": "real",
    },
    "approval_calls": {
        "call_id": "text",
        "position": "number",
        "tool_name": "text",
        "description": "text",
        "arguments": "text",
        "details": "text",
        "state": "text",
        "decision": "text",
        "result": "text",
    },
    "approval_audit": {
        "call_id": "text",
        "tool_name": "text",
        "decision": "text",
        "decided_by": "text",
        "decided_at": "real",
        "arguments": "text",
        "edited_arguments": "text",
        "reason": "text",
        "conversation_id": "text",
    },
    "approval_rules": {
        "conversation_id": "text",
        "tool_name": "text",
        "arguments": "text",
        "created_by": "text",
        "created_at": "real",
        "revoked_at": "real",
        "revoked_by": "text",
    },
}
_KEY = {
    "approvals": "id",
    "approval_calls": "approval_id",
    "approval_audit": "approval_id",
    "approval_rules": "id",
}


async def _approval_readers(store: Any, approval_id: str) -> dict[str, Callable[[], Any]]:
    return {
        "get": lambda: store.get(approval_id),
        "waiting": lambda: store.waiting(),
        "waiting(conv)": lambda: store.waiting("conv"),
        "claim": lambda: store.claim(approval_id, "token", {"c1": Approve()}, []),
        "audit": lambda: store.audit(approval_id),
        "audit()": lambda: store.audit(),
        "rules": lambda: store.rules("conv"),
        "revoke_rule": lambda: store.revoke_rule(approval_id, "bob", 3.0),
    }


async def _seed(store: Any, approval_id: str) -> None:
    record = _record(approval_id)
    await store.save(record)
    audit = AuditRecord(
        approval_id=approval_id,
        call_id="c1",
        tool_name="transfer",
        decision="edited",
        decided_by="ann",
        decided_at=2.0,
        arguments={"amount": 5},
        edited_arguments={"amount": 4},
        reason="too much",
        conversation_id="conv",
    )
    await store.record([audit])
    rule = StandingRule(
        id=approval_id,
        conversation_id="conv",
        name="transfer",
        created_by="ann",
        created_at=2.0,
        arguments={"amount": 5},
    )
    await store.add_rule(rule, audit)


async def _corrupt_approvals(
    store: Any,
    write: Callable[[str, str, str, Any], None],
    values_for: Callable[[str], Any],
    forget: Callable[[str], None],
) -> tuple[dict[str, str], int]:
    raw: dict[str, str] = {}
    cases = 0
    for table, columns in APPROVAL_COLUMNS.items():
        for column, kind in columns.items():
            for name, value in values_for(kind).items():
                approval_id = f"a{uuid.uuid4().hex[:8]}"
                await _seed(store, approval_id)
                try:
                    write(table, column, approval_id, value)
                except Exception:  # the column's own type refuses it: not a reachable row
                    continue
                cases += 1
                for reader, run in (await _approval_readers(store, approval_id)).items():
                    try:
                        await run()
                    except AdvisorChainError:
                        pass
                    except Exception as exc:
                        raw[f"{table}.{column}={name}: {reader}"] = type(exc).__name__
                # leave no corrupt row behind for the next case's `waiting()` and `audit()`
                forget(approval_id)
    dump_findings(f"approvals {type(store).__name__}", raw, cases)
    return raw, cases


@pytest.mark.anyio
async def test_a_corrupt_sqlite_approval_row_is_a_typed_error(tmp_path: Path) -> None:
    path = tmp_path / "approvals.db"
    store = SQLiteApprovalStore(path)
    try:

        def write(table: str, column: str, approval_id: str, value: Any) -> None:
            with sqlite3.connect(path) as db:
                db.execute(
                    f"UPDATE advisorchain_{table} SET {column} = ? WHERE {_KEY[table]} = ?",
                    (value, approval_id),
                )

        def values_for(kind: str) -> dict[str, Any]:
            if kind in ("number", "real"):
                return {**NUMBER_VALUES_SQLITE, "null": None}
            return {**TEXT_VALUES, **SQLITE_ONLY, "null": None}

        def forget(approval_id: str) -> None:
            with sqlite3.connect(path) as db:
                for table, key in _KEY.items():
                    db.execute(f"DELETE FROM advisorchain_{table} WHERE {key} = ?", (approval_id,))

        raw, cases = await _corrupt_approvals(store, write, values_for, forget)
    finally:
        await store.aclose()
    assert cases > 300
    assert raw == {}, raw


@pytest.mark.anyio
async def test_a_corrupt_postgres_approval_row_is_a_typed_error(postgres_dsn: str) -> None:
    import psycopg

    prefix = f"t{uuid.uuid4().hex[:10]}_"
    store = PostgresApprovalStore(postgres_dsn, table_prefix=prefix)
    try:

        def write(table: str, column: str, approval_id: str, value: Any) -> None:
            with psycopg.connect(postgres_dsn, autocommit=True) as db:
                db.execute(
                    f"UPDATE {prefix}{table} SET {column} = %s WHERE {_KEY[table]} = %s",
                    (value, approval_id),
                )

        def values_for(kind: str) -> dict[str, Any]:
            if kind == "number":
                return {**NUMBER_VALUES_POSTGRES, "null": None}
            if kind == "real":
                return {**REAL_VALUES_POSTGRES, "null": None}
            return {**TEXT_VALUES, "null": None}

        def forget(approval_id: str) -> None:
            with psycopg.connect(postgres_dsn, autocommit=True) as db:
                for table, key in _KEY.items():
                    db.execute(
                        f"DELETE FROM {prefix}{table} WHERE {key} = %s",
                        (approval_id,),
                    )

        raw, cases = await _corrupt_approvals(store, write, values_for, forget)
    finally:
        await store.aclose()
        await anyio.to_thread.run_sync(drop_approval_tables, postgres_dsn, prefix)
    assert cases > 200
    assert raw == {}, raw


# --- the tool-search caches (KeyedBlobs) -------------------------------------------------------

BLOB_VALUES: dict[str, Any] = {
    **SQLITE_ONLY,
    "text": "abc",
    "null": None,
    "odd length": b"\x00\x00\x80",
    "nan vector": b"\x00\x00\xc0\x7f" * 4,
    "infinite vector": b"\x00\x00\x80\x7f" * 4,
    "short vector": b"\x00\x00\x80\x3f",
    "not json": b"{",
    "json object": b'{"a": 1}',
    "json list of numbers": b"[1, 2]",
    "deep json": DEEP.encode(),
}


@contextmanager
def _blobs(path: Path, table: str, column: str, key: str) -> Iterator[Callable[[Any], None]]:
    def write(value: Any) -> None:
        with sqlite3.connect(path) as db:
            db.execute(f"UPDATE {table} SET {column} = ? WHERE key = ?", (value, key))

    yield write


def test_a_corrupt_embedding_cache_row_is_a_miss(tmp_path: Path) -> None:
    cache = EmbeddingCache(tmp_path / "e.sqlite3", model="m")
    texts = ["alpha", "beta", "gamma"]
    good = [0.6, 0.8, 0.0, 0.0]
    raw: dict[str, str] = {}
    with _blobs(cache.path, "embeddings", "vector", cache.key("alpha")) as write:
        for name, value in BLOB_VALUES.items():
            cache.put_many({t: good for t in texts})
            write(value)
            try:
                found = cache.get_many(texts)
            except Exception as exc:
                raw[name] = type(exc).__name__
                continue
            # a hit is a vector of the dimension written, every number finite
            for vector in found.values():
                if len(vector) != len(good) or any(
                    x != x or abs(x) == float("inf") for x in vector
                ):
                    raw[name] = f"served a vector of {len(vector)}: {vector[:4]}"
    dump_findings("EmbeddingCache", raw, len(BLOB_VALUES))
    assert raw == {}, raw


def test_a_corrupt_example_cache_row_is_a_miss(tmp_path: Path) -> None:
    cache = ExampleCache(tmp_path / "x.sqlite3", model="m")
    raw: dict[str, str] = {}
    with _blobs(cache.path, "examples", "value", cache.key("p")) as write:
        for name, value in {**BLOB_VALUES, "list of objects": b'[{"a": 1}, 2, null]'}.items():
            cache.put_many({"p": ["find a flight"]})
            write(value)
            try:
                found = cache.get_many(["p"])
            except Exception as exc:
                raw[name] = type(exc).__name__
                continue
            if any(not all(isinstance(e, str) for e in v) for v in found.values()):
                raw[name] = f"served {found!r}"
    dump_findings("ExampleCache", raw, len(BLOB_VALUES) + 1)
    assert raw == {}, raw
