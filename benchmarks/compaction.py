"""Compaction over a long conversation: input tokens per turn with and without
`CompactionAdvisor`, how stable the request prefix stays (what a provider's prompt cache
can reuse), and, with the local model, how many facts of the early turns it still answers.

    python -m benchmarks.compaction                       # 200 scripted turns
    python -m benchmarks.compaction --recall local        # + facts recall by the local model
    python -m benchmarks.compaction --turns 60 --recall local --facts 10

The scripted conversation: every turn the user states one fact ("The code of item 7 is
K-4821."); every fifth turn the model calls a tool whose result is about 600 characters,
then answers. The model is `ScriptedChatModel` (its usage is four characters a token).
With compaction, the summarizer is extractive and scripted too (it keeps the fact
sentences it reads), so the numbers measure the mechanism, not a model's writing.

Prefix stability: for each model request after the first, the share of its characters
that repeat the previous request from its start (a provider caches a prefix), and the
number of requests whose messages do not start with the previous request's messages.

Recall (`--recall local`): a shorter conversation with the same facts through the local
model (chat model and summarizer), then one question per early fact; an answer is right
when it holds the fact's code.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import time
from collections.abc import Sequence
from typing import Any

from advisorchain import Chain, MemoryAdvisor, ToolCallingAdvisor
from advisorchain.advisors.compaction import ClearToolResults, CompactionAdvisor, Keep, Trigger
from advisorchain.advisors.memory import InMemoryChatMemoryStore
from advisorchain.core.messages import AssistantMessage, Message, ToolCall
from advisorchain.core.model import ChatModel
from advisorchain.core.request import ChatRequest
from advisorchain.core.response import ChatResponse
from advisorchain.core.tools import Tool
from advisorchain.core.usage import Usage
from advisorchain.providers import ScriptedChatModel

__all__ = ["facts", "prefix_stability", "render", "run_recall", "run_scripted"]


def facts(count: int, seed: int = 7) -> list[tuple[int, str]]:
    """`count` (item, code) facts, the same for every run."""
    rng = random.Random(seed)
    return [(i, f"K-{rng.randint(1000, 9999)}") for i in range(count)]


def _inventory_tool() -> Tool:
    async def inventory(arguments: dict[str, Any], context: Any) -> str:
        shelf = arguments.get("shelf", 0)
        rows = "; ".join(
            f"bin {shelf}-{n}: {n * 3} units of part P{shelf}{n:02d}" for n in range(24)
        )
        return f"Inventory of shelf {shelf}: {rows}."

    return Tool(
        "inventory",
        "List the inventory of a shelf.",
        {"type": "object", "properties": {"shelf": {"type": "integer"}}},
        inventory,
    )


def _scripted_model() -> ScriptedChatModel:
    def answer(request: ChatRequest) -> Any:
        last = request.messages[-1]
        if last.role == "user" and "shelf" in last.text:
            shelf = last.text.rsplit(" ", 1)[-1].rstrip(".")
            return ToolCall.from_arguments("inventory", {"shelf": int(shelf)})
        if last.role == "tool":
            return "The shelf is listed above; noted."
        return "Noted."

    return ScriptedChatModel(answer, model_name="scripted")


def _extractive_summarizer() -> ScriptedChatModel:
    def summarize(request: ChatRequest) -> ChatResponse:
        text = request.messages[-1].text
        kept = [line.strip() for line in text.replace("[user] ", "\n").splitlines()]
        sentences = [s for s in kept if s.startswith("The code of item")]
        summary = " ".join(dict.fromkeys(sentences)) or "Nothing to keep."
        return ChatResponse(
            message=AssistantMessage(content=summary),
            usage=Usage(input_tokens=len(text) // 4, output_tokens=len(summary) // 4, requests=1),
        )

    return ScriptedChatModel(summarize, model_name="extractive")


def _prompt(turn: int, fact: tuple[int, str]) -> str:
    item, code = fact
    text = f"The code of item {item} is {code}."
    if turn % 5 == 4:
        text += f" Also list shelf {turn}."
    return text


def _text_of(request: ChatRequest) -> list[str]:
    return [json.dumps(m.model_dump(mode="json"), sort_keys=True) for m in request.messages]


def prefix_stability(requests: Sequence[ChatRequest]) -> dict[str, float]:
    """Mean share of each request's characters that repeat the previous request from its
    start, and how many requests do not extend the previous one message for message."""
    shares: list[float] = []
    breaks = 0
    previous: list[str] | None = None
    for request in requests:
        current = _text_of(request)
        if previous is not None:
            common = 0
            for a, b in zip(previous, current, strict=False):
                if a != b:
                    break
                common += len(a)
            shares.append(common / max(1, sum(map(len, current))))
            if current[: len(previous)] != previous:
                breaks += 1
        previous = current
    return {
        "mean_cached_share": round(statistics.fmean(shares), 3) if shares else 0.0,
        "prefix_breaks": breaks,
        "requests": len(requests),
    }


async def run_scripted(turns: int, *, compaction: bool) -> dict[str, Any]:
    """One conversation of `turns` turns; its tokens per turn and prefix stability."""
    model = _scripted_model()
    store = InMemoryChatMemoryStore()
    advisors: list[Any] = [MemoryAdvisor(store), ToolCallingAdvisor()]
    summarizer = _extractive_summarizer()
    if compaction:
        advisors.append(
            CompactionAdvisor(
                summarizer,
                trigger=Trigger(tokens=3000),
                keep=Keep(turns=6),
                store=store,
                clear_tool_results=ClearToolResults(
                    trigger_tokens=2000, keep=1, clear_at_least=600
                ),
            )
        )
    chain = Chain(advisors, model=model, tools=[_inventory_tool()])
    per_turn: list[int] = []
    started = time.perf_counter()
    for turn, fact in enumerate(facts(turns)):
        before = len(model.requests)
        await chain.call(_prompt(turn, fact), conversation_id="bench")
        sent = model.requests[before:]
        per_turn.append(sum(_estimate(r.messages) for r in sent))
    elapsed = time.perf_counter() - started
    return {
        "compaction": compaction,
        "turns": turns,
        "input_tokens_per_turn": per_turn,
        "input_tokens_total": sum(per_turn),
        "input_tokens_last_turn": per_turn[-1],
        "input_tokens_max_turn": max(per_turn),
        "summarizer_calls": len(summarizer.requests),
        "summarizer_input_tokens": sum(_estimate(r.messages) for r in summarizer.requests),
        "prefix": prefix_stability(model.requests),
        "logged_messages": len(await store.load("bench")),
        "seconds": round(elapsed, 2),
    }


def _estimate(messages: Sequence[Message]) -> int:
    from advisorchain.advisors.compaction import estimate_tokens

    return estimate_tokens(messages)


async def run_recall(turns: int, asked: int, *, compaction: bool) -> dict[str, Any]:
    """The facts conversation through the local model; then `asked` questions on the
    earliest facts. Right: the answer holds the fact's code."""
    from advisorchain.providers.llamacpp import LlamaCppChatModel
    from advisorchain.providers.local.weights import ensure_local_model

    model: ChatModel = LlamaCppChatModel(ensure_local_model())
    store = InMemoryChatMemoryStore()
    advisors: list[Any] = [MemoryAdvisor(store)]
    if compaction:
        advisors.append(
            CompactionAdvisor(
                model,
                trigger=Trigger(tokens=400),
                keep=Keep(turns=4),
                store=store,
                max_summary_tokens=300,
            )
        )
    chain = Chain(advisors, model=model)
    known = facts(turns)
    for turn, (item, code) in enumerate(known):
        print(f"recall (compaction={compaction}): turn {turn + 1} of {turns}", flush=True)
        await chain.call(
            f"Remember: the code of item {item} is {code}. Reply with OK.",
            conversation_id="recall",
            max_tokens=8,
            temperature=0,
        )
    right = 0
    answers: list[dict[str, Any]] = []
    for item, code in known[:asked]:
        response = await _ask(chain, item)
        ok = code in response
        right += ok
        answers.append({"item": item, "code": code, "answer": response, "right": ok})
    boundary = await store.load_boundary("recall")
    return {
        "compaction": compaction,
        "turns": turns,
        "asked": asked,
        "right": right,
        "answers": answers,
        "summary": boundary.summary if boundary is not None else None,
        "summarized_messages": boundary.covered if boundary is not None else 0,
    }


async def _ask(chain: Chain, item: int) -> str:
    # Each question is asked on a copy of the conversation (its log), so one question's
    # answer does not help the next.
    memory = chain.advisors[0]
    assert isinstance(memory, MemoryAdvisor)
    store = memory.store
    log = await store.load("recall")
    copy = f"recall-q{item}"
    await store.clear(copy)
    await store.append(copy, log)
    assert isinstance(store, InMemoryChatMemoryStore)
    boundary = await store.load_boundary("recall")
    if boundary is not None:
        await store.save_boundary(copy, boundary)
    response = await chain.call(
        f"What is the code of item {item}? Answer with the code only.",
        conversation_id=copy,
        max_tokens=12,
        temperature=0,
    )
    return response.text


def render(report: dict[str, Any]) -> str:
    """The report as Markdown."""
    lines = [
        "| run | turns | input tokens (total) | last turn | max turn | summarizer calls "
        "| summarizer input | cached-prefix share | prefix breaks |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name in ("without", "with"):
        entry = report[name]
        prefix = entry["prefix"]
        lines.append(
            f"| {name} compaction | {entry['turns']} | {entry['input_tokens_total']:,} "
            f"| {entry['input_tokens_last_turn']:,} | {entry['input_tokens_max_turn']:,} "
            f"| {entry['summarizer_calls']} | {entry['summarizer_input_tokens']:,} "
            f"| {prefix['mean_cached_share']:.3f} | {prefix['prefix_breaks']} |"
        )
    for name in ("recall_without", "recall_with"):
        if name in report:
            entry = report[name]
            lines.append(
                f"\nrecall {name.removeprefix('recall_')} compaction: {entry['right']} of "
                f"{entry['asked']} early facts right after {entry['turns']} turns"
            )
    return "\n".join(lines)


async def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--recall", choices=["none", "local"], default="none")
    parser.add_argument("--recall-turns", type=int, default=30)
    parser.add_argument("--facts", type=int, default=8)
    args = parser.parse_args(argv)
    report: dict[str, Any] = {
        "without": await run_scripted(args.turns, compaction=False),
        "with": await run_scripted(args.turns, compaction=True),
    }
    if args.recall == "local":
        report["recall_without"] = await run_recall(args.recall_turns, args.facts, compaction=False)
        report["recall_with"] = await run_recall(args.recall_turns, args.facts, compaction=True)
    print(render(report))
    return report


if __name__ == "__main__":
    asyncio.run(main())
