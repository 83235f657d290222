"""The plain-ASGI plumbing both protocol apps share: bounded JSON bodies, the `Origin`
check, server-sent events, and cancelling the turn when the client goes away.

No web framework: an ASGI app is a coroutine of `(scope, receive, send)`, and these
apps need one route each, a JSON body and an SSE response; Starlette would add a
dependency (and its own request/response layer per event) for none of its features.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any

import anyio

from ..core.streams import closing_stream

__all__ = [
    "ASGIApp",
    "Receive",
    "RequestRejected",
    "Scope",
    "Send",
    "UiLimits",
    "check_origin",
    "read_json",
    "send_json_error",
    "serve_lifespan",
    "stream_sse",
]

Scope = Mapping[str, Any]
Receive = Callable[[], Awaitable[Mapping[str, Any]]]
Send = Callable[[Mapping[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


@dataclass(frozen=True, kw_only=True)
class UiLimits:
    """What a request may be: bytes of its body, messages in it, characters of one message.

    `allowed_origins`: the browser origins (`scheme://host:port`) besides the app's own
    host that may call it; a request with any other `Origin` header is refused (403). A
    request without `Origin` (a server-side client, `curl`) is accepted.

    `allowed_hosts`: the names the request's `Host` header may give (any port); others are
    refused (421), which stops a DNS-rebinding page whose origin would match its own host.
    The default is the loopback names; give the names a deployment is reached by, or
    `None` to accept any.
    """

    max_body_bytes: int = 1_000_000
    max_messages: int = 200
    allowed_origins: Collection[str] = ()
    allowed_hosts: Collection[str] | None = ("127.0.0.1", "localhost", "[::1]", "::1")


class RequestRejected(Exception):
    """A request refused before the turn starts: answered with `status` and `message`."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key.lower() == name:
            return bytes(value).decode("latin-1")
    return None


def _hostname(host: str | None) -> str | None:
    """The name of a `Host` header, without its port (`[::1]:80` -> `[::1]`)."""
    if host is None:
        return None
    if host.startswith("["):
        return host[: host.find("]") + 1]
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def check_origin(scope: Scope, limits: UiLimits) -> None:
    """Refuse a request for a host not in `limits.allowed_hosts` (421), and a browser
    request from an origin that is neither the app's own host nor one of
    `limits.allowed_origins` (403): another site's page cannot drive the chain."""
    host = _header(scope, b"host")
    if limits.allowed_hosts is not None and _hostname(host) not in limits.allowed_hosts:
        raise RequestRejected(421, "host not allowed")
    origin = _header(scope, b"origin")
    if origin is None:
        return
    if origin in limits.allowed_origins:
        return
    if host is not None and origin in (f"http://{host}", f"https://{host}"):
        return
    raise RequestRejected(403, "origin not allowed")


async def read_json(receive: Receive, scope: Scope, limits: UiLimits) -> Any:
    """The request's JSON body, read up to `limits.max_body_bytes` (413 past it)."""
    if scope.get("method") != "POST":
        raise RequestRejected(405, "use POST")
    content_type = (_header(scope, b"content-type") or "").split(";")[0].strip().lower()
    if content_type != "application/json":
        raise RequestRejected(415, "the body must be application/json")
    declared = _header(scope, b"content-length")
    if declared is not None and declared.isdigit() and int(declared) > limits.max_body_bytes:
        raise RequestRejected(413, "request body too large")
    body = bytearray()
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise RequestRejected(400, "client went away")
        body += message.get("body", b"")
        if len(body) > limits.max_body_bytes:
            raise RequestRejected(413, "request body too large")
        if not message.get("more_body", False):
            break
    try:
        return json.loads(body)
    except (ValueError, UnicodeDecodeError):
        raise RequestRejected(400, "the body is not valid JSON") from None


async def send_json_error(send: Send, status: int, message: str) -> None:
    """A plain JSON error response, `{"error": message}`."""
    body = json.dumps({"error": message}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


async def stream_sse(
    receive: Receive,
    send: Send,
    frames: Callable[[], AsyncIterator[str]],
    *,
    headers: Collection[tuple[bytes, bytes]] = (),
    done: str | None = None,
) -> None:
    """Send each frame of `frames()` as one SSE `data:` event, then `done` if given.

    The frames are produced in a task group next to a watcher of `receive`: when the
    client disconnects, the producer (the chain's turn, its model call, its tools) is
    cancelled, and so is nothing else.
    """
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [
                (b"content-type", b"text/event-stream; charset=utf-8"),
                (b"cache-control", b"no-cache"),
                (b"x-accel-buffering", b"no"),
                *headers,
            ],
        }
    )
    async with anyio.create_task_group() as group:

        async def watch() -> None:
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    group.cancel_scope.cancel()
                    return

        group.start_soon(watch)
        try:
            async with closing_stream(frames()) as produced:
                async for frame in produced:
                    await send(
                        {
                            "type": "http.response.body",
                            "body": f"data: {frame}\n\n".encode(),
                            "more_body": True,
                        }
                    )
            if done is not None:
                await send(
                    {
                        "type": "http.response.body",
                        "body": f"data: {done}\n\n".encode(),
                        "more_body": True,
                    }
                )
            await send({"type": "http.response.body", "body": b""})
        except OSError:  # the connection broke while sending: nothing left to tell
            pass
        group.cancel_scope.cancel()


async def serve_lifespan(receive: Receive, send: Send) -> None:
    """Answer an ASGI server's lifespan messages (nothing to start or stop)."""
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return
