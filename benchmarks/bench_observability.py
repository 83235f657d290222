"""Overhead of LoggingAdvisor and TracingAdvisor per call, against a bare chain.

Run: `.venv/bin/python benchmarks/bench_observability.py [--calls N] [--repeats R]`.

The model is an in-memory stub that answers at once, so the numbers are the chain's
own cost, the worst case for a ratio (a real model call takes milliseconds to
seconds). Every configuration runs in the same process, interleaved, `repeats`
times; the table shows the median time per call, the overhead over the bare chain
in microseconds and as a ratio. Results go to benchmarks/results/bench_observability.json.
"""

from __future__ import annotations

import argparse
import json
import logging
import platform
import statistics
import sys
import time
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import opentelemetry
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

from advisorchain import (
    Advisor,
    AssistantMessage,
    Chain,
    ChatRequest,
    ChatResponse,
    LoggingAdvisor,
    ResponseCompleted,
    StreamEvent,
    TextDelta,
    ToolCall,
    ToolCallingAdvisor,
    ToolMessage,
    TracingAdvisor,
    Usage,
    tool,
)

RESULTS = Path(__file__).parent / "results" / "bench_observability.json"


class StubModel:
    """Answers instantly: a tool call first when the chain has tools, then text."""

    model_name = "stub-1"
    provider_name = "stub"

    def __init__(self) -> None:
        usage = Usage(input_tokens=12, output_tokens=3, requests=1)
        call = ToolCall(id="call_1", name="add", arguments='{"a":1,"b":2}')
        self._text = ChatResponse(
            message=AssistantMessage(content="ok"), usage=usage, model="stub-1"
        )
        self._tool = ChatResponse(
            message=AssistantMessage(tool_calls=(call,)),
            finish_reason="tool_calls",
            usage=usage,
            model="stub-1",
        )

    def _answer(self, request: ChatRequest) -> ChatResponse:
        if request.tools and not isinstance(request.messages[-1], ToolMessage):
            return self._tool
        return self._text

    async def call(self, request: ChatRequest) -> ChatResponse:
        return self._answer(request)

    async def stream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        response = self._answer(request)
        if response.message.text:
            yield TextDelta(response.message.text)
        yield ResponseCompleted(response)


@tool(run_inline=True)
async def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


class _DropExporter(SpanExporter):
    def export(self, spans: Any) -> SpanExportResult:
        return SpanExportResult.SUCCESS


def _quiet_logger(name: str, level: int) -> logging.Logger:
    logger = logging.getLogger(name)
    logger.handlers[:] = [logging.NullHandler()]
    logger.propagate = False
    logger.setLevel(level)
    return logger


def _sdk_tracing() -> TracingAdvisor:
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(_DropExporter()))
    meter_provider = MeterProvider(metric_readers=[InMemoryMetricReader()])
    return TracingAdvisor(tracer_provider, meter_provider)


CONFIGS: dict[str, Callable[[], list[Advisor]]] = {
    "bare chain": lambda: [],
    "LoggingAdvisor, logger disabled": lambda: [
        LoggingAdvisor(_quiet_logger("bench.off", logging.ERROR))
    ],
    "LoggingAdvisor, records to NullHandler": lambda: [
        LoggingAdvisor(_quiet_logger("bench.on", logging.INFO))
    ],
    "TracingAdvisor, no SDK (no-op API)": lambda: [TracingAdvisor()],
    "TracingAdvisor, SDK, spans dropped": lambda: [_sdk_tracing()],
}

SCENARIOS = ("call", "stream", "tool turn")


def _chain(advisors: list[Advisor], scenario: str) -> Chain:
    if scenario == "tool turn":
        return Chain([*advisors, ToolCallingAdvisor()], model=StubModel(), tools=[add])
    return Chain(advisors, model=StubModel())


async def _time(chain: Chain, scenario: str, calls: int) -> float:
    start = time.perf_counter()
    if scenario == "stream":
        for _ in range(calls):
            async for _event in chain.stream("hi"):
                pass
    else:
        for _ in range(calls):
            await chain.call("hi")
    return (time.perf_counter() - start) / calls


async def measure(calls: int, repeats: int) -> dict[str, dict[str, list[float]]]:
    chains = {
        scenario: {name: _chain(make(), scenario) for name, make in CONFIGS.items()}
        for scenario in SCENARIOS
    }
    samples: dict[str, dict[str, list[float]]] = {
        s: {name: [] for name in CONFIGS} for s in SCENARIOS
    }
    for scenario, by_name in chains.items():
        for chain in by_name.values():
            await _time(chain, scenario, max(1, calls // 10))  # warm up
    names = list(CONFIGS)
    for repeat in range(repeats):
        order = names[repeat % len(names) :] + names[: repeat % len(names)]  # rotate: no fixed slot
        for scenario, by_name in chains.items():
            for name in order:
                samples[scenario][name].append(await _time(by_name[name], scenario, calls))
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()

    samples = anyio.run(measure, args.calls, args.repeats)
    results: list[dict[str, Any]] = []
    print(f"{'scenario':<10} {'configuration':<40} {'us/call':>9} {'overhead us':>12} {'ratio':>7}")
    for scenario in SCENARIOS:
        bare = statistics.median(samples[scenario]["bare chain"])
        for name in CONFIGS:
            median = statistics.median(samples[scenario][name])
            row = {
                "scenario": scenario,
                "configuration": name,
                "us_per_call": round(median * 1e6, 2),
                "overhead_us": round((median - bare) * 1e6, 2),
                "ratio": round(median / bare, 3),
            }
            results.append(row)
            print(
                f"{scenario:<10} {name:<40} {row['us_per_call']:>9.1f} "
                f"{row['overhead_us']:>12.1f} {row['ratio']:>7.2f}"
            )
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(
        json.dumps(
            {
                "benchmark": "bench_observability",
                "date": datetime.now(UTC).isoformat(timespec="seconds"),
                "python": sys.version.split()[0],
                "platform": platform.platform(),
                "opentelemetry_api": getattr(opentelemetry, "__version__", None)
                or _version("opentelemetry-api"),
                "calls_per_sample": args.calls,
                "repeats": args.repeats,
                "statistic": "median seconds per call over repeats",
                "results": results,
            },
            indent=2,
        )
        + "\n"
    )
    print(f"\nwrote {RESULTS}")


def _version(package: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(package)
    except PackageNotFoundError:
        return None


if __name__ == "__main__":
    main()
