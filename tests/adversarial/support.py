"""What the adversarial suite shares: hypothesis settings, the typed-error check, leak checks."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

from hypothesis import HealthCheck, settings

from advisorchain import AdvisorChainError

EXAMPLES = int(os.environ.get("ADVISORCHAIN_ADVERSARIAL_EXAMPLES", "60"))
"""Hypothesis examples per property (raise it locally for a deeper search)."""

PROPERTY = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,  # the same examples on every run and in CI: a failure reproduces
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
"""The settings of every property in the suite."""

KEY = "sk-adversarial-0123456789abcdefSECRET"
"""An API key that must never appear in an exception, its cause, or a log."""

T = TypeVar("T")


def typed_or_value(action: Callable[[], T]) -> T | AdvisorChainError:
    """Run `action`: its value, or the library's typed error. Anything else fails the test."""
    try:
        return action()
    except AdvisorChainError as exc:
        return exc


def exception_chain_text(error: BaseException) -> str:
    """Everything an exception and its causes/contexts show when printed or logged."""
    seen: list[str] = []
    current: BaseException | None = error
    while current is not None and len(seen) < 20:
        seen.append(f"{current!s} {current!r} {getattr(current, 'body', '')}")
        seen.append(repr(getattr(current, "message", "")))
        current = current.__cause__ or current.__context__
    return "\n".join(seen)


def open_sockets() -> int:
    """Sockets this process has open (file descriptors that are sockets)."""
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{fd}").startswith("socket:"):
                count += 1
        except OSError:
            pass
    return count


_RUNTIME_POOLS = ("Trio thread", "asyncio_")
"""Idle worker threads the event loops keep for name lookups (not owned by the library)."""


def server_threads_done(timeout: float = 10.0) -> None:
    """Wait until the test servers' request threads have finished."""
    for thread in threading.enumerate():
        if "process_request" in thread.name:
            thread.join(timeout)


@contextmanager
def nothing_left_behind(settle: Callable[[], None] = server_threads_done) -> Iterator[None]:
    """Fails if the block leaves a thread or a socket behind (after `settle()`, which lets
    a test's own server finish what it was doing)."""
    threads = set(threading.enumerate())
    sockets = open_sockets()
    yield
    settle()
    extra = [
        t
        for t in threading.enumerate()
        if t not in threads and t.is_alive() and not t.name.startswith(_RUNTIME_POOLS)
    ]
    assert not extra, f"threads left behind: {extra}"
    assert open_sockets() <= sockets, "sockets left open"


def dump_findings(test: str, found: dict[str, str], cases: int) -> None:
    """Append what a class test found (`case: what failed`) to the JSON-lines file named
    by `ADVISORCHAIN_ADVERSARIAL_DUMP`, for counting cases before and after fixes."""
    path = os.environ.get("ADVISORCHAIN_ADVERSARIAL_DUMP")
    if path:
        with open(path, "a", encoding="utf-8") as out:
            out.write(json.dumps({"test": test, "cases": cases, "found": found}) + "\n")
