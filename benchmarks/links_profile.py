"""What each link does per turn: cProfile of `benchmarks.links`' chains, diffed.

    python -m benchmarks.links_profile [--turns 2000] [--top 12] [--chain NAME]

Every chain of `benchmarks.links` (the bare loop, each link alone, all four) runs `turns`
turns under `cProfile`; for each link the report lists the functions whose own time per
turn grew the most over the bare loop's, with their entries per turn. cProfile slows
the turn about 3x and counts each resume of a coroutine as an entry: read the shares,
not the absolute microseconds (the `link_costs` section has those).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import pstats
from typing import Any

from .links import Turn, link_turn
from .peers import advisorchain_agent
from .profiling import _where


def chains() -> dict[str, Turn]:
    """A turn function per configuration of `benchmarks.links`."""
    outside, inside = advisorchain_agent.links()
    configs = {
        "bare loop": ([], [], False),
        "+ LoggingAdvisor": ([outside[0]], [], False),
        "+ TracingAdvisor": ([outside[1]], [], False),
        "+ ApprovalAdvisor": ([outside[2]], [], True),
        "+ ToolSearchAdvisor": ([], inside, False),
        "all four": (outside, inside, True),
    }
    turns: dict[str, Turn] = {}
    for name, (before, after, approval) in configs.items():
        turns[name] = link_turn(before, after, approval=approval)
    return turns


def _entries(profiler: cProfile.Profile, turns: int) -> dict[str, tuple[float, float]]:
    raw: dict[Any, Any] = pstats.Stats(profiler).stats  # type: ignore[attr-defined]
    out: dict[str, tuple[float, float]] = {}
    for (filename, line, name), (_, calls, tottime, _, _) in raw.items():
        key = f"{_where(filename)}:{line}({name})"
        entries, own = out.get(key, (0.0, 0.0))
        out[key] = (entries + calls / turns, own + tottime / turns * 1e6)
    return out


async def run(*, turns: int = 2000, block: int = 50, only: str | None = None) -> dict[str, Any]:
    """Per configuration: each function's (entries, own us) per turn. The chains take
    turns in blocks of `block`, each with its own profiler, so load hits them alike."""
    subjects = {
        name: turn for name, turn in chains().items() if only is None or name in ("bare loop", only)
    }
    profilers = {name: cProfile.Profile() for name in subjects}
    for turn in subjects.values():
        for _ in range(200):
            await turn()
    for _ in range(max(1, turns // block)):
        for name, turn in subjects.items():
            profiler = profilers[name]
            profiler.enable()
            for _ in range(block):
                await turn()
            profiler.disable()
    done = max(1, turns // block) * block
    return {name: _entries(profiler, done) for name, profiler in profilers.items()}


def render(profiles: dict[str, Any], top: int = 12) -> str:
    """Per link: total profiled us per turn, and the functions that grew most."""
    bare = profiles["bare loop"]
    bare_total = sum(own for _, own in bare.values())
    lines = [f"bare loop: {bare_total:.0f} profiled us per turn", ""]
    for name, profile in profiles.items():
        if name == "bare loop":
            continue
        total = sum(own for _, own in profile.values())
        lines.append(f"## {name}: {total:.0f} profiled us per turn (+{total - bare_total:.0f})")
        lines.append("")
        lines.append("| function | entries/turn (bare) | own us/turn | added us |")
        lines.append("|---|---|---|---|")
        grown = []
        for key, (entries, own) in profile.items():
            base_entries, base_own = bare.get(key, (0.0, 0.0))
            grown.append((own - base_own, key, entries, base_entries, own))
        for added, key, entries, base_entries, own in sorted(grown, reverse=True)[:top]:
            cells = [key, f"{entries:.0f} ({base_entries:.0f})", f"{own:.1f}", f"{added:+.1f}"]
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=2000)
    parser.add_argument("--top", type=int, default=12)
    parser.add_argument("--chain", default=None, help="profile only this chain (and the bare loop)")
    args = parser.parse_args()
    print(render(asyncio.run(run(turns=args.turns, only=args.chain)), top=args.top))


if __name__ == "__main__":
    main()
