"""Sync tools: what running a trivial sync function costs, by the way it is run.

Two measurements:
- a probe of one trivial call (`lambda: 1`) awaited in a loop: called inline, through
  anyio's worker threads (`anyio.to_thread.run_sync`, what `@tool` does for a sync
  function by default), and through a dedicated `ThreadPoolExecutor` with
  `loop.run_in_executor` (asyncio only);
- the whole 3-round turn of the overhead scenario with the same two tools written as
  async functions, as sync functions in worker threads, and as sync functions declared
  non-blocking (`@tool(run_inline=True)`), in advisorchain and in the hand-written loop.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import anyio.to_thread

from . import overhead
from .stats import table


def _trivial() -> int:
    return 1


async def _probe(calls: int) -> dict[str, float]:
    loop = asyncio.get_running_loop()
    pool = ThreadPoolExecutor(max_workers=4)

    async def inline() -> None:
        _trivial()

    async def anyio_thread() -> None:
        await anyio.to_thread.run_sync(_trivial)

    async def executor() -> None:
        await loop.run_in_executor(pool, _trivial)

    options: dict[str, Callable[[], Awaitable[None]]] = {
        "inline": inline,
        "anyio.to_thread.run_sync": anyio_thread,
        "dedicated ThreadPoolExecutor": executor,
    }
    medians: dict[str, float] = {}
    try:
        for name, fn in options.items():
            for _ in range(200):
                await fn()
            samples = []
            for _ in range(calls):
                start = time.perf_counter()
                await fn()
                samples.append(time.perf_counter() - start)
            medians[name] = statistics.median(samples) * 1e6
    finally:
        pool.shutdown()
    return medians


async def run(*, calls: int = 2000, turns: int = 500) -> dict[str, Any]:
    """Probe one call each way, then the whole turn with each kind of tool."""
    probe = await _probe(calls)
    turn: dict[str, Any] = {}
    for kind in ("async", "inline", "sync"):
        report = await overhead.run(
            variant="bare",
            tool_kind=kind,
            frameworks=("advisorchain", "handwritten"),
            turns=turns,
            warmup=100,
        )
        turn[kind] = {name: r["turn"] for name, r in report["results"].items()}
    return {"probe_us": probe, "turn_ms": turn}


def render(report: dict[str, Any]) -> str:
    """The report as two Markdown tables."""
    probe = table(
        ["one trivial sync call", "median us"], [[k, v] for k, v in report["probe_us"].items()]
    )
    labels = {
        "async": "async tools",
        "inline": "sync, run_inline=True",
        "sync": "sync, worker threads",
    }
    rows = []
    for kind, frameworks in report["turn_ms"].items():
        rows.append(
            [
                labels[kind],
                frameworks["advisorchain"]["median_ms"],
                frameworks["advisorchain"]["p99_ms"],
                frameworks["handwritten"]["median_ms"],
            ]
        )
    turns = table(
        ["3-round turn, 3 tool calls", "advisorchain median", "p99", "hand-written median"], rows
    )
    return probe + "\n\n" + turns
