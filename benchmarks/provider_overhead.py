"""Provider overhead: each HTTP provider's `call` and `stream` against raw httpx.

    python -m benchmarks.provider_overhead [--calls 2000] [--block 50]
    python -m benchmarks.provider_overhead --base OLD_TREE [--rounds 3]   # before/after

With `--base`, each round runs the measurement once in a worker process importing
advisorchain from this tree and once from `OLD_TREE`, in alternating order; the table
gives each tree's median over the rounds, and the ratio of this tree's added cost and
CPU per call to the base's.

For each provider (OpenAI Chat Completions, OpenAI Responses, Anthropic, Gemini) one
request (a user message and two tools) is answered from the recorded fixture of
`tests/fixtures/` (a two-call tool answer, as JSON for `call` and as server-sent events for
`stream`) by an in-process `httpx.MockTransport`, so no socket is involved and the time is
the client's own. Two clients share that `httpx.AsyncClient`:

- **advisorchain**: `await model.call(request)`, or iterating `model.stream(request)` to its
  end: building the wire body from the `ChatRequest`, headers, the response parsed into a
  `ChatResponse` (tool calls, usage), or the events parsed into stream events.
- **raw httpx**: posting the same body (captured once from advisorchain's first request,
  so the floor does not build it) and `response.json()`, or reading the stream's lines and
  `json.loads` of every `data:` line: what a hand-written client cannot do without.

CPU time of the thread per call, the clients interleaved in blocks; the median and the
ratio. What the provider adds is the difference: the per-call cost of its typed request
and response objects.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from advisorchain import ChatRequest, ResponseCompleted, UserMessage, tool
from advisorchain.providers import (
    AnthropicChatModel,
    GeminiChatModel,
    OpenAIChatModel,
    OpenAIResponsesChatModel,
)

from .stats import cpu_per_turn, table

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
KEY = "bench-key-0123456789"


@tool
def get_weather(city: str, unit: str = "celsius") -> str:
    """The current weather in a city."""
    return f"sunny in {city}"


@tool
def get_time(timezone: str) -> str:
    """The current time in a time zone."""
    return f"12:00 in {timezone}"


@dataclass(frozen=True)
class Provider:
    name: str
    build: Callable[[httpx.AsyncClient], Any]
    call_fixture: str
    stream_fixture: str


PROVIDERS = (
    Provider(
        "OpenAI Chat Completions",
        lambda client: OpenAIChatModel("gpt-4o-mini", api_key=KEY, http_client=client),
        "openai_completion_tool_calls.json",
        "openai_stream_tool_calls.sse",
    ),
    Provider(
        "OpenAI Responses",
        lambda client: OpenAIResponsesChatModel("gpt-5-mini", api_key=KEY, http_client=client),
        "openai_responses_reasoning_tool_calls.json",
        "openai_responses_stream_reasoning_tool_calls.sse",
    ),
    Provider(
        "Anthropic",
        lambda client: AnthropicChatModel("claude-sonnet-4-5", api_key=KEY, http_client=client),
        "anthropic_message_tool_use.json",
        "anthropic_stream_tool_use.sse",
    ),
    Provider(
        "Gemini",
        lambda client: GeminiChatModel("gemini-2.5-flash", api_key=KEY, http_client=client),
        "gemini_generate_thought_tool_calls.json",
        "gemini_stream_thought_tool_calls.sse",
    ),
)


def _transport(body: bytes, content_type: str, seen: list[httpx.Request]) -> Any:
    def handle(request: httpx.Request) -> httpx.Response:
        if not seen:
            seen.append(request)
        return httpx.Response(200, content=body, headers={"content-type": content_type})

    return httpx.MockTransport(handle)


async def _measure(provider: Provider, *, calls: int, block: int) -> dict[str, float]:
    call_body = (FIXTURES / provider.call_fixture).read_bytes()
    stream_body = (FIXTURES / provider.stream_fixture).read_bytes()
    seen_call: list[httpx.Request] = []
    seen_stream: list[httpx.Request] = []
    async with (
        httpx.AsyncClient(
            transport=_transport(call_body, "application/json", seen_call)
        ) as call_client,
        httpx.AsyncClient(
            transport=_transport(stream_body, "text/event-stream", seen_stream)
        ) as stream_client,
    ):
        call_model = provider.build(call_client)
        stream_model = provider.build(stream_client)
        request = ChatRequest(
            messages=(UserMessage(content="What is the weather and the time in Paris?"),),
            tools=(get_weather, get_time),
        )

        async def ours_call() -> None:
            response = await call_model.call(request)
            assert response.message.tool_calls

        async def ours_stream() -> None:
            final = None
            async for event in stream_model.stream(request):
                final = event
            assert isinstance(final, ResponseCompleted) and final.response.message.tool_calls

        await ours_call()
        await ours_stream()
        call_request, stream_request = seen_call[0], seen_stream[0]

        async def raw_call() -> None:
            response = await call_client.post(
                call_request.url, content=call_request.content, headers=call_request.headers
            )
            response.raise_for_status()
            response.json()

        async def raw_stream() -> None:
            async with stream_client.stream(
                "POST",
                stream_request.url,
                content=stream_request.content,
                headers=stream_request.headers,
            ) as response:
                response.raise_for_status()
                async for line in response.aiter_lines():
                    if line.startswith("data:") and line[5:].strip() != "[DONE]":
                        json.loads(line[5:])

        subjects: dict[str, Callable[[], Awaitable[object]]] = {
            "call": ours_call,
            "raw call": raw_call,
            "stream": ours_stream,
            "raw stream": raw_stream,
        }
        samples = await cpu_per_turn(subjects, turns=calls, block=block)
    return {name: statistics.median(values) * 1e6 for name, values in samples.items()}


async def run(*, calls: int = 2000, block: int = 50) -> dict[str, Any]:
    """Median CPU microseconds per call of each provider and of raw httpx, both paths."""
    return {
        "calls": calls,
        "providers": {p.name: await _measure(p, calls=calls, block=block) for p in PROVIDERS},
    }


def render(report: dict[str, Any]) -> str:
    rows = []
    for name, us in report["providers"].items():
        for path in ("call", "stream"):
            ours, raw = us[path], us[f"raw {path}"]
            rows.append((name, path, ours, raw, ours - raw, ours / raw))
    return table(("provider", "path", "advisorchain us", "raw httpx us", "added us", "ratio"), rows)


def _in_worker(tree: Path, *, calls: int, block: int) -> dict[str, Any]:
    """`run` in a process importing advisorchain from `tree` (the benchmark's own code
    is this tree's)."""
    with tempfile.TemporaryDirectory(prefix="provider-overhead-") as links:
        os.symlink(tree.resolve(), os.path.join(links, "advisorchain"))
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([links, str(ROOT)]))
        command = [sys.executable, "-m", "benchmarks.provider_overhead", "--worker"]
        command += ["--calls", str(calls), "--block", str(block)]
        out = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    report: dict[str, Any] = json.loads(out.stdout)
    return report


def compare(base: Path, *, calls: int, block: int, rounds: int) -> dict[str, Any]:
    """This tree against `base`: `rounds` runs of each, alternating which goes first."""
    trees = {"new": ROOT, "base": base}
    runs: dict[str, list[dict[str, Any]]] = {"new": [], "base": []}
    load_start = os.getloadavg()
    for r in range(rounds):
        for name in ("new", "base") if r % 2 == 0 else ("base", "new"):
            runs[name].append(_in_worker(trees[name], calls=calls, block=block)["providers"])
    medians = {
        name: {
            provider: {
                key: statistics.median(run[provider][key] for run in reports)
                for key in reports[0][provider]
            }
            for provider in reports[0]
        }
        for name, reports in runs.items()
    }
    return {
        "calls": calls,
        "rounds": rounds,
        "base": str(base),
        "load": [load_start, os.getloadavg()],
        "trees": medians,
    }


def render_compare(report: dict[str, Any]) -> str:
    new, base = report["trees"]["new"], report["trees"]["base"]
    rows = []
    for name in new:
        for path in ("call", "stream"):
            b, n = base[name], new[name]
            added_b, added_n = b[path] - b[f"raw {path}"], n[path] - n[f"raw {path}"]
            rows.append(
                (
                    name,
                    path,
                    b[path],
                    n[path],
                    b[f"raw {path}"],
                    n[f"raw {path}"],
                    b[path] / b[f"raw {path}"],
                    n[path] / n[f"raw {path}"],
                    n[path] / b[path],
                    added_n / added_b if added_b else float("nan"),
                )
            )
    headers = (
        "provider",
        "path",
        "base us",
        "new us",
        "raw us (base run)",
        "raw us (new run)",
        "base / raw",
        "new / raw",
        "new / base",
        "added new / base",
    )
    load = report["load"]
    return (
        table(headers, rows)
        + f"\n\n{report['rounds']} rounds of {report['calls']} calls per tree, alternating; "
        + f"base: {report['base']}; load average {load[0][0]:.2f} at the start, "
        + f"{load[1][0]:.2f} at the end"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--block", type=int, default=50)
    parser.add_argument("--base", type=Path, help="another source tree of advisorchain to compare")
    parser.add_argument("--rounds", type=int, default=3, help="runs per tree with --base")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(asyncio.run(run(calls=args.calls, block=args.block))))
    elif args.base is not None:
        report = compare(args.base, calls=args.calls, block=args.block, rounds=args.rounds)
        print(render_compare(report))
    else:
        print(render(asyncio.run(run(calls=args.calls, block=args.block))))


if __name__ == "__main__":
    main()
