"""Prefix stability of tool search over scripted multi-turn conversations.

Run: `nice -n 10 .venv/bin/python benchmarks/tool_search/prefix.py [--conversations N]`.
Writes `benchmarks/results/tool_search_prefix.json`.

Conversations: BFCL v4 multi-turn (`multi_turn_base`), 3-5 user turns each, with the
pooled BFCL catalog plus the multi-turn API functions attached (1,408 tools). A scripted
model, per turn: searches with the user's words, calls the turn's reference functions
that it can see, answers. Each model request is rendered the way prompt caches read it
(tool definitions, then the messages, as compact JSON); the prefix stability of a
request is the share of its bytes that equal the start of the previous request of the
conversation (a provider's prompt cache or llama.cpp's KV cache can reuse those). Both
settings of `ToolSearchAdvisor` run the same conversations in one run: `keep="turn"`
(what 0.2 did: found tools reset at each user message) and `keep="conversation"`.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
from pathlib import Path
from typing import Any

import anyio
import bfcl
import multistep

from advisorchain import (
    AssistantMessage,
    Chain,
    ChatRequest,
    Message,
    Tool,
    ToolCall,
    ToolCallingAdvisor,
    UserMessage,
)
from advisorchain.advisors import KeywordIndex, ToolSearchAdvisor
from advisorchain.advisors.tool_search.advisor import Keep
from advisorchain.providers.scripted import ScriptedChatModel

RESULTS = Path(__file__).resolve().parent.parent / "results" / "tool_search_prefix.json"


def render(request: ChatRequest) -> bytes:
    """Tool definitions, then messages: the order of a prompt cache's prefix."""
    tools = [
        {"name": t.name, "description": t.description, "input_schema": t.definition.parameters}
        for t in request.tools
    ]
    parts = [json.dumps(tools, separators=(",", ":"), default=dict)]
    for m in request.messages:
        parts.append(m.model_dump_json(exclude={"provider_data"}))
    return "\n".join(parts).encode()


def common_prefix(a: bytes, b: bytes) -> int:
    n = min(len(a), len(b))
    lo = 0
    # Compare in blocks, then bytes: conversations are long.
    while lo + 4096 <= n and a[lo : lo + 4096] == b[lo : lo + 4096]:
        lo += 4096
    while lo < n and a[lo] == b[lo]:
        lo += 1
    return lo


def script_for(expected_by_turn: list[frozenset[str]]) -> Any:
    def script(request: ChatRequest) -> AssistantMessage | str:
        users = [i for i, m in enumerate(request.messages) if isinstance(m, UserMessage)]
        turn = len(users) - 1
        since = request.messages[users[-1] + 1 :]
        if not since:
            text = request.messages[users[-1]].text
            call = ToolCall.from_arguments("search_tools", {"query": text})
            return AssistantMessage(tool_calls=(call,))
        if len(since) == 2:
            visible = {t.name for t in request.tools}
            wanted = sorted(expected_by_turn[turn] & visible)
            if wanted:
                return AssistantMessage(
                    tool_calls=tuple(ToolCall.from_arguments(n, {}) for n in wanted)
                )
        return f"done with turn {turn + 1}"

    return script


async def converse(
    keep: Keep, max_found: int | None, catalog: list[Tool], turns: list[tuple[str, frozenset[str]]]
) -> list[ChatRequest]:
    model = ScriptedChatModel(script_for([e for _, e in turns]))
    advisor = ToolSearchAdvisor(KeywordIndex(), keep=keep, max_found=max_found)
    chain = Chain([ToolCallingAdvisor(), advisor], model=model, tools=catalog)
    messages: list[Message] = []
    for text, _ in turns:
        messages.append(UserMessage(content=text))
        response = await chain.call(messages)
        messages.extend(response.messages)
    return list(model.requests)


def load_conversations(limit: int) -> dict[str, list[tuple[str, frozenset[str]]]]:
    """Whole conversations: every user turn, with the reference functions of each."""
    conversations: dict[str, list[tuple[str, frozenset[str]]]] = {}
    data = bfcl.fetch()
    answers = {}
    with open(data / "possible_answer" / "BFCL_v4_multi_turn_base.json", encoding="utf-8") as f:
        for entry in map(json.loads, f):
            answers[entry["id"]] = entry["ground_truth"]
    with open(data / "BFCL_v4_multi_turn_base.json", encoding="utf-8") as f:
        for entry in map(json.loads, f):
            turns = []
            for question, truth in zip(entry["question"], answers[entry["id"]], strict=False):
                text = "\n".join(m["content"] for m in question if m["role"] == "user")
                if text:
                    turns.append((text, frozenset(c.split("(", 1)[0] for c in truth)))
            if len(turns) >= 3:
                conversations[entry["id"]] = turns
            if len(conversations) >= limit:
                break
    return conversations


async def main(args: argparse.Namespace) -> dict[str, Any]:
    pool, _ = bfcl.load()
    mt_tools, requests = multistep.bfcl_multi_turn()
    definitions = list({d.name: d for d in [*mt_tools, *pool]}.values())

    def ok(arguments: dict[str, Any], context: Any) -> str:
        return "ok"

    catalog = [Tool(d.name, d.description, d.parameters, ok) for d in definitions]
    conversations = load_conversations(args.conversations)
    settings: dict[str, tuple[Keep, int | None]] = {
        'keep="turn" (0.2 behaviour)': ("turn", None),
        'keep="conversation", max_found=32 (default)': ("conversation", 32),
        'keep="conversation", max_found=8': ("conversation", 8),
    }
    out: dict[str, Any] = {"conversations": len(conversations), "tools": len(catalog)}
    for label, (keep, cap) in settings.items():
        stability: list[float] = []
        tools_shown: list[int] = []
        first_of_turn: list[float] = []
        new_bytes, reached = 0, 0
        wanted = 0
        for turns in conversations.values():
            requests = await converse(keep, cap, catalog, turns)
            rendered = [render(r) for r in requests]
            for i in range(1, len(rendered)):
                shared = common_prefix(rendered[i - 1], rendered[i])
                stability.append(shared / len(rendered[i]))
                new_bytes += len(rendered[i]) - shared
                users = sum(isinstance(m, UserMessage) for m in requests[i].messages)
                users_before = sum(isinstance(m, UserMessage) for m in requests[i - 1].messages)
                if users != users_before:
                    first_of_turn.append(shared / len(rendered[i]))
            tools_shown.extend(len(r.tools) for r in requests)
            calls = [
                c.name
                for r in requests[-1:]
                for m in r.messages
                if isinstance(m, AssistantMessage)
                for c in m.tool_calls
                if c.name != "search_tools"
            ]
            reached += len(calls)
            wanted += sum(len(e) for _, e in turns)
        out[label] = {
            "requests": len(stability) + len(conversations),
            "prefix_stability_mean": round(statistics.fmean(stability), 4),
            "prefix_stability_first_request_of_a_turn": round(statistics.fmean(first_of_turn), 4),
            "uncached_bytes_per_request": round(new_bytes / len(stability)),
            "tools_shown_mean": round(statistics.fmean(tools_shown), 1),
            "reference_calls_made": round(reached / wanted, 3),
        }
        print(label, out[label])
    out["load_average"] = os.getloadavg()[0]
    return out


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--conversations", type=int, default=50)
    outcome = anyio.run(main, parser.parse_args())
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(outcome, indent=2) + "\n")
    print(f"written: {RESULTS}")
