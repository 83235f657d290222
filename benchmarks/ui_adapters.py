"""What the UI protocol adapters add to a turn: time to first token and CPU per turn,
through `AgUiApp` and `VercelChatApp` against the bare in-process `Chain.stream`.

The turn: a `ScriptedChatModel` asks for one tool call (run inline, no worker thread),
then answers 400 characters in 4-character fragments (100 text deltas). "bare" iterates
`chain.stream`; "AG-UI" and "Vercel" call the ASGI app in-process (no sockets: what is
measured is the request parsing, the event mapping, JSON encoding and SSE framing),
reading every frame. Time to first token: from the request to the first text frame (the
first `TextDelta` for "bare"); CPU: `time.process_time` per turn. One run:
`python -m benchmarks.ui_adapters`.
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio

from advisorchain import Chain, TextDelta, ToolCall, ToolCallingAdvisor, tool
from advisorchain.providers import ScriptedChatModel
from advisorchain.ui import AgUiApp, VercelChatApp

__all__ = ["main", "measure"]

TEXT = ("Order 7 left the warehouse today. " * 20)[:400]


@tool(run_inline=True)  # no worker thread: its wake-up jitter is not the adapters'
def lookup(order_id: str) -> str:
    """Look an order up."""
    return "shipped"


def _chain() -> Chain:
    def reply(request: Any) -> Any:
        if request.messages[-1].role == "tool":
            return TEXT
        return ToolCall.from_arguments("lookup", {"order_id": "7"}, id="c1")

    return Chain([ToolCallingAdvisor()], model=ScriptedChatModel(reply), tools=[lookup])


async def _bare(chain: Chain) -> float:
    start = time.perf_counter()
    first = 0.0
    async for event in chain.stream("Where is order 7?"):
        if not first and isinstance(event, TextDelta):
            first = time.perf_counter() - start
    return first


def _asgi(app: Any, body: dict[str, Any], marker: bytes) -> Callable[[], Awaitable[float]]:
    raw = json.dumps(body).encode()
    scope = {
        "type": "http",
        "method": "POST",
        "path": "/",
        "headers": [(b"content-type", b"application/json"), (b"host", b"127.0.0.1")],
    }

    async def turn() -> float:
        sent = False
        first = 0.0
        finished = anyio.Event()
        start = time.perf_counter()

        async def receive() -> dict[str, Any]:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": raw, "more_body": False}
            await finished.wait()
            return {"type": "http.disconnect"}

        async def send(message: Any) -> None:
            nonlocal first
            if not first and marker in message.get("body", b""):
                first = time.perf_counter() - start
            if message["type"] == "http.response.body" and not message.get("more_body"):
                finished.set()

        await app(scope, receive, send)
        return first

    return turn


async def measure(turns: int = 300, warmup: int = 30) -> dict[str, dict[str, float]]:
    """Median time to first token (ms) and CPU per turn (ms), per way of streaming."""
    chain = _chain()
    agui = _asgi(
        AgUiApp(chain),
        {
            "threadId": "t",
            "runId": "r",
            "messages": [{"id": "1", "role": "user", "content": "Where is order 7?"}],
        },
        b"TEXT_MESSAGE_CONTENT",
    )
    vercel = _asgi(
        VercelChatApp(chain),
        {
            "id": "c",
            "messages": [
                {
                    "id": "1",
                    "role": "user",
                    "parts": [{"type": "text", "text": "Where is order 7?"}],
                }
            ],
        },
        b"text-delta",
    )
    ways: dict[str, Callable[[], Awaitable[float]]] = {
        "bare Chain.stream": lambda: _bare(chain),
        "AG-UI (AgUiApp)": agui,
        "Vercel (VercelChatApp)": vercel,
    }
    results: dict[str, dict[str, float]] = {}
    for name, turn in ways.items():
        for _ in range(warmup):
            await turn()
        firsts: list[float] = []
        cpu = time.process_time()
        for _ in range(turns):
            firsts.append(await turn())
        cpu = time.process_time() - cpu
        results[name] = {
            "first_token_ms": statistics.median(firsts) * 1000,
            "cpu_per_turn_ms": cpu / turns * 1000,
        }
    return results


def main() -> None:
    results = anyio.run(measure)
    base = results["bare Chain.stream"]
    print("| way | first token, median (ms) | CPU per turn (ms) | added CPU (ms) |")
    print("| --- | ---: | ---: | ---: |")
    for name, row in results.items():
        added = row["cpu_per_turn_ms"] - base["cpu_per_turn_ms"]
        print(
            f"| {name} | {row['first_token_ms']:.3f} | {row['cpu_per_turn_ms']:.3f} | "
            f"{added:+.3f} |"
        )


if __name__ == "__main__":
    main()
