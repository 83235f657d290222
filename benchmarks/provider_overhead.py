"""Provider overhead: each HTTP provider's `call` and `stream` against raw httpx.

    python -m benchmarks.provider_overhead [--calls 2000] [--block 50]

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
import statistics
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

FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "fixtures"
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--block", type=int, default=50)
    args = parser.parse_args()
    print(render(asyncio.run(run(calls=args.calls, block=args.block))))


if __name__ == "__main__":
    main()
