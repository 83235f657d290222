"""Small statistics and table helpers shared by the benchmarks."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence


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
