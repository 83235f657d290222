"""Provider overhead: each HTTP provider's `call` and `stream` against raw httpx.

    python -m benchmarks.provider_overhead [--calls 2000] [--block 50]
    python -m benchmarks.provider_overhead --base OLD_TREE   # before/after, one process

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

With `--base OLD_TREE`, advisorchain from `OLD_TREE` is imported into the same process
under another package name (`advisorchain_base`: the package imports itself only
relatively) and measured as a third client, interleaved with the other two: the table
then gives both trees and the ratio of their added costs.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import statistics
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx

import advisorchain

from .stats import cpu_per_turn, table

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
KEY = "bench-key-0123456789"


def _tools(package: ModuleType) -> tuple[Any, Any]:
    tool: Callable[[Callable[..., str]], Any] = package.tool

    @tool
    def get_weather(city: str, unit: str = "celsius") -> str:
        """The current weather in a city."""
        return f"sunny in {city}"

    @tool
    def get_time(timezone: str) -> str:
        """The current time in a time zone."""
        return f"12:00 in {timezone}"

    return get_weather, get_time


get_weather, get_time = _tools(advisorchain)


@dataclass(frozen=True)
class Provider:
    name: str
    build: Callable[[ModuleType, httpx.AsyncClient], Any]
    call_fixture: str
    stream_fixture: str


PROVIDERS = (
    Provider(
        "OpenAI Chat Completions",
        lambda p, client: p.OpenAIChatModel("gpt-4o-mini", api_key=KEY, http_client=client),
        "openai_completion_tool_calls.json",
        "openai_stream_tool_calls.sse",
    ),
    Provider(
        "OpenAI Responses",
        lambda p, client: p.OpenAIResponsesChatModel("gpt-5-mini", api_key=KEY, http_client=client),
        "openai_responses_reasoning_tool_calls.json",
        "openai_responses_stream_reasoning_tool_calls.sse",
    ),
    Provider(
        "Anthropic",
        lambda p, client: p.AnthropicChatModel(
            "claude-sonnet-4-5", api_key=KEY, http_client=client
        ),
        "anthropic_message_tool_use.json",
        "anthropic_stream_tool_use.sse",
    ),
    Provider(
        "Gemini",
        lambda p, client: p.GeminiChatModel("gemini-2.5-flash", api_key=KEY, http_client=client),
        "gemini_generate_thought_tool_calls.json",
        "gemini_stream_thought_tool_calls.sse",
    ),
)


def load_tree(tree: Path, name: str = "advisorchain_base") -> ModuleType:
    """The advisorchain package in `tree`, imported as `name` (next to `advisorchain`)."""
    spec = importlib.util.spec_from_file_location(
        name, tree / "__init__.py", submodule_search_locations=[str(tree)]
    )
    if spec is None or spec.loader is None:
        raise ImportError(f"no package in {tree}")
    package = importlib.util.module_from_spec(spec)
    sys.modules[name] = package
    spec.loader.exec_module(package)
    importlib.import_module(f"{name}.providers")
    return package


def _transport(body: bytes, content_type: str, seen: list[httpx.Request]) -> Any:
    def handle(request: httpx.Request) -> httpx.Response:
        if not seen:
            seen.append(request)
        return httpx.Response(200, content=body, headers={"content-type": content_type})

    return httpx.MockTransport(handle)


def _ours(
    package: ModuleType, provider: Provider, call_client: Any, stream_client: Any
) -> tuple[Callable[[], Awaitable[None]], Callable[[], Awaitable[None]]]:
    """`call` and `stream` of one tree's model for `provider`."""
    providers = sys.modules[f"{package.__name__}.providers"]
    call_model = provider.build(providers, call_client)
    stream_model = provider.build(providers, stream_client)
    request = package.ChatRequest(
        messages=(package.UserMessage(content="What is the weather and the time in Paris?"),),
        tools=_tools(package),
    )

    async def ours_call() -> None:
        response = await call_model.call(request)
        assert response.message.tool_calls

    async def ours_stream() -> None:
        final = None
        async for event in stream_model.stream(request):
            final = event
        assert isinstance(final, package.ResponseCompleted)
        assert final.response.message.tool_calls

    return ours_call, ours_stream


async def _measure(
    provider: Provider, *, calls: int, block: int, base: ModuleType | None = None
) -> dict[str, float]:
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
        ours_call, ours_stream = _ours(advisorchain, provider, call_client, stream_client)
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
        if base is not None:
            base_call, base_stream = _ours(base, provider, call_client, stream_client)
            subjects["base call"], subjects["base stream"] = base_call, base_stream
        samples = await cpu_per_turn(subjects, turns=calls, block=block)
    return {name: statistics.median(values) * 1e6 for name, values in samples.items()}


async def run(*, calls: int = 2000, block: int = 50, base: Path | None = None) -> dict[str, Any]:
    """Median CPU microseconds per call of each provider and of raw httpx, both paths
    (and of advisorchain from `base`, if given)."""
    package = load_tree(base) if base is not None else None
    load_start = os.getloadavg()
    providers = {
        p.name: await _measure(p, calls=calls, block=block, base=package) for p in PROVIDERS
    }
    return {
        "calls": calls,
        "base": str(base) if base is not None else None,
        "load": [load_start, os.getloadavg()],
        "providers": providers,
    }


def render(report: dict[str, Any]) -> str:
    rows: list[tuple[object, ...]] = []
    base = report.get("base")
    for name, us in report["providers"].items():
        for path in ("call", "stream"):
            ours, raw = us[path], us[f"raw {path}"]
            if base is None:
                rows.append((name, path, ours, raw, ours - raw, ours / raw))
                continue
            old = us[f"base {path}"]
            rows.append(
                (name, path, old, ours, raw, old / raw, ours / raw, (ours - raw) / (old - raw))
            )
    if base is None:
        headers: tuple[str, ...] = (
            "provider",
            "path",
            "advisorchain us",
            "raw httpx us",
            "added us",
            "ratio",
        )
    else:
        headers = (
            "provider",
            "path",
            "base us",
            "new us",
            "raw httpx us",
            "base / raw",
            "new / raw",
            "added: new / base",
        )
    text = table(headers, rows)
    load = report.get("load")
    if load:
        text += (
            f"\n\n{report['calls']} calls per client, interleaved; load average "
            f"{load[0][0]:.2f} at the start, {load[1][0]:.2f} at the end"
        )
    if base is not None:
        text += f"; base: {base}"
    return text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--block", type=int, default=50)
    parser.add_argument("--base", type=Path, help="another source tree of advisorchain to compare")
    args = parser.parse_args()
    print(render(asyncio.run(run(calls=args.calls, block=args.block, base=args.base))))


if __name__ == "__main__":
    main()
