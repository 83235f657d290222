"""Prompt caching: the share of input tokens a multi-turn tool conversation gets from the cache.

A scripted support conversation (a long system prompt, eight tools, six user turns, each
with a tool round, two of them with parallel calls) runs through
`Chain([ToolCallingAdvisor()])` around `AnthropicChatModel` (with its automatic
`cache_control` breakpoints, and with `prompt_cache=False`), `OpenAIChatModel`,
`OpenAIResponsesChatModel` and `GeminiChatModel`. The server is simulated in-process
(`httpx.MockTransport`), answers in each API's own wire format, and applies each
provider's documented caching rules to the requests it receives:

- Anthropic: a request's prefix up to a block marked `cache_control` is written to the
  cache (if at least 1,024 tokens); at each mark the longest prefix already cached, at the
  mark or up to 20 blocks before it, is read. Reads are billed at 0.1x the input price,
  writes (five-minute lifetime) at 1.25x.
- OpenAI, Chat Completions and Responses alike: automatic; the longest prefix shared with
  an earlier request is read from the cache if at least 1,024 tokens, in steps of 128
  tokens. The Responses prefix is the tools, then the `input` items (the system prompt is
  the first, a `system` message); reported as `input_tokens_details.cached_tokens`.
- Gemini: implicit caching (Gemini 2.5 and newer): the longest prefix shared with an
  earlier request is read if at least 2,048 tokens (the documented minimum of Gemini 2.5
  Flash); reported as `usageMetadata.cachedContentTokenCount`, part of
  `promptTokenCount`. The order in which Gemini lays out `systemInstruction`, `tools` and
  `contents` in its prompt is not documented; the simulation takes that order.

Tokens are estimated as a quarter of each block's JSON length. The usage the simulated
server reports goes through each provider's own usage mapping, and the totals below are
summed from `response.usage` (`cached_input_tokens`, `cache_write_tokens`).

Run: `python -m benchmarks.prompt_cache` (results in benchmarks/README.md, "Prompt caching").
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio
import httpx

from advisorchain import (
    AssistantMessage,
    Chain,
    ChatModel,
    Message,
    SystemMessage,
    ToolCallingAdvisor,
    Usage,
    UserMessage,
    tool,
)

from .stats import table

MIN_CACHEABLE = 1024
LOOKBACK_BLOCKS = 20
OPENAI_STEP = 128
GEMINI_MIN_CACHEABLE = 2048

SYSTEM = "You are the support assistant of Northwind Outfitters. " + " ".join(
    f"Rule {n}: when a customer asks about orders, returns, stock or shipping, look the facts "
    f"up with the tools before answering, quote order numbers exactly, never promise dates "
    f"the tools did not give, and keep answers under five sentences (policy {n}/40)."
    for n in range(1, 41)
)
QUESTIONS = (
    "Where is my order A-1001?",
    "Can I return the boots from order A-1001?",
    "Is the blue rain jacket in stock in size M?",
    "How long does shipping to Lyon take, and what does it cost?",
    "Please check orders A-1002 and A-1003 for me.",
    "Thanks. Can you summarise everything we found?",
)


def _facts(topic: str, key: str) -> str:
    return f"{topic} for {key}: " + "; ".join(
        f"record {i}: status nominal, updated at 09:{i:02d}, warehouse WH-{i % 3}"
        for i in range(12)
    )


@tool
def get_order(order_id: str) -> str:
    """Look up one order by id: items, status, carrier, tracking number, dates."""
    return _facts("Order", order_id)


@tool
def get_returns_policy(order_id: str) -> str:
    """The return window and conditions that apply to one order."""
    return _facts("Returns", order_id)


@tool
def check_stock(product: str, size: str) -> str:
    """Units in stock for a product in a size, per warehouse."""
    return _facts("Stock", f"{product} {size}")


@tool
def shipping_quote(city: str) -> str:
    """Shipping time and price to a city."""
    return _facts("Shipping", city)


@tool
def get_customer(customer_id: str) -> str:
    """A customer's profile: name, tier, addresses."""
    return _facts("Customer", customer_id)


@tool
def list_orders(customer_id: str) -> str:
    """A customer's orders, newest first."""
    return _facts("Orders", customer_id)


@tool
def open_ticket(subject: str) -> str:
    """Open a support ticket for a human agent."""
    return _facts("Ticket", subject)


@tool
def store_hours(city: str) -> str:
    """Opening hours of the store in a city."""
    return _facts("Hours", city)


TOOLS = [
    get_order,
    get_returns_policy,
    check_stock,
    shipping_quote,
    get_customer,
    list_orders,
    open_ticket,
    store_hours,
]
PLAN: tuple[tuple[tuple[str, dict[str, str]], ...], ...] = (
    (("get_order", {"order_id": "A-1001"}),),
    (("get_returns_policy", {"order_id": "A-1001"}),),
    (("check_stock", {"product": "blue rain jacket", "size": "M"}),),
    (("shipping_quote", {"city": "Lyon"}),),
    (("get_order", {"order_id": "A-1002"}), ("get_order", {"order_id": "A-1003"})),
    (("list_orders", {"customer_id": "C-77"}), ("get_customer", {"customer_id": "C-77"})),
)


def _tokens(block: Any) -> int:
    if isinstance(block, dict):
        block = {k: v for k, v in block.items() if k != "cache_control"}
    return max(1, len(json.dumps(block, ensure_ascii=False, sort_keys=True)) // 4)


def _prefix_hashes(blocks: Sequence[Any]) -> list[str]:
    digest = hashlib.sha256()
    hashes = []
    for block in blocks:
        if isinstance(block, dict):
            block = {k: v for k, v in block.items() if k != "cache_control"}
        digest.update(json.dumps(block, ensure_ascii=False, sort_keys=True).encode())
        hashes.append(digest.copy().hexdigest())
    return hashes


@dataclass
class _Simulation:
    """The simulated provider: its cache and the turn logic of the scripted model."""

    cache: dict[str, int] = field(default_factory=dict)  # prefix hash -> prefix tokens
    seen: list[list[str]] = field(default_factory=list)  # OpenAI: every prompt's hashes
    calls: int = 0

    def anthropic_usage(self, body: dict[str, Any]) -> dict[str, int]:
        blocks: list[Any] = list(body.get("tools") or [])
        system = body.get("system")
        blocks += [system] if isinstance(system, str) else list(system or [])
        marks: list[int] = [i for i, b in enumerate(blocks) if "cache_control" in b]
        for message in body["messages"]:
            content = message["content"]
            for block in [content] if isinstance(content, str) else content:
                if isinstance(block, dict) and "cache_control" in block:
                    marks.append(len(blocks))
                blocks.append({"role": message["role"], "block": block})
        sizes = [_tokens(b) for b in blocks]
        prefix = [sum(sizes[: i + 1]) for i in range(len(sizes))]
        hashes = _prefix_hashes(blocks)
        read = 0
        for mark in marks:
            for position in range(mark, max(-1, mark - LOOKBACK_BLOCKS - 1), -1):
                if hashes[position] in self.cache:
                    read = max(read, prefix[position])
                    break
        written = 0
        for mark in marks:
            if prefix[mark] >= MIN_CACHEABLE and hashes[mark] not in self.cache:
                self.cache[hashes[mark]] = prefix[mark]
                written = max(written, prefix[mark] - read)
        total = prefix[-1]
        return {
            "input_tokens": total - read - written,
            "cache_creation_input_tokens": written,
            "cache_read_input_tokens": read,
        }

    def shared_prefix(self, blocks: Sequence[Any], minimum: int, step: int) -> tuple[int, int]:
        """Automatic caching: the prompt's tokens, and those of the longest prefix it
        shares with an earlier prompt (at least `minimum`, in steps of `step`)."""
        sizes = [_tokens(b) for b in blocks]
        hashes = _prefix_hashes(blocks)
        shared = 0
        for earlier in self.seen:
            common = 0
            for a, b in zip(hashes, earlier, strict=False):
                if a != b:
                    break
                common += 1
            shared = max(shared, sum(sizes[:common]))
        self.seen.append(hashes)
        cached = shared // step * step if shared >= minimum else 0
        return sum(sizes), cached

    def openai_usage(self, body: dict[str, Any]) -> dict[str, Any]:
        blocks = list(body.get("tools") or []) + list(body["messages"])
        total, cached = self.shared_prefix(blocks, MIN_CACHEABLE, OPENAI_STEP)
        return {"prompt_tokens": total, "prompt_tokens_details": {"cached_tokens": cached}}

    def responses_usage(self, body: dict[str, Any]) -> dict[str, Any]:
        instructions = [body["instructions"]] if body.get("instructions") else []
        blocks = list(body.get("tools") or []) + instructions + list(body["input"])
        total, cached = self.shared_prefix(blocks, MIN_CACHEABLE, OPENAI_STEP)
        return {
            "input_tokens": total,
            "input_tokens_details": {"cached_tokens": cached},
            "output_tokens": 40,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": total + 40,
        }

    def gemini_usage(self, body: dict[str, Any]) -> dict[str, Any]:
        system = [body["systemInstruction"]] if body.get("systemInstruction") else []
        blocks = system + list(body.get("tools") or []) + list(body["contents"])
        total, cached = self.shared_prefix(blocks, GEMINI_MIN_CACHEABLE, 1)
        return {
            "promptTokenCount": total,
            "cachedContentTokenCount": cached,
            "candidatesTokenCount": 40,
            "totalTokenCount": total + 40,
        }

    def next_move(self, user_turns: int, answering_tools: bool) -> list[tuple[str, dict[str, str]]]:
        """The calls the scripted model makes now (none: it answers in text)."""
        return [] if answering_tools else list(PLAN[(user_turns - 1) % len(PLAN)])


def _anthropic_handler(sim: _Simulation) -> Callable[[httpx.Request], httpx.Response]:
    def handle(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        messages = body["messages"]
        user_turns = sum(
            1
            for m in messages
            if m["role"] == "user"
            and any(b.get("type") == "text" for b in m["content"] if isinstance(b, dict))
            or (m["role"] == "user" and isinstance(m["content"], str))
        )
        last = messages[-1]["content"]
        answering = isinstance(last, list) and any(b.get("type") == "tool_result" for b in last)
        moves = sim.next_move(user_turns, answering)
        sim.calls += 1
        content: list[dict[str, Any]] = [
            {"type": "tool_use", "id": f"toolu_{sim.calls}_{i}", "name": name, "input": args}
            for i, (name, args) in enumerate(moves)
        ] or [{"type": "text", "text": "Here is what I found: all records are nominal."}]
        usage = {**sim.anthropic_usage(body), "output_tokens": 40}
        return httpx.Response(
            200,
            json={
                "id": f"msg_{sim.calls}",
                "type": "message",
                "role": "assistant",
                "model": body["model"],
                "content": content,
                "stop_reason": "tool_use" if moves else "end_turn",
                "usage": usage,
            },
        )

    return handle


def _openai_handler(sim: _Simulation) -> Callable[[httpx.Request], httpx.Response]:
    def handle(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        messages = body["messages"]
        user_turns = sum(1 for m in messages if m["role"] == "user")
        moves = sim.next_move(user_turns, messages[-1]["role"] == "tool")
        sim.calls += 1
        message: dict[str, Any] = {"role": "assistant", "content": None}
        if moves:
            message["tool_calls"] = [
                {
                    "id": f"call_{sim.calls}_{i}",
                    "type": "function",
                    "function": {"name": name, "arguments": json.dumps(args)},
                }
                for i, (name, args) in enumerate(moves)
            ]
        else:
            message["content"] = "Here is what I found: all records are nominal."
        usage = {**sim.openai_usage(body), "completion_tokens": 40}
        return httpx.Response(
            200,
            json={
                "id": f"chatcmpl-{sim.calls}",
                "object": "chat.completion",
                "model": body["model"],
                "choices": [
                    {
                        "index": 0,
                        "message": message,
                        "finish_reason": "tool_calls" if moves else "stop",
                    }
                ],
                "usage": usage,
            },
        )

    return handle


ANSWER = "Here is what I found: all records are nominal."


def _responses_handler(sim: _Simulation) -> Callable[[httpx.Request], httpx.Response]:
    def handle(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        items = body["input"]
        user_turns = sum(1 for i in items if i.get("role") == "user")
        moves = sim.next_move(user_turns, items[-1].get("type") == "function_call_output")
        sim.calls += 1
        output: list[dict[str, Any]] = [
            {
                "type": "function_call",
                "id": f"fc_{sim.calls}_{i}",
                "call_id": f"call_{sim.calls}_{i}",
                "name": name,
                "arguments": json.dumps(args),
                "status": "completed",
            }
            for i, (name, args) in enumerate(moves)
        ] or [
            {
                "type": "message",
                "id": f"msg_{sim.calls}",
                "status": "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "text": ANSWER, "annotations": []}],
            }
        ]
        return httpx.Response(
            200,
            json={
                "id": f"resp_{sim.calls}",
                "object": "response",
                "status": "completed",
                "model": body["model"],
                "output": output,
                "usage": sim.responses_usage(body),
            },
        )

    return handle


def _gemini_handler(sim: _Simulation) -> Callable[[httpx.Request], httpx.Response]:
    def handle(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        contents = body["contents"]
        user_turns = sum(
            1 for c in contents if c["role"] == "user" and any("text" in p for p in c["parts"])
        )
        answering = any("functionResponse" in p for p in contents[-1]["parts"])
        moves = sim.next_move(user_turns, answering)
        sim.calls += 1
        parts: list[dict[str, Any]] = [
            {"functionCall": {"id": f"fc{sim.calls}{i}", "name": name, "args": args}}
            for i, (name, args) in enumerate(moves)
        ] or [{"text": ANSWER}]
        return httpx.Response(
            200,
            json={
                "candidates": [
                    {"content": {"role": "model", "parts": parts}, "finishReason": "STOP"}
                ],
                "usageMetadata": sim.gemini_usage(body),
                "modelVersion": "gemini-sim",
                "responseId": f"r{sim.calls}",
            },
        )

    return handle


async def _conversation(model: ChatModel) -> tuple[Usage, int]:
    chain = Chain([ToolCallingAdvisor()], model=model, tools=TOOLS)
    history: list[Message] = [SystemMessage(content=SYSTEM)]
    total = Usage()
    for question in QUESTIONS:
        history.append(UserMessage(content=question))
        response = await chain.call(history)
        history.extend(response.messages)
        assert isinstance(history[-1], AssistantMessage)
        total = total + response.usage
    return total, len(QUESTIONS)


async def _measure() -> list[dict[str, Any]]:
    from advisorchain.providers import (
        AnthropicChatModel,
        GeminiChatModel,
        OpenAIChatModel,
        OpenAIResponsesChatModel,
    )

    rows = []
    configs: list[tuple[str, Callable[[httpx.AsyncClient], ChatModel], Callable[..., Any]]] = [
        (
            "anthropic, prompt_cache on (default)",
            lambda c: AnthropicChatModel("claude-sim", api_key="sim-key", http_client=c),
            _anthropic_handler,
        ),
        (
            "anthropic, prompt_cache=False",
            lambda c: AnthropicChatModel(
                "claude-sim", api_key="sim-key", http_client=c, prompt_cache=False
            ),
            _anthropic_handler,
        ),
        (
            "openai chat (automatic caching)",
            lambda c: OpenAIChatModel("gpt-sim", api_key="sim-key", http_client=c),
            _openai_handler,
        ),
        (
            "openai responses (automatic caching)",
            lambda c: OpenAIResponsesChatModel("gpt-sim", api_key="sim-key", http_client=c),
            _responses_handler,
        ),
        (
            "gemini (implicit caching)",
            lambda c: GeminiChatModel("gemini-sim", api_key="sim-key", http_client=c),
            _gemini_handler,
        ),
    ]
    for name, make, handler in configs:
        sim = _Simulation()
        async with httpx.AsyncClient(transport=httpx.MockTransport(handler(sim))) as client:
            usage, turns = await _conversation(make(client))
        cached, written = usage.cached_input_tokens, usage.cache_write_tokens
        fresh = usage.input_tokens - cached - written
        billed = (fresh + 1.25 * written + 0.1 * cached) / usage.input_tokens
        rows.append(
            {
                "config": name,
                "turns": turns,
                "requests": usage.requests,
                "input_tokens": usage.input_tokens,
                "cached_input_tokens": cached,
                "cache_write_tokens": written,
                "cached_fraction": cached / usage.input_tokens,
                "billed_input_fraction": billed if name.startswith("anthropic") else None,
            }
        )
    return rows


def run() -> list[dict[str, Any]]:
    """Each configuration's totals for the scripted conversation (Anthropic with and
    without marks, OpenAI Chat, OpenAI Responses, Gemini)."""
    return anyio.run(_measure, backend="asyncio")


def render(rows: list[dict[str, Any]]) -> str:
    """The rows as a Markdown table."""
    return table(
        [
            "configuration",
            "turns",
            "requests",
            "input tokens",
            "cached",
            "cache writes",
            "cached share",
            "billed input vs. no cache (Anthropic prices)",
        ],
        [
            [
                r["config"],
                r["turns"],
                r["requests"],
                r["input_tokens"],
                r["cached_input_tokens"],
                r["cache_write_tokens"],
                f"{r['cached_fraction']:.0%}",
                "-" if r["billed_input_fraction"] is None else f"{r['billed_input_fraction']:.0%}",
            ]
            for r in rows
        ],
    )


if __name__ == "__main__":
    print(render(run()))
