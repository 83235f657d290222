"""Profile advisorchain's hot path: the bare 3-round turn of the overhead scenario.

Runs `turns` turns under `cProfile` (which counts each resumption of a coroutine as an
entry, and slows everything down about 3x) and reports the functions with the most own time
(`tottime`) and the most cumulative time, with advisorchain's own files marked, so that
what dominates a turn (pydantic validation, copies, task groups, ...) is visible.
"""

from __future__ import annotations

import cProfile
import io
import os
import pstats
from typing import Any

from .peers import advisorchain_agent

_ROOT = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))


def _ours(filename: str) -> bool:
    if not os.path.isabs(filename):  # built-ins: "~"
        return False
    inside = os.path.realpath(filename).startswith(_ROOT)
    return inside and "/.venv" not in filename and "/benchmarks/" not in filename


def _where(filename: str) -> str:
    if _ours(filename):
        return "advisorchain/" + os.path.relpath(os.path.realpath(filename), _ROOT)
    for marker in ("site-packages/", "lib/python3"):
        if marker in filename:
            return filename.split(marker, 1)[1]
    return filename


async def run(*, turns: int = 2000, top: int = 20) -> dict[str, Any]:
    """Profile `turns` turns; the top functions by own and by cumulative time."""
    turn = await advisorchain_agent.build("bare", "async")
    for _ in range(200):
        await turn()
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(turns):
        await turn()
    profiler.disable()
    stats = pstats.Stats(profiler, stream=io.StringIO())
    entries = []
    raw: dict[Any, Any] = stats.stats  # type: ignore[attr-defined]
    for (filename, line, name), (_, calls, tottime, cumtime, _) in raw.items():
        entries.append(
            {
                "function": f"{_where(filename)}:{line}({name})",
                "calls_per_turn": calls / turns,
                "own_us_per_turn": tottime / turns * 1e6,
                "cumulative_us_per_turn": cumtime / turns * 1e6,
                "ours": _ours(filename),
            }
        )
    total = sum(e["own_us_per_turn"] for e in entries)
    by_own = sorted(entries, key=lambda e: -e["own_us_per_turn"])[:top]
    by_cumulative = sorted(entries, key=lambda e: -e["cumulative_us_per_turn"])[:top]
    ours = sum(e["own_us_per_turn"] for e in entries if e["ours"])
    return {
        "turns": turns,
        "profiled_us_per_turn": total,
        "own_share_advisorchain": ours / total if total else 0.0,
        "by_own_time": by_own,
        "by_cumulative_time": by_cumulative,
    }


def render(report: dict[str, Any], top: int = 15) -> str:
    """The top functions by own time, as a Markdown table."""
    lines = [
        f"Profiled (cProfile inflates times): {report['profiled_us_per_turn']:.0f} us per turn, "
        f"{report['own_share_advisorchain'] * 100:.0f}% of it in advisorchain's own code.",
        "",
        "| function | entries/turn | own us/turn | cumulative us/turn |",
        "|---|---|---|---|",
    ]
    for e in report["by_own_time"][:top]:
        lines.append(
            f"| `{e['function']}` | {e['calls_per_turn']:.0f} | {e['own_us_per_turn']:.1f} "
            f"| {e['cumulative_us_per_turn']:.1f} |"
        )
    return "\n".join(lines)
