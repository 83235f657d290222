"""Streaming: time to first text delta and cost per chunk, through a chain vs the model directly.

The model is a `ScriptedChatModel` answering a 2,000-character text in 4-character
fragments (500 `TextDelta`s, then `ResponseCompleted`). "direct" iterates `model.stream`
itself; "chain" iterates `Chain.stream` through four advisors that override `stream`
(three pass-through links and the `ToolCallingAdvisor`, which passes text deltas on).
The "20 ms first token" rows wrap the model so that its stream waits 20 ms (`anyio.sleep`)
before the first fragment, like a provider's latency, to show the chain's share of a
realistic time to first token.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio

from advisorchain import (
    Advisor,
    Chain,
    ChatRequest,
    ChatResponse,
    StreamEvent,
    StreamNext,
    TextDelta,
    ToolCallingAdvisor,
    UserMessage,
)
from advisorchain.providers import ScriptedChatModel

from .stats import table

TEXT = ("The weather in Paris is sunny. " * 70)[:2000]
CHUNK = 4


class PassThrough(Advisor):
    """A link that overrides `stream` and forwards every event (the stream path only)."""

    single_path = True

    async def stream(self, request: ChatRequest, next: StreamNext) -> AsyncIterator[StreamEvent]:
        async for event in next(request):
            yield event


class Delayed:
    """A model whose stream waits `delay` seconds before the wrapped model's first event."""

    def __init__(self, model: ScriptedChatModel, delay: float) -> None:
        self.model = model
        self.delay = delay

    async def call(self, request: ChatRequest) -> ChatResponse:
        await anyio.sleep(self.delay)
        return await self.model.call(request)

    async def stream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        await anyio.sleep(self.delay)
        async for event in self.model.stream(request):
            yield event


async def _consume(events: AsyncIterator[StreamEvent]) -> tuple[float, float, int]:
    start = time.perf_counter()
    first = 0.0
    chunks = 0
    async for event in events:
        if isinstance(event, TextDelta):
            if not chunks:
                first = time.perf_counter() - start
            chunks += 1
    return first, time.perf_counter() - start, chunks


async def _measure(delay: float, repeat: int) -> dict[str, dict[str, float]]:
    scripted = ScriptedChatModel(lambda request: TEXT, chunk_size=CHUNK)
    model: Any = Delayed(scripted, delay) if delay else scripted
    chain = Chain([PassThrough(), PassThrough(), PassThrough(), ToolCallingAdvisor()], model=model)
    request = ChatRequest(messages=(UserMessage(content="Weather?"),))
    ways: dict[str, Callable[[], AsyncIterator[StreamEvent]]] = {
        "direct": lambda: model.stream(request),
        "chain": lambda: chain.stream(request),
    }
    samples: dict[str, list[tuple[float, float, int]]] = {k: [] for k in ways}
    for _ in range(min(20, repeat)):
        for make in ways.values():
            await _consume(make())
    for _ in range(repeat):
        for name, make in ways.items():  # interleaved
            samples[name].append(await _consume(make()))
            scripted.requests.clear()
    out = {}
    for name, rows in samples.items():
        chunks = rows[0][2]
        out[name] = {
            "ttft_ms": statistics.median(r[0] for r in rows) * 1000,
            "total_ms": statistics.median(r[1] for r in rows) * 1000,
            "chunks": chunks,
            "per_chunk_us": statistics.median((r[1] - r[0]) / max(1, chunks - 1) for r in rows)
            * 1e6,
        }
    return out


async def run(*, repeat: int = 200) -> dict[str, Any]:
    """Measure with an instantaneous model and with a 20 ms time to first token."""
    results = {
        "instant model": await _measure(0.0, repeat),
        "20 ms first token": await _measure(0.02, max(1, repeat // 4)),
    }
    for r in results.values():
        d, c = r["direct"], r["chain"]
        r["added"] = {
            "ttft_us": (c["ttft_ms"] - d["ttft_ms"]) * 1000,
            "ttft_pct": (c["ttft_ms"] / d["ttft_ms"] - 1) * 100,
            "per_chunk_us": c["per_chunk_us"] - d["per_chunk_us"],
        }
    return {"chunks": len(TEXT) // CHUNK, "advisors": 4, "results": results}


def render(report: dict[str, Any]) -> str:
    """The report as a Markdown table."""
    rows = []
    for model, r in report["results"].items():
        for way in ("direct", "chain"):
            x = r[way]
            rows.append([model, way, x["ttft_ms"], x["per_chunk_us"], x["total_ms"]])
        a = r["added"]
        rows.append(
            [
                model,
                "**added by the chain**",
                f"+{a['ttft_us']:.1f} us ({a['ttft_pct']:+.1f}%)",
                f"+{a['per_chunk_us']:.2f}",
                "",
            ]
        )
    return table(["model", "path", "first text delta ms", "per chunk us", "total ms"], rows)
