"""The test PostgreSQL server, for the tests that need one (`.ci/postgres.sh` starts it)."""

from __future__ import annotations

import os

import pytest

POSTGRES_DSN = "ADVISORCHAIN_TEST_POSTGRES_DSN"
APPROVAL_TABLES = ("approvals", "approval_calls", "approval_audit", "approval_rules")


def require_postgres_dsn() -> str:
    """The server's DSN from `ADVISORCHAIN_TEST_POSTGRES_DSN`.

    Skips the test when it is unset, except with `CI=true`, where the PostgreSQL tests must
    run and the test fails instead.
    """
    dsn = os.environ.get(POSTGRES_DSN)
    if not dsn:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{POSTGRES_DSN} is not set: CI must run the PostgreSQL tests")
        pytest.skip(f"{POSTGRES_DSN} is not set (run .ci/postgres.sh)")
    return dsn


def drop_tables(dsn: str, *tables: str) -> None:
    """Remove test tables (each name already carries its test's prefix)."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as connection:
        for table in tables:
            connection.execute(f"DROP TABLE IF EXISTS {table}")


def drop_approval_tables(dsn: str, prefix: str) -> None:
    """Remove the tables a `PostgresApprovalStore` with `table_prefix=prefix` made."""
    drop_tables(dsn, *(prefix + table for table in APPROVAL_TABLES))
