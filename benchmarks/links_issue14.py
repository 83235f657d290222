"""Microseconds each issue-14 link adds per turn (overhead scenario: 3 rounds, 3 tools),
side by side in one process against the bare `[ToolCallingAdvisor]` chain on
ScriptedChatModel; CPU time of the event-loop thread, median of interleaved blocks."""

from __future__ import annotations

import itertools
import statistics
import sys
from collections.abc import Callable
from typing import Any

import anyio

from advisorchain import Advisor, Chain, ToolCallingAdvisor
from advisorchain.advisors import (
    BudgetAdvisor,
    ModelPrice,
    ToolResultCacheAdvisor,
    ToolRetryAdvisor,
)
from advisorchain.core.events import ResponseCompleted
from advisorchain.core.messages import UserMessage
from advisorchain.providers import FallbackModel, ScriptedChatModel

from . import scenario
from .peers import advisorchain_agent
from .stats import cpu_per_turn

Config = tuple[Callable[[], list[Advisor]], Callable[[], list[Advisor]], dict[str, bool], bool]


def configs() -> dict[str, Config]:
    def none() -> list[Advisor]:
        return []

    price = {"*": ModelPrice(input=2.5, output=10.0, cached_input=1.25)}
    always_expired = itertools.count(0, 10).__next__
    return {
        "bare loop": (none, none, {}, False),
        "+ BudgetAdvisor (all limits, prices)": (
            lambda: [
                BudgetAdvisor(
                    max_input_tokens=10**9,
                    max_output_tokens=10**9,
                    max_total_tokens=10**9,
                    max_model_calls=1000,
                    max_seconds=3600,
                    max_cost=1e6,
                    prices=price,
                )
            ],
            none,
            {},
            False,
        ),
        "+ ToolRetryAdvisor (tools not idempotent)": (
            none,
            lambda: [ToolRetryAdvisor()],
            {},
            False,
        ),
        "+ ToolRetryAdvisor (idempotent, no failure)": (
            none,
            lambda: [ToolRetryAdvisor()],
            {"idempotent": True},
            False,
        ),
        "+ ToolResultCacheAdvisor (every call a hit)": (
            none,
            lambda: [ToolResultCacheAdvisor()],
            {"read_only": True},
            False,
        ),
        "+ ToolResultCacheAdvisor (every call a miss)": (
            none,
            lambda: [ToolResultCacheAdvisor(ttl=1, clock=always_expired)],
            {"read_only": True},
            False,
        ),
        "FallbackModel (primary answers)": (none, none, {}, True),
        "sequential get_time (round 1 split)": (none, none, {"sequential": True}, False),
    }


async def run(turns: int, warmup: int, block: int, path: str) -> dict[str, Any]:
    prompt = (UserMessage(content=scenario.PROMPT),)
    subjects = {}
    for name, (before, after, effects, fallback) in configs().items():
        model = ScriptedChatModel(advisorchain_agent.reply)
        tools = advisorchain_agent.make_tools("async")
        for t in tools:
            for flag, value in effects.items():
                if flag == "sequential" and t.name != "get_time":
                    continue
                setattr(t, flag, value)
        chain = Chain(
            [*before(), ToolCallingAdvisor(), *after()],
            model=FallbackModel([model]) if fallback else model,
            tools=tools,
        )

        if path == "call":

            async def turn(chain: Chain = chain, model: ScriptedChatModel = model) -> str:
                response = await chain.call(prompt)
                model.requests.clear()
                return response.text
        else:

            async def turn(chain: Chain = chain, model: ScriptedChatModel = model) -> str:
                text = ""
                async for event in chain.stream(prompt):
                    if isinstance(event, ResponseCompleted):
                        text = event.response.text
                model.requests.clear()
                return text

        if await turn() != scenario.ANSWER:
            raise AssertionError(f"{name}: wrong answer")
        for _ in range(warmup):
            await turn()
        subjects[name] = turn
    samples = await cpu_per_turn(subjects, turns=turns, block=block)
    base = statistics.median(samples["bare loop"])
    return {
        name: (statistics.median(v) * 1e6, (statistics.median(v) - base) * 1e6)
        for name, v in samples.items()
    }


def main() -> None:
    """`python -m benchmarks.links_issue14 [call|stream]` from the repository root."""
    path = sys.argv[1] if len(sys.argv) > 1 else "call"
    results = anyio.run(run, 2000, 200, 50, path)
    print(f"path: {path}")
    print(f"| {'chain':45} | us/turn | added us |")
    for name, (median, added) in results.items():
        print(f"| {name:45} | {median:7.1f} | {added:+8.1f} |")


if __name__ == "__main__":
    main()
