"""Concurrency: 1, 100 and 1,000 conversations at once on one event loop, over HTTP.

Each conversation streams a two-round turn from the local OpenAI-compatible server
(`benchmarks.openai_server`, its own process on 127.0.0.1, so its CPU is not the
client's): the model asks for `get_weather`, the tool runs, the model streams a text
answer. All N conversations start together (one task group) and share one
`httpx.AsyncClient` whose pool allows N connections.

Two clients run the same conversations: advisorchain (`Chain([ToolCallingAdvisor()])`
around `OpenAIChatModel`, consuming `Chain.stream`) and a hand-written floor (plain
httpx, SSE parsed by hand into dicts). Reported per N: wall time, throughput
(conversations/s), latency percentiles, the client's CPU time per conversation, and
memory: the `tracemalloc` peak of a second run of the same batch, divided by N.
"""

from __future__ import annotations

import contextlib
import json
import os
import statistics
import subprocess
import sys
import time
import tracemalloc
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import anyio
import httpx

from advisorchain import Chain, TextDelta, ToolCallingAdvisor, tool

from .stats import percentile, table

PROMPT = "What's the weather in Paris?"
Conversation = Callable[[], Awaitable[str]]


@tool
async def get_weather(city: str) -> str:
    """Current weather in a city."""
    return f"Sunny in {city}, 21 C"


@contextlib.contextmanager
def server(latency_ms: float = 0.0) -> Any:
    """Start the test server in a subprocess; yields its base URL."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, PYTHONPATH=root)
    process = subprocess.Popen(
        [sys.executable, "-m", "benchmarks.openai_server", "--latency", str(latency_ms)],
        stdout=subprocess.PIPE,
        env=env,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        if not line.startswith("PORT "):
            raise RuntimeError(f"test server did not start: {line!r}")
        yield f"http://127.0.0.1:{int(line.split()[1])}/v1"
    finally:
        process.terminate()
        process.wait(timeout=10)
        if process.stdout is not None:
            process.stdout.close()


def advisorchain_client(base_url: str, http: httpx.AsyncClient) -> Conversation | str:
    """A conversation through `OpenAIChatModel`, or why it cannot run."""
    try:
        from advisorchain.providers import OpenAIChatModel
    except ImportError as exc:
        return f"advisorchain.providers.OpenAIChatModel is not available ({exc})"
    model = OpenAIChatModel("bench", base_url=base_url, api_key="bench-key", http_client=http)
    chain = Chain([ToolCallingAdvisor()], model=model, tools=[get_weather])

    async def conversation() -> str:
        parts = []
        async for event in chain.stream(PROMPT):
            if isinstance(event, TextDelta):
                parts.append(event.text)
        return "".join(parts)

    return conversation


def handwritten_client(base_url: str, http: httpx.AsyncClient) -> Conversation:
    """The same conversation with plain httpx and dicts: the floor."""
    url = f"{base_url}/chat/completions"
    tools = [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "Current weather in a city.",
                "parameters": {
                    "type": "object",
                    "properties": {"city": {"type": "string"}},
                    "required": ["city"],
                },
            },
        }
    ]

    async def events(messages: list[dict[str, Any]]) -> AsyncIterator[dict[str, Any]]:
        body = {"model": "bench", "messages": messages, "tools": tools, "stream": True}
        async with http.stream("POST", url, json=body) as response:
            response.raise_for_status()
            async for line in response.aiter_lines():
                if line.startswith("data: ") and line != "data: [DONE]":
                    yield json.loads(line[6:])

    async def conversation() -> str:
        messages: list[dict[str, Any]] = [{"role": "user", "content": PROMPT}]
        while True:
            text: list[str] = []
            calls: dict[int, dict[str, Any]] = {}
            async for chunk in events(messages):
                for choice in chunk.get("choices", []):
                    delta = choice["delta"]
                    if delta.get("content"):
                        text.append(delta["content"])
                    for c in delta.get("tool_calls") or []:
                        call = calls.setdefault(c["index"], {"id": "", "name": "", "arguments": ""})
                        call["id"] = c.get("id") or call["id"]
                        function = c.get("function") or {}
                        call["name"] = function.get("name") or call["name"]
                        call["arguments"] += function.get("arguments") or ""
            if not calls:
                return "".join(text)
            messages.append(
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": c["id"],
                            "type": "function",
                            "function": {"name": c["name"], "arguments": c["arguments"]},
                        }
                        for c in calls.values()
                    ],
                }
            )
            for c in calls.values():
                city = json.loads(c["arguments"])["city"]
                messages.append(
                    {"role": "tool", "tool_call_id": c["id"], "content": f"Sunny in {city}, 21 C"}
                )

    return conversation


async def _batch(conversation: Conversation, n: int) -> tuple[float, list[float], int]:
    latencies: list[float] = []
    failures = 0

    async def one() -> None:
        nonlocal failures
        start = time.perf_counter()
        try:
            answer = await conversation()
        except Exception:
            failures += 1
            return
        latencies.append(time.perf_counter() - start)
        if not answer.startswith("It is sunny"):
            failures += 1

    start = time.perf_counter()
    async with anyio.create_task_group() as group:
        for _ in range(n):
            group.start_soon(one)
    return time.perf_counter() - start, latencies, failures


async def _measure(base_url: str, ns: tuple[int, ...]) -> dict[str, Any]:
    results: dict[str, Any] = {}
    skipped: dict[str, str] = {}
    clients: list[tuple[str, Callable[..., Conversation | str]]] = [
        ("handwritten", handwritten_client),
        ("advisorchain", advisorchain_client),
    ]
    for name, factory in clients:
        rows = []
        for n in ns:
            limits = httpx.Limits(max_connections=n, max_keepalive_connections=n)
            async with httpx.AsyncClient(limits=limits, timeout=120) as http:
                conversation = factory(base_url, http)
                if isinstance(conversation, str):
                    skipped[name] = conversation
                    break
                await _batch(conversation, min(n, 10))  # warm up: connections, caches
                cpu = time.process_time()
                wall, latencies, failures = await _batch(conversation, n)
                cpu = time.process_time() - cpu
                tracemalloc.start()
                try:
                    await _batch(conversation, n)
                    peak = tracemalloc.get_traced_memory()[1]
                finally:
                    tracemalloc.stop()
            rows.append(
                {
                    "n": n,
                    "wall_s": wall,
                    "throughput_per_s": n / wall,
                    "p50_ms": statistics.median(latencies) * 1000 if latencies else None,
                    "p90_ms": percentile(latencies, 90) * 1000,
                    "p99_ms": percentile(latencies, 99) * 1000,
                    "cpu_ms_per_conversation": cpu / n * 1000,
                    "peak_mib": peak / 2**20,
                    "kib_per_conversation": peak / n / 1024,
                    "failures": failures,
                }
            )
        if rows:
            results[name] = rows
    return {"results": results, "skipped": skipped}


def run(*, ns: tuple[int, ...] = (1, 100, 1000), latency_ms: float = 0.0) -> dict[str, Any]:
    """Start the server, measure every N with each client, stop the server."""
    with server(latency_ms) as base_url:
        report = anyio.run(_measure, base_url, ns, backend="asyncio")
    report["server_latency_ms"] = latency_ms
    return report


def render(report: dict[str, Any]) -> str:
    """The report as a Markdown table."""
    rows = []
    for name, rs in report["results"].items():
        for r in rs:
            rows.append(
                [
                    name,
                    r["n"],
                    r["wall_s"] * 1000,
                    r["throughput_per_s"],
                    r["p50_ms"],
                    r["p99_ms"],
                    r["cpu_ms_per_conversation"],
                    r["peak_mib"],
                    r["kib_per_conversation"],
                    r["failures"],
                ]
            )
    text = table(
        [
            "client",
            "N",
            "wall ms",
            "conv/s",
            "p50 ms",
            "p99 ms",
            "client CPU ms/conv",
            "peak MiB",
            "KiB/conv",
            "failures",
        ],
        rows,
    )
    for name, why in report["skipped"].items():
        text += f"\n\n_{name} skipped: {why}_"
    return text
