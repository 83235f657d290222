"""A small OpenAI-compatible Chat Completions server for benchmarks (stdlib asyncio only).

`POST .../chat/completions` answers like a model that first asks for a tool and then
answers: with no tool result after the last user message it returns a `get_weather`
tool call, otherwise a text answer; with `"stream": true` it sends Server-Sent Events
(chunked transfer encoding, one event per chunk: text in 8-character fragments,
tool-call arguments in fragments, a finish chunk, a usage chunk, `[DONE]`). HTTP/1.1
keep-alive. `--latency` waits that many milliseconds before answering (a model's time
to first token). It listens on 127.0.0.1 only.

Run: `python -m benchmarks.openai_server --port 0` prints `PORT <n>` once listening.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any

ANSWER = "It is sunny in Paris, 21 degrees. A fine day for a walk along the Seine."
FRAGMENT = 8


def _reply(body: dict[str, Any]) -> tuple[str | None, list[dict[str, Any]]]:
    """(text, tool calls) the scripted model answers to a request body."""
    results = 0
    for m in reversed(body.get("messages", [])):
        if m.get("role") == "user":
            break
        if m.get("role") == "tool":
            results += 1
    if results:
        return ANSWER, []
    call = {
        "id": "call_weather_1",
        "type": "function",
        "function": {"name": "get_weather", "arguments": json.dumps({"city": "Paris"})},
    }
    return None, [call]


def _usage(body: dict[str, Any]) -> dict[str, int]:
    prompt = sum(len(str(m.get("content") or "")) for m in body.get("messages", [])) // 4 + 1
    return {"prompt_tokens": prompt, "completion_tokens": 12, "total_tokens": prompt + 12}


def _completion(body: dict[str, Any]) -> bytes:
    text, calls = _reply(body)
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if calls:
        message["tool_calls"] = calls
    return json.dumps(
        {
            "id": "chatcmpl-bench",
            "object": "chat.completion",
            "created": 0,
            "model": body.get("model", "bench"),
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": "tool_calls" if calls else "stop",
                }
            ],
            "usage": _usage(body),
        }
    ).encode()


def _chunks(body: dict[str, Any]) -> list[dict[str, Any]]:
    text, calls = _reply(body)
    deltas: list[dict[str, Any]] = [{"role": "assistant", "content": ""}]
    if text:
        deltas += [{"content": text[i : i + FRAGMENT]} for i in range(0, len(text), FRAGMENT)]
    for index, call in enumerate(calls):
        arguments = call["function"]["arguments"]
        deltas.append(
            {
                "tool_calls": [
                    {
                        "index": index,
                        "id": call["id"],
                        "type": "function",
                        "function": {"name": call["function"]["name"], "arguments": ""},
                    }
                ]
            }
        )
        deltas += [
            {"tool_calls": [{"index": index, "function": {"arguments": arguments[i : i + 6]}}]}
            for i in range(0, len(arguments), 6)
        ]
    base = {"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 0}
    base["model"] = body.get("model", "bench")
    events = [
        {**base, "choices": [{"index": 0, "delta": d, "finish_reason": None}]} for d in deltas
    ]
    events.append(
        {
            **base,
            "choices": [
                {"index": 0, "delta": {}, "finish_reason": "tool_calls" if calls else "stop"}
            ],
        }
    )
    if (body.get("stream_options") or {}).get("include_usage"):
        events.append({**base, "choices": [], "usage": _usage(body)})
    return events


async def _handle(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, latency: float
) -> None:
    try:
        while True:
            try:
                head = await reader.readuntil(b"\r\n\r\n")
            except (asyncio.IncompleteReadError, ConnectionError):
                return
            lines = head.decode("latin-1").split("\r\n")
            method, path, _ = lines[0].split(" ", 2)
            headers = {}
            for line in lines[1:]:
                if ":" in line:
                    key, value = line.split(":", 1)
                    headers[key.strip().lower()] = value.strip()
            length = int(headers.get("content-length", "0"))
            raw = await reader.readexactly(length) if length else b""
            if method != "POST" or not path.rstrip("/").endswith("/chat/completions"):
                message = b'{"error": {"message": "not found"}}'
                writer.write(
                    b"HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\n"
                    b"Content-Length: %d\r\n\r\n%s" % (len(message), message)
                )
                await writer.drain()
                continue
            body = json.loads(raw or b"{}")
            if latency:
                await asyncio.sleep(latency)
            if body.get("stream"):
                writer.write(
                    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                    b"Cache-Control: no-cache\r\nTransfer-Encoding: chunked\r\n\r\n"
                )
                for event in _chunks(body):
                    data = b"data: " + json.dumps(event).encode() + b"\n\n"
                    writer.write(b"%x\r\n%s\r\n" % (len(data), data))
                    await writer.drain()
                done = b"data: [DONE]\n\n"
                writer.write(b"%x\r\n%s\r\n0\r\n\r\n" % (len(done), done))
            else:
                payload = _completion(body)
                writer.write(
                    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                    b"Content-Length: %d\r\n\r\n%s" % (len(payload), payload)
                )
            await writer.drain()
    except (ConnectionError, asyncio.IncompleteReadError):
        pass
    finally:
        writer.close()


async def serve(port: int, latency: float) -> None:
    """Listen on 127.0.0.1:`port` until cancelled; print `PORT <n>` when ready."""
    server = await asyncio.start_server(
        lambda r, w: _handle(r, w, latency), "127.0.0.1", port, backlog=4096
    )
    print(f"PORT {server.sockets[0].getsockname()[1]}", flush=True)
    async with server:
        await server.serve_forever()


def main(argv: list[str] | None = None) -> None:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--latency", type=float, default=0.0, help="milliseconds per answer")
    args = parser.parse_args(argv)
    try:
        asyncio.run(serve(args.port, args.latency / 1000))
    except KeyboardInterrupt:
        sys.exit(0)


if __name__ == "__main__":
    main()
