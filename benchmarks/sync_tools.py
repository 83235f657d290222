"""Sync tools: what running a trivial sync function costs, by the way it is run.

Two measurements:
- a probe of one trivial call (`lambda: 1`) awaited in a loop: called inline, through
  anyio's worker threads (`anyio.to_thread.run_sync`, what `@tool` does for a sync
  function by default), and through a dedicated `ThreadPoolExecutor` with
  `loop.run_in_executor` (asyncio only);
- the whole 3-round turn of the overhead scenario with the same two tools written as
  async functions, as sync functions in worker threads (in every framework: each runs
  sync tools in its worker threads), and as sync functions declared non-blocking
  (`@tool(run_inline=True)`; the hand-written loop calls them directly).
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
from .peers import PEERS
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


async def run(
    *, calls: int = 2000, turns: int = 500, frameworks: tuple[str, ...] = PEERS
) -> dict[str, Any]:
    """Probe one call each way, then the whole turn with each kind of tool.

    Every framework of `frameworks` runs the sync tools in its worker threads; the async
    and inline kinds run in advisorchain and the hand-written loop only (the peers'
    async numbers are the overhead section's; they have no inline option).
    """
    probe = await _probe(calls)
    turn: dict[str, Any] = {}
    skipped: dict[str, str] = {}
    for kind in ("async", "inline", "sync"):
        names = frameworks if kind == "sync" else ("advisorchain", "handwritten")
        report = await overhead.run(
            variant="bare",
            tool_kind=kind,
            frameworks=tuple(n for n in names if n in frameworks),
            turns=turns,
            warmup=min(100, turns),
            memory_samples=1,
        )
        turn[kind] = {name: r["turn"] for name, r in report["results"].items()}
        skipped.update(report["skipped"])
    return {"probe_us": probe, "turn_ms": turn, "skipped": skipped}


def render(report: dict[str, Any]) -> str:
    """The report as two Markdown tables."""
    probe = table(
        ["one trivial sync call", "median us"], [[k, v] for k, v in report["probe_us"].items()]
    )
    turn_ms = report["turn_ms"]
    names = list(turn_ms["sync"])
    rows = []
    for name in names:
        row: list[object] = [name]
        for kind in ("async", "inline", "sync"):
            entry = turn_ms[kind].get(name)
            row += [entry["median_ms"], entry["p99_ms"]] if entry else ["-", "-"]
        rows.append(row)
    turns = table(
        [
            "3-round turn, 3 tool calls (ms)",
            "async tools",
            "p99",
            "sync, run_inline=True",
            "p99",
            "sync, worker threads",
            "p99",
        ],
        rows,
    )
    return probe + "\n\n" + turns
