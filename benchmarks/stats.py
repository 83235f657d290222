"""Small statistics and table helpers shared by the benchmarks."""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence


def percentile(values: Sequence[float], q: float) -> float:
    """The `q`-th percentile (0-100) by the nearest-rank method."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


def summary(values: Sequence[float]) -> dict[str, float]:
    """Median, p99, mean and minimum of `values` (seconds in, milliseconds out)."""
    if not values:
        return {"median_ms": math.nan, "p99_ms": math.nan, "mean_ms": math.nan, "min_ms": math.nan}
    return {
        "median_ms": statistics.median(values) * 1000,
        "p99_ms": percentile(values, 99) * 1000,
        "mean_ms": statistics.fmean(values) * 1000,
        "min_ms": min(values) * 1000,
    }


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A Markdown table."""

    def cell(v: object) -> str:
        if isinstance(v, float):
            if math.isnan(v):
                return "-"
            return f"{v:.3f}" if abs(v) < 10 else f"{v:.1f}"
        return str(v)

    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


async def cpu_per_turn(
    subjects: Mapping[str, Callable[[], Awaitable[object]]], *, turns: int, block: int
) -> dict[str, list[float]]:
    """CPU seconds (this thread) of each turn of each subject, `turns` in all, the
    subjects interleaved in blocks of `block` so that machine noise hits them alike."""
    samples: dict[str, list[float]] = {name: [] for name in subjects}
    for _ in range(max(1, turns // block)):
        for name, turn in subjects.items():
            for _ in range(block):
                start = time.thread_time()
                await turn()
                samples[name].append(time.thread_time() - start)
    return samples
