"""What each link's work per turn costs, by subtraction: the link against itself with parts
of its work switched off, all chains interleaved in one process.

    python -m benchmarks.links_items [--turns 3000]

The overhead scenario's turn (3 model calls, 3 tool calls in 2 rounds) through
`[link, ToolCallingAdvisor]` (tool search: after the loop). For each link:

- logging: hooks only (`_log_*` switched off); then everything into the benchmarks' logger
  (only a `NullHandler`: the advisor sees that no record would have an effect and makes
  none); then, into a logger whose handler takes every record and drops it, fields and
  rounds built but no record (`_emit` switched off), then everything (7 records: 1 turn,
  3 model calls, 3 tool calls);
- tracing: the same three hooks passing through (an advisor with `call`, `call_model` and
  `call_tool` that only await `next`), then everything (7 spans: 1 turn, 3 chat, 3 tools);
- approval: tools that need no approval (the hook runs, asks nobody), then every call
  approved by a `CallbackApprover` (2 rounds asked, 3 calls);
- tool search: a `before` that returns the request unchanged, then the real one.

The differences are what those parts cost; CPU time of the event-loop thread, medians.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import statistics
from typing import Any

from advisorchain import Advisor, ChatRequest
from advisorchain.advisors import LoggingAdvisor, ToolSearchAdvisor

from . import scenario
from .links import link_turn
from .peers import advisorchain_agent
from .peers.errors import bench_logger
from .stats import cpu_per_turn


class _HooksOnly(LoggingAdvisor):
    def _log_turn(self, *args: Any) -> None:
        pass

    def _log_model(self, *args: Any) -> None:
        pass

    def _log_tool(self, *args: Any) -> None:
        pass


class _NoRecords(LoggingAdvisor):
    def _emit(self, *args: Any) -> None:
        pass


class _Drop(logging.Handler):
    """A handler that takes every record (so records are made) and writes nothing."""

    def emit(self, record: logging.LogRecord) -> None:
        pass


def _dropping_logger() -> logging.Logger:
    logger = logging.getLogger("benchmarks.links_items.dropping")
    logger.setLevel(logging.INFO)
    if not logger.handlers:
        logger.addHandler(_Drop())
    logger.propagate = False
    return logger


class _PassThrough(Advisor):
    """`call`, `call_model`, `call_tool` (and their stream twins) that only call `next`."""

    async def call(self, request: Any, next: Any) -> Any:
        return await next(request)

    def stream(self, request: Any, next: Any) -> Any:
        return next(request)

    async def call_model(self, request: Any, next: Any) -> Any:
        return await next(request)

    def stream_model(self, request: Any, next: Any) -> Any:
        return next(request)

    async def call_tool(self, invocation: Any, next: Any) -> Any:
        return await next(invocation)


class _SearchUnchanged(ToolSearchAdvisor):
    async def before(self, request: ChatRequest) -> ChatRequest:
        return request


def configs() -> dict[str, tuple[list[Advisor], list[Advisor], bool]]:
    """name -> (links before the loop, links after it, tools require approval)."""
    outside, _ = advisorchain_agent.links()
    logger = bench_logger("advisorchain")
    dropping = _dropping_logger()
    return {
        "bare loop": ([], [], False),
        "logging: hooks only": ([_HooksOnly(logger)], [], False),
        "logging: NullHandler only": ([LoggingAdvisor(logger)], [], False),
        "logging: fields, no records": ([_NoRecords(dropping)], [], False),
        "logging: all": ([LoggingAdvisor(dropping)], [], False),
        "tracing: hooks only": ([_PassThrough()], [], False),
        "tracing: all": ([outside[1]], [], False),
        "approval: nothing to approve": ([outside[2]], [], False),
        "approval: all": ([outside[2]], [], True),
        "tool search: before unchanged": ([], [_SearchUnchanged()], False),
        "tool search: all": ([], [ToolSearchAdvisor()], False),
    }


async def run(*, turns: int = 3000, block: int = 50) -> dict[str, float]:
    """CPU us per turn (median) of each configuration."""
    subjects = {}
    for name, (before, after, approval) in configs().items():
        turn = link_turn(before, after, approval=approval)
        if await turn() != scenario.ANSWER:
            raise AssertionError(f"{name}: wrong answer")
        for _ in range(200):
            await turn()
        subjects[name] = turn
    gc.collect()
    gc.freeze()
    try:
        samples = await cpu_per_turn(subjects, turns=turns, block=block)
    finally:
        gc.unfreeze()
    return {name: statistics.median(values) * 1e6 for name, values in samples.items()}


def render(us: dict[str, float]) -> str:
    """Each step's cost: the difference to the step before it."""
    steps = [
        ("logging", "hooks (3 hook kinds, timing)", "logging: hooks only", "bare loop", 1),
        (
            "logging",
            "NullHandler only: the check that no record would be seen",
            "logging: NullHandler only",
            "logging: hooks only",
            7,
        ),
        (
            "logging",
            "with a handler: fields, rounds, message text",
            "logging: fields, no records",
            "logging: hooks only",
            7,
        ),
        (
            "logging",
            "with a handler: records (LogRecord, handler)",
            "logging: all",
            "logging: fields, no records",
            7,
        ),
        ("tracing", "hooks (3 hook kinds)", "tracing: hooks only", "bare loop", 1),
        ("tracing", "spans, attributes, metrics", "tracing: all", "tracing: hooks only", 7),
        ("approval", "hook, nothing to approve", "approval: nothing to approve", "bare loop", 3),
        (
            "approval",
            "asking, fingerprints, audit",
            "approval: all",
            "approval: nothing to approve",
            3,
        ),
        (
            "tool search",
            "hooks (before, call_tool)",
            "tool search: before unchanged",
            "bare loop",
            1,
        ),
        (
            "tool search",
            "narrowing (request copy)",
            "tool search: all",
            "tool search: before unchanged",
            3,
        ),
    ]
    bare = us["bare loop"]
    lines = [f"bare loop: {bare:.1f} us per turn", ""]
    lines.append("| link | part | us per turn | % of bare loop | per item | items per turn |")
    lines.append("|---|---|---|---|---|---|")
    for link, part, name, before, items in steps:
        added = us[name] - us[before]
        per = f"{added / items:.1f}" if items > 1 else "-"
        count = items if items > 1 else "-"
        share = f"{added / bare * 100:+.0f}%"
        lines.append(f"| {link} | {part} | {added:+.1f} | {share} | {per} | {count} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=3000)
    args = parser.parse_args()
    print(render(asyncio.run(run(turns=args.turns))))


if __name__ == "__main__":
    main()
