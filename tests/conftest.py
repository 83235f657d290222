"""Shared test set-up: every async test runs on asyncio and on trio; no real network."""

from __future__ import annotations

import ipaddress
import os
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from postgres_support import require_postgres_dsn

_real_connect = socket.socket.connect
_real_connect_ex = socket.socket.connect_ex


def _is_local(address: Any) -> bool:
    if isinstance(address, (str, bytes)):
        return True  # unix socket path
    host = address[0]
    if host in ("localhost", ""):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _guarded_connect(self: socket.socket, address: Any) -> None:
    if not _is_local(address):
        raise RuntimeError(f"tests must not touch the network (tried to connect to {address!r})")
    _real_connect(self, address)


def _guarded_connect_ex(self: socket.socket, address: Any) -> int:
    if not _is_local(address):
        raise RuntimeError(f"tests must not touch the network (tried to connect to {address!r})")
    return _real_connect_ex(self, address)


@pytest.fixture(autouse=True, scope="session")
def _no_network() -> Iterator[None]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(socket.socket, "connect", _guarded_connect)
        patch.setattr(socket.socket, "connect_ex", _guarded_connect_ex)
        yield


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    """Run each `@pytest.mark.anyio` test on both backends."""
    backend: str = request.param
    return backend


@pytest.fixture(scope="session")
def local_model_path() -> Path:
    """The embedded demo model (the `local` extra), assembled and verified.

    Skipped when the extra is not installed, except in CI (`CI` set), where it must be.
    """
    try:
        import llama_cpp  # noqa: F401

        from advisorchain.providers.local.weights import ensure_local_model

        return ensure_local_model()
    except ImportError as exc:
        if os.environ.get("CI"):
            raise
        pytest.skip(f"the 'local' extra is not installed: {exc}")


@pytest.fixture
def postgres_dsn() -> str:
    """The test PostgreSQL server's DSN (`.ci/postgres.sh` starts one).

    Skipped when `ADVISORCHAIN_TEST_POSTGRES_DSN` is unset, except with `CI=true`, where
    the PostgreSQL tests must run.
    """
    return require_postgres_dsn()
