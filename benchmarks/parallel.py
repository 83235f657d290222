"""Parallel tools: one round of N tool calls of 50 ms each, wall time against the ideal 50 ms.

The scripted model asks for N calls of a tool that waits 50 ms, then answers. Async tools
wait with `anyio.sleep`; sync tools with `time.sleep` in anyio's worker threads (the
default for sync tools; anyio's default limiter allows 40 threads). Each N runs `repeat`
times on the given anyio backend; the reported time is the whole turn (both model calls
included, which are instantaneous), its ratio to 50 ms is what the issue's 1.3x target
is about.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

import anyio

from advisorchain import Chain, ChatRequest, ToolCall, ToolCallingAdvisor, ToolMessage, tool
from advisorchain.providers import ScriptedChatModel

from .stats import table

DELAY = 0.05


@tool
async def wait_async(i: int) -> str:
    """Wait 50 ms without blocking the event loop."""
    await anyio.sleep(DELAY)
    return f"done {i}"


@tool
def wait_sync(i: int) -> str:
    """Wait 50 ms, blocking (runs in a worker thread)."""
    time.sleep(DELAY)
    return f"done {i}"


def _chain(n: int, name: str) -> Chain:
    def reply(request: ChatRequest) -> list[ToolCall] | str:
        if any(isinstance(m, ToolMessage) for m in request.messages):
            return "all done"
        return [ToolCall.from_arguments(name, {"i": i}, id=f"c{i}") for i in range(n)]

    model = ScriptedChatModel(reply)
    return Chain([ToolCallingAdvisor()], model=model, tools=[wait_async, wait_sync])


async def _measure(ns: tuple[int, ...], repeat: int) -> list[dict[str, Any]]:
    rows = []
    for kind, name in (("async", "wait_async"), ("sync (threads)", "wait_sync")):
        for n in ns:
            chain = _chain(n, name)
            await chain.call("go")  # warm up (thread pool, caches)
            times = []
            for _ in range(repeat):
                start = time.perf_counter()
                await chain.call("go")
                times.append(time.perf_counter() - start)
            median = statistics.median(times)
            rows.append(
                {
                    "tools": kind,
                    "n": n,
                    "median_ms": median * 1000,
                    "max_ms": max(times) * 1000,
                    "ratio_to_ideal": median / DELAY,
                }
            )
    return rows


def run(
    *, ns: tuple[int, ...] = (1, 4, 16), repeat: int = 20, backends: tuple[str, ...] = ("asyncio",)
) -> dict[str, Any]:
    """Measure each N on each anyio backend."""
    results = {}
    for backend in backends:
        results[backend] = anyio.run(_measure, ns, repeat, backend=backend)
    return {"ideal_ms": DELAY * 1000, "repeat": repeat, "results": results}


def render(report: dict[str, Any]) -> str:
    """The report as a Markdown table."""
    rows = [
        [backend, r["tools"], r["n"], r["median_ms"], r["max_ms"], f"{r['ratio_to_ideal']:.3f}x"]
        for backend, rs in report["results"].items()
        for r in rs
    ]
    return table(["backend", "tools", "N", "median ms", "max ms", "vs ideal 50 ms"], rows)
