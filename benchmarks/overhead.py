"""Overhead per turn: the same 3-round conversation in every framework, interleaved.

Method (see README): every framework is built once in this process, checked (the final
answer, three model calls, three tool executions), warmed up, then measured in blocks
of `block` turns, frameworks taking turns in a rotating order until each has `turns`
samples, so that load from other processes on a shared machine hits all of them alike.
Import-time objects are moved out of the garbage collector's way (`gc.freeze()`) so that
one framework's large import does not slow another's collections. Time per round comes
from the scripted models' call timestamps: round 1 = start to 2nd model call, round 2 =
2nd to 3rd, round 3 = 3rd call to the end of the turn. Wall time is the headline; CPU
time of the event-loop thread is reported next to it (it ignores other processes' load
but also misses worker threads). Memory per conversation is measured afterwards, one
framework at a time under `tracemalloc`: the peak of memory allocated during one turn,
and what is still allocated after it (retained).
"""

from __future__ import annotations

import gc
import importlib
import statistics
import time
import tracemalloc
from dataclasses import dataclass, field
from typing import Any

from . import scenario
from .peers import PEERS
from .peers.errors import Unavailable
from .stats import summary, table


@dataclass
class _Subject:
    name: str
    version: str
    turn: scenario.Turn
    totals: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)
    rounds: list[list[float]] = field(default_factory=lambda: [[], [], []])


async def load(name: str, variant: str, tool_kind: str) -> tuple[_Subject | None, str | None]:
    """Build framework `name` for `variant`; `(None, why)` when it cannot run here."""
    try:
        module: Any = importlib.import_module(f"benchmarks.peers.{name}_agent")
        turn = await module.build(variant, tool_kind)
        subject = _Subject(name, module.version(), turn)
        await check(subject)
    except Unavailable as exc:
        return None, str(exc)
    return subject, None


async def check(subject: _Subject) -> None:
    """Run one turn and verify the scenario really happened: answer, 3 model calls, 3 tools."""
    scenario.MARKS.clear()
    before = scenario.TOOL_CALLS[0]
    text = await subject.turn()
    calls = scenario.TOOL_CALLS[0] - before
    if text != scenario.ANSWER or len(scenario.MARKS) != 3 or calls != 3:
        raise AssertionError(
            f"{subject.name}: wrong scenario: answer {text!r}, "
            f"{len(scenario.MARKS)} model calls, {calls} tool calls"
        )


async def _timed(subject: _Subject) -> None:
    scenario.MARKS.clear()
    cpu0 = time.thread_time()
    start = time.perf_counter()
    await subject.turn()
    end = time.perf_counter()
    subject.cpu.append(time.thread_time() - cpu0)
    subject.totals.append(end - start)
    marks = scenario.MARKS
    subject.rounds[0].append(marks[1] - start)
    subject.rounds[1].append(marks[2] - marks[1])
    subject.rounds[2].append(end - marks[2])


async def memory(subject: _Subject, samples: int = 15) -> dict[str, float]:
    """Peak and retained KiB of one conversation, under tracemalloc."""
    gc.collect()
    tracemalloc.start()
    try:
        await subject.turn()
        peaks, retained = [], []
        for _ in range(samples):
            gc.collect()
            base = tracemalloc.get_traced_memory()[0]
            tracemalloc.reset_peak()
            await subject.turn()
            current, peak = tracemalloc.get_traced_memory()
            peaks.append(peak - base)
            gc.collect()
            retained.append(tracemalloc.get_traced_memory()[0] - base)
    finally:
        tracemalloc.stop()
    return {
        "peak_kib": statistics.median(peaks) / 1024,
        "retained_kib": statistics.median(retained) / 1024,
    }


async def run(
    *,
    variant: str = "bare",
    tool_kind: str = "async",
    frameworks: tuple[str, ...] = PEERS,
    turns: int = 1000,
    warmup: int = 200,
    block: int = 50,
    memory_samples: int = 15,
) -> dict[str, Any]:
    """Measure every framework of `frameworks`; results keyed by framework name."""
    subjects: list[_Subject] = []
    skipped: dict[str, str] = {}
    for name in frameworks:
        subject, why = await load(name, variant, tool_kind)
        if subject is None:
            skipped[name] = why or "unavailable"
        else:
            subjects.append(subject)
    for subject in subjects:
        for _ in range(warmup):
            await subject.turn()
    gc.collect()
    gc.freeze()
    try:
        order = list(subjects)
        while order and len(order[0].totals) < turns:
            for subject in order:
                for _ in range(min(block, turns - len(subject.totals))):
                    await _timed(subject)
            order.append(order.pop(0))
    finally:
        gc.unfreeze()
    results: dict[str, Any] = {}
    for subject in subjects:
        results[subject.name] = {
            "version": subject.version,
            "turns": len(subject.totals),
            "turn": summary(subject.totals),
            "cpu": summary(subject.cpu),
            "rounds": [summary(r) for r in subject.rounds],
            "memory": await memory(subject, memory_samples),
        }
    base = results.get("advisorchain")
    for entry in results.values():
        if base is not None:
            entry["ratio_vs_advisorchain"] = entry["turn"]["median_ms"] / base["turn"]["median_ms"]
            entry["cpu_ratio_vs_advisorchain"] = (
                entry["cpu"]["median_ms"] / base["cpu"]["median_ms"]
            )
    return {
        "variant": variant,
        "tool_kind": tool_kind,
        "method": {"turns": turns, "warmup": warmup, "block": block, "interleaved": True},
        "results": results,
        "skipped": skipped,
    }


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def render(report: dict[str, Any]) -> str:
    """The report as a Markdown table (times in ms)."""
    rows = []
    for name, r in report["results"].items():
        rounds = " / ".join(f"{x['median_ms']:.3f}" for x in r["rounds"])
        rows.append(
            [
                name,
                r["turn"]["median_ms"],
                r["turn"]["p99_ms"],
                r["cpu"]["median_ms"],
                rounds,
                r["memory"]["peak_kib"],
                r["memory"]["retained_kib"],
                _ratio(r.get("ratio_vs_advisorchain")),
                _ratio(r.get("cpu_ratio_vs_advisorchain")),
                r["version"],
            ]
        )
    text = table(
        [
            "framework",
            "turn median",
            "turn p99",
            "CPU median",
            "rounds 1/2/3 median",
            "peak KiB",
            "retained KiB",
            "wall vs advisorchain",
            "CPU vs advisorchain",
            "version",
        ],
        rows,
    )
    for name, why in report["skipped"].items():
        text += f"\n\n_{name} skipped: {why}_"
    return text
