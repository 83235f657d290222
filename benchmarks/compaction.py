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

import anyio

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


FACT_SETS: dict[str, list[tuple[str, str, tuple[str, ...]]]] = {
    # A: the set the summarizer's prompt and the settings were chosen on
    "A": [
        (f"The code of item {item} is {code}.", f"What is the code of item {item}?", (code,))
        for item, code in [
            (3, "K-6305"),
            (11, "K-3471"),
            (17, "K-7468"),
            (24, "K-1791"),
            (30, "K-2186"),
            (38, "K-9779"),
            (45, "K-2542"),
            (52, "K-6991"),
        ]
    ],
    # B: held out, facts of other shapes; the numbers reported are on this set
    "B": [
        ("My dentist is Dr. Okafor.", "What is the name of my dentist?", ("Okafor",)),
        (
            "The wifi password at the cabin is maple-73.",
            "What is the wifi password at the cabin?",
            ("maple-73",),
        ),
        (
            "Our flight to Lisbon leaves at 06:40.",
            "At what time does our flight to Lisbon leave?",
            ("06:40", "6:40"),
        ),
        (
            "The budget for the kitchen is 18,500 euros.",
            "What is the budget for the kitchen?",
            ("18,500", "18500", "18 500"),
        ),
        ("My sister's name is Ines.", "What is my sister's name?", ("Ines",)),
        ("The storage unit number is 4417.", "What is the storage unit number?", ("4417",)),
        ("The plumber comes on Thursday.", "On which day does the plumber come?", ("Thursday",)),
        (
            "My library card number is LC-20931.",
            "What is my library card number?",
            ("LC-20931",),
        ),
    ],
}
"""Facts stated early in the recall conversation: (statement, question, right answers)."""

_SMALL_TALK = (
    "Thanks, that helps.",
    "Let's go on with the planning.",
    "Can you keep that in mind?",
    "Good. What is next on our list?",
    "I will check later today.",
    "Fine, continue.",
)


def recall_prompts(turns: int, fact_set: str, *, listings: bool = True) -> list[str]:
    """The user's messages: a fact every fifth turn from turn 2 (all in the first 40
    turns for 8 facts), a shelf listing (a tool call, ~600 characters of result) every
    fifth turn from turn 4, small talk otherwise."""
    known = FACT_SETS[fact_set]
    prompts: list[str] = []
    for turn in range(turns):
        index = (turn - 2) // 5
        if turn % 5 == 2 and index < len(known):
            prompts.append(known[index][0])
        elif turn % 5 == 4 and listings:
            prompts.append(f"Please list shelf {turn}.")
        else:
            prompts.append(_SMALL_TALK[turn % len(_SMALL_TALK)])
    return prompts


async def run_recall(
    turns: int,
    fact_set: str,
    *,
    compaction: bool,
    trigger_tokens: int = 5000,
    keep_turns: int = 10,
    n_ctx: int = 16384,
    window: int | None = None,
    model: ChatModel | None = None,
    trigger: Trigger | None = None,
    listings: bool = True,
) -> dict[str, Any]:
    """A `turns`-turn conversation stating `fact_set`'s facts early: the turns are
    scripted (the user's messages, the assistant's answers and tool calls); the local
    model writes the summaries (with compaction) and answers one question per fact at
    the end, each on a copy of the conversation. Right: the answer holds the fact.

    With compaction, the questions are asked through the same compaction settings with
    a trigger that no longer fires: the model reads the conversation's last summary and
    the messages after it, as the next turn would. Without, the model reads the whole
    log, or its last `window` messages (`MemoryAdvisor(max_messages=window)`, for a
    conversation longer than the model's context)."""
    from advisorchain.core.options import ChatOptions
    from advisorchain.providers.llamacpp import LlamaCppChatModel

    local = model or LlamaCppChatModel(n_ctx=n_ctx, model_name="local-0.5b")
    store = InMemoryChatMemoryStore()
    summarizer = _Recording(local)
    settings: dict[str, Any] = {
        "keep": Keep(turns=keep_turns),
        "store": store,
        "max_summary_tokens": 256,
        "summarizer_options": ChatOptions(temperature=0),
    }
    advisors: list[Any] = [MemoryAdvisor(store), ToolCallingAdvisor()]
    if compaction:
        advisors.append(
            CompactionAdvisor(
                summarizer, trigger=trigger or Trigger(tokens=trigger_tokens), **settings
            )
        )
    scripted = _scripted_model()
    chain = Chain(advisors, model=scripted, tools=[_inventory_tool()])
    started = time.perf_counter()
    per_turn: list[int] = []
    for turn, prompt in enumerate(recall_prompts(turns, fact_set, listings=listings)):
        before = len(scripted.requests)
        await chain.call(prompt, conversation_id="recall")
        per_turn.append(sum(_estimate(r.messages) for r in scripted.requests[before:]))
        if turn % 20 == 19:
            print(f"recall {fact_set} compaction={compaction}: turn {turn + 1}", flush=True)
    turns_seconds = time.perf_counter() - started
    asking: list[Any] = [MemoryAdvisor(store, max_messages=None if compaction else window)]
    if compaction:
        asking.append(CompactionAdvisor(summarizer, trigger=Trigger(tokens=10**9), **settings))
    questions = Chain(asking, model=local)
    answers: list[dict[str, Any]] = []
    log = await store.load("recall")
    boundary = await store.load_boundary("recall")
    started = time.perf_counter()
    for n, (_, question, right) in enumerate(FACT_SETS[fact_set]):
        copy = f"recall-q{n}"
        await store.append(copy, log)
        if boundary is not None:
            await store.save_boundary(copy, boundary)
        before = len(summarizer.inner_requests)
        response = await questions.call(
            f"{question} Answer in a few words.",
            conversation_id=copy,
            max_tokens=16,
            temperature=0,
        )
        assert len(summarizer.inner_requests) == before  # no new summary for a question
        ok = any(r.lower() in response.text.lower() for r in right)
        answers.append({"question": question, "answer": response.text, "right": ok})
    return {
        "fact_set": fact_set,
        "compaction": compaction,
        "turns": turns,
        "asked": len(answers),
        "right": sum(a["right"] for a in answers),
        "answers": answers,
        "input_tokens_per_turn": per_turn,
        "prefix": prefix_stability(scripted.requests),
        "summaries": summarizer.summaries,
        "summarizer_input_tokens": summarizer.input_tokens,
        "summary": boundary.summary if boundary is not None else None,
        "summarized_messages": boundary.covered if boundary is not None else 0,
        "logged_messages": len(log),
        "log_tokens_estimate": _estimate(log),
        "window": None if compaction else window,
        "turns_seconds": round(turns_seconds, 1),
        "questions_seconds": round(time.perf_counter() - started, 1),
    }


class _Recording:
    """A summarizer that keeps what it was asked and what it answered."""

    def __init__(self, inner: ChatModel) -> None:
        self.inner = inner
        self.model_name = getattr(inner, "model_name", "local")
        self.inner_requests: list[ChatRequest] = []
        self.summaries: list[str] = []
        self.input_tokens = 0

    async def call(self, request: ChatRequest) -> ChatResponse:
        self.inner_requests.append(request)
        response = await self.inner.call(request)
        self.summaries.append(response.text)
        self.input_tokens += response.usage.input_tokens
        print(f"summary {len(self.summaries)}: {response.usage}", flush=True)
        return response

    def stream(self, request: ChatRequest) -> Any:
        return self.inner.stream(request)


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
    recalls = [report[n] for n in ("recall_without", "recall_with") if n in report]
    if recalls:
        lines += [
            "",
            "| recall run | turns | facts right | input tokens (total) | last turn "
            "| cached-prefix share | prefix breaks | summaries |",
            "|---|---|---|---|---|---|---|---|",
        ]
    for entry in recalls:
        prefix = entry["prefix"]
        per_turn = entry["input_tokens_per_turn"]
        lines.append(
            f"| set {entry['fact_set']}, {'with' if entry['compaction'] else 'without'} "
            f"compaction{_window(entry)} | {entry['turns']} | {entry['right']} of {entry['asked']} "
            f"| {sum(per_turn):,} | {per_turn[-1]:,} | {prefix['mean_cached_share']:.3f} "
            f"| {prefix['prefix_breaks']} | {len(entry['summaries'])} |"
        )
    return "\n".join(lines)


def _window(entry: dict[str, Any]) -> str:
    window = entry.get("window")
    return f" (last {window} messages)" if window else ""


async def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--recall", choices=["none", "local"], default="none")
    parser.add_argument("--recall-turns", type=int, default=200)
    parser.add_argument("--fact-set", choices=sorted(FACT_SETS), default="B")
    parser.add_argument("--trigger-tokens", type=int, default=5000)
    parser.add_argument("--keep-turns", type=int, default=10)
    parser.add_argument("--no-baseline", action="store_true", help="recall with compaction only")
    parser.add_argument(
        "--window",
        type=int,
        default=60,
        help="without compaction, the questions see the last WINDOW messages (0: all)",
    )
    parser.add_argument("--baseline-only", action="store_true")
    parser.add_argument("--threads", type=int, help="llama.cpp threads (default: its own)")
    parser.add_argument("--json", help="write the whole report (answers, summaries) here")
    args = parser.parse_args(argv)
    report: dict[str, Any] = {
        "without": await run_scripted(args.turns, compaction=False),
        "with": await run_scripted(args.turns, compaction=True),
    }
    if args.recall == "local":
        from advisorchain.providers.llamacpp import LlamaCppChatModel

        local = LlamaCppChatModel(n_ctx=16384, n_threads=args.threads, model_name="local-0.5b")
        settings = {"trigger_tokens": args.trigger_tokens, "keep_turns": args.keep_turns}
        if not args.baseline_only:
            report["recall_with"] = await run_recall(
                args.recall_turns, args.fact_set, compaction=True, model=local, **settings
            )
            print(json.dumps(report["recall_with"], default=str), flush=True)
        if not args.no_baseline:
            report["recall_without"] = await run_recall(
                args.recall_turns,
                args.fact_set,
                compaction=False,
                model=local,
                window=args.window or None,
                **settings,
            )
    if args.json:
        text = json.dumps(report, indent=1, default=str)
        await anyio.Path(args.json).write_text(text, encoding="utf-8")
    print(render(report))
    return report


if __name__ == "__main__":
    asyncio.run(main())
