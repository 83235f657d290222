"""What each advisorchain link adds to the bare turn: logging, tracing, approval, tool search.

The overhead scenario's turn through `[link, ToolCallingAdvisor]` (tool search: after the
loop) for each link alone, and through all of them, against the bare loop; all chains
interleaved in one process, CPU time of the event-loop thread per turn. Logging emits at
INFO into a `NullHandler` (records are built), tracing uses OpenTelemetry's no-op tracer,
approval asks a `CallbackApprover` that approves every call (both tools require approval
only in the approval chains), tool search has two tools (below its threshold).

The 0.2 links are measured in the same run, each alone around the loop where README's table
places it: `StructuredOutputAdvisor` (the final answer scripted as the JSON it validates),
`RedactionAdvisor()` (emails both ways), `BudgetAdvisor` (token and call limits never
reached), `ToolRetryAdvisor` and `ToolResultCacheAdvisor` (both tools read-only; the cache
cleared every turn, so each turn misses and stores).
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Awaitable, Callable
from typing import Any

from pydantic import BaseModel

from advisorchain import Advisor, Chain, ChatRequest, ToolCall, ToolCallingAdvisor
from advisorchain.advisors import (
    BudgetAdvisor,
    RedactionAdvisor,
    StructuredOutputAdvisor,
    ToolResultCacheAdvisor,
    ToolRetryAdvisor,
)
from advisorchain.core.messages import UserMessage
from advisorchain.providers import ScriptedChatModel

from . import scenario
from .peers import advisorchain_agent
from .peers.errors import Unavailable
from .stats import cpu_per_turn, table


class Answer(BaseModel):
    """The scenario's answer, as the structured-output chain asks for it."""

    answer: str


def json_reply(request: ChatRequest) -> list[ToolCall] | str:
    """The scenario's script, with the final answer as `Answer` JSON."""
    step = advisorchain_agent.reply(request)
    return json.dumps({"answer": step}) if isinstance(step, str) else step


def later_links() -> dict[str, tuple[list[Advisor], list[Advisor], bool]]:
    """The 0.2 links: (before the loop, after it, tools read-only), one each."""
    return {
        "+ StructuredOutputAdvisor": ([StructuredOutputAdvisor(Answer, mode="prompt")], [], False),
        "+ RedactionAdvisor": ([RedactionAdvisor()], [], False),
        "+ BudgetAdvisor": (
            [BudgetAdvisor(max_total_tokens=10**9, max_model_calls=100)],
            [],
            False,
        ),
        "+ ToolRetryAdvisor": ([], [ToolRetryAdvisor()], True),
        "+ ToolResultCacheAdvisor": ([], [ToolResultCacheAdvisor()], True),
    }


Turn = Callable[[], Awaitable[str]]


def link_turn(
    before: list[Advisor],
    after: list[Advisor],
    *,
    approval: bool = False,
    read_only: bool = False,
    structured: bool = False,
) -> Turn:
    """One scenario turn through `[*before, ToolCallingAdvisor(), *after]`: a fresh chain
    and scripted model, whose recorded requests (and any result cache) are cleared after
    each turn; `structured` scripts the answer as `Answer` JSON and returns its field."""
    prompt = (UserMessage(content=scenario.PROMPT),)
    model = ScriptedChatModel(json_reply if structured else advisorchain_agent.reply)
    caches = [a for a in after if isinstance(a, ToolResultCacheAdvisor)]
    chain = Chain(
        [*before, ToolCallingAdvisor(), *after],
        model=model,
        tools=advisorchain_agent.make_tools(
            "async", requires_approval=approval, read_only=read_only
        ),
    )

    async def turn() -> str:
        response = await chain.call(prompt)
        model.requests.clear()
        for cache in caches:
            cache.clear()
        return response.output_as(Answer).answer if structured else response.text

    return turn


async def run(*, turns: int = 1000, warmup: int = 200, block: int = 50) -> dict[str, Any]:
    """CPU median per turn for each configuration, and what it adds to the bare loop."""
    try:
        outside, inside = advisorchain_agent.links()
    except Unavailable as exc:
        return {"results": {}, "skipped": str(exc)}
    logging_link, tracing_link, approval_link = outside
    # (before the loop, after it, tools require approval, tools read-only)
    configs: dict[str, tuple[list[Advisor], list[Advisor], bool, bool]] = {
        "bare loop": ([], [], False, False),
        "+ LoggingAdvisor": ([logging_link], [], False, False),
        "+ TracingAdvisor": ([tracing_link], [], False, False),
        "+ ApprovalAdvisor": ([approval_link], [], True, False),
        "+ ToolSearchAdvisor": ([], inside, False, False),
        "all four": (outside, inside, True, False),
    }
    for name, (before, after, read_only) in later_links().items():
        configs[name] = (before, after, False, read_only)
    subjects = {}
    for name, (before, after, approval, read_only) in configs.items():
        turn = link_turn(
            before,
            after,
            approval=approval,
            read_only=read_only,
            structured=name == "+ StructuredOutputAdvisor",
        )
        if await turn() != scenario.ANSWER:
            raise AssertionError(f"{name}: wrong answer")
        for _ in range(warmup):
            await turn()
        subjects[name] = turn
    samples = await cpu_per_turn(subjects, turns=turns, block=block)
    base = statistics.median(samples["bare loop"])
    results = {}
    for name, values in samples.items():
        median = statistics.median(values)
        results[name] = {"cpu_median_us": median * 1e6, "added_us": (median - base) * 1e6}
    return {"results": results, "skipped": None}


def render(report: dict[str, Any]) -> str:
    """The report as a Markdown table."""
    if report["skipped"]:
        return f"_skipped: {report['skipped']}_"
    rows = [
        [name, r["cpu_median_us"], f"{r['added_us']:+.1f}"] for name, r in report["results"].items()
    ]
    return table(["advisorchain chain", "CPU median us per turn", "added us"], rows)
