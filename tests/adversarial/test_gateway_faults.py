"""Faults of real OpenAI-compatible servers and gateways, over a real 127.0.0.1 server or
a mock transport: streams that stay open after their end marker, keys echoed back in error
bodies, text that UTF-8 cannot encode. Each: a typed error or a valid result, nothing
leaked, no thread or socket left behind."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import anyio
import httpx
import pytest

from advisorchain import (
    AdvisorChainError,
    Chain,
    ChatRequest,
    ResponseCompleted,
    ToolCall,
    ToolCallingAdvisor,
    ToolMessage,
    UserMessage,
    tool,
)
from advisorchain.providers import AnthropicChatModel, OpenAIChatModel

from .support import KEY, exception_chain_text, nothing_left_behind
from provider_support import HTTPX_ABANDONED_GENERATORS, Recorder, sse_response

pytestmark = HTTPX_ABANDONED_GENERATORS

REQUEST = ChatRequest(messages=(UserMessage(content="Hi"),))
GUARD = 30  # seconds: a hang fails the test instead of stalling the suite


class Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, action: Callable[[Handler], None]) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.action = action
        self.release = threading.Event()
        self.bodies: list[bytes] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: Server

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        self.server.bodies.append(self.rfile.read(int(self.headers.get("content-length", 0))))
        self.server.action(self)

    def stream_then_hold(self, *events: bytes) -> None:
        """Send `events` as a chunked SSE body, then keep the connection open."""
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        for data in events:
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.flush()
        self.server.release.wait(GUARD)  # never ends the body while the test runs
        self.close_connection = True


@pytest.fixture
def serve() -> Iterator[Callable[[Callable[[Handler], None]], Server]]:
    servers: list[tuple[Server, threading.Thread]] = []

    def start(action: Callable[[Handler], None]) -> Server:
        server = Server(action)
        thread = threading.Thread(target=server.serve_forever, args=(0.01,), daemon=True)
        thread.start()
        servers.append((server, thread))
        return server

    yield start
    for server, thread in servers:
        server.release.set()
        server.shutdown()
        server.server_close()
        thread.join(5)


def chunk(payload: dict[str, Any]) -> bytes:
    return f"data: {json.dumps(payload)}\n\n".encode()


OPENAI_EVENTS = (
    chunk({"id": "c", "choices": [{"index": 0, "delta": {"content": "Hello"}}]}),
    chunk({"id": "c", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}),
    chunk({"id": "c", "choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 1}}),
    b"data: [DONE]\n\n",
)

ANTHROPIC_EVENTS = tuple(
    f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode()
    for e in (
        {"type": "message_start", "message": {"id": "m", "usage": {"input_tokens": 3}}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "text_delta", "text": "Hello"},
        },
        {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn"},
            "usage": {"output_tokens": 1},
        },
        {"type": "message_stop"},
    )
)


@pytest.mark.anyio
@pytest.mark.parametrize("provider", ["openai", "anthropic"])
async def test_stream_that_stays_open_after_its_end_marker_finishes(
    serve: Callable[[Callable[[Handler], None]], Server], provider: str
) -> None:
    # before: the client waited for the socket to close, i.e. forever (or the read timeout)
    events = OPENAI_EVENTS if provider == "openai" else ANTHROPIC_EVENTS
    server = serve(lambda h: h.stream_then_hold(*events))
    model: OpenAIChatModel | AnthropicChatModel
    if provider == "openai":
        model = OpenAIChatModel("m", base_url=f"{server.url}/v1")
    else:
        model = AnthropicChatModel("c", api_key="k", base_url=server.url)
    with nothing_left_behind():
        async with model:
            with anyio.fail_after(GUARD):
                received = [e async for e in model.stream(REQUEST)]
            assert not server.release.is_set()  # finished while the server still held on
        server.release.set()
    final = received[-1]
    assert isinstance(final, ResponseCompleted)
    assert final.response.text == "Hello"
    assert final.response.usage.input_tokens == 3


@pytest.mark.anyio
async def test_chain_stream_over_a_server_that_holds_the_connection(
    serve: Callable[[Callable[[Handler], None]], Server],
) -> None:
    server = serve(lambda h: h.stream_then_hold(*OPENAI_EVENTS))
    with nothing_left_behind():
        async with OpenAIChatModel("m", base_url=f"{server.url}/v1") as model:
            chain = Chain([ToolCallingAdvisor()], model=model)
            with anyio.fail_after(GUARD):
                events = [e async for e in chain.stream("Hi")]
        server.release.set()
    assert isinstance(events[-1], ResponseCompleted) and events[-1].response.text == "Hello"


# --- keys echoed back -------------------------------------------------------------------


def echo(
    status: int, body: Callable[[httpx.Request], Any]
) -> Callable[[httpx.Request], httpx.Response]:
    def reply(request: httpx.Request) -> httpx.Response:
        return httpx.Response(status, json=body(request))

    return reply


def auth(request: httpx.Request) -> str:
    return request.headers.get("authorization") or request.headers.get("x-api-key") or ""


ECHOES: list[tuple[int, Callable[[httpx.Request], Any]]] = [
    (401, lambda r: {"error": {"message": f"bad header {auth(r)}"}}),
    (400, lambda r: {"detail": f"Authorization: {auth(r)} rejected", "headers": dict(r.headers)}),
    (200, lambda r: {"error": {"message": f"upstream refused {auth(r)}", "code": 403}}),
    (200, lambda r: {"object": "error", "message": f"key {auth(r)}", "code": 401}),
    (200, lambda r: {"choices": [{"message": {"content": [f"echo {auth(r)}"]}}]}),
    (
        200,
        lambda r: {"choices": [{"message": {"tool_calls": [{"function": {"name": [auth(r)]}}]}}]},
    ),
]


@pytest.mark.anyio
@pytest.mark.parametrize(("status", "body"), ECHOES)
async def test_openai_key_echoed_in_an_error_body_never_reaches_the_exception(
    status: int, body: Callable[[httpx.Request], Any]
) -> None:
    # before: in-band errors (200 + {"error": ...}) and shape errors kept the key in
    # their message and body
    recorder = Recorder(echo(status, body))
    model = OpenAIChatModel(
        "m", base_url="http://gw/v1", api_key=KEY, http_client=recorder.client(), max_retries=0
    )
    with pytest.raises(AdvisorChainError) as caught:
        await model.call(REQUEST)
    assert KEY in auth(recorder.requests[0])
    assert KEY not in exception_chain_text(caught.value)


STREAM_ECHOES: list[Callable[[str], bytes]] = [
    lambda key: f'data: {{"error": {{"message": "bad key {key}", "code": 401}}}}\n\n'.encode(),
    lambda key: f"event: error\ndata: rejected Bearer {key}\n\n".encode(),
    lambda key: f'data: {{"choices": [{{"delta": {{"content": ["{key}"]}}}}]}}\n\n'.encode(),
    lambda key: (
        f'data: {{"choices": [{{"delta": {{"tool_calls": [{{"id": ["{key}"]}}]}}}}]}}\n\n'.encode()
    ),
]


@pytest.mark.anyio
@pytest.mark.parametrize("event", STREAM_ECHOES)
async def test_openai_key_echoed_in_the_stream_never_reaches_the_exception(
    event: Callable[[str], bytes],
) -> None:
    recorder = Recorder(lambda request: sse_response(event(auth(request))))
    model = OpenAIChatModel(
        "m", base_url="http://gw/v1", api_key=KEY, http_client=recorder.client()
    )
    with pytest.raises(AdvisorChainError) as caught:
        _ = [e async for e in model.stream(REQUEST)]
    assert KEY not in exception_chain_text(caught.value)


@pytest.mark.anyio
@pytest.mark.parametrize("streamed", [False, True])
async def test_anthropic_key_echoed_in_an_error_never_reaches_the_exception(streamed: bool) -> None:
    def reply(request: httpx.Request) -> httpx.Response:
        error = {"type": "error", "error": {"type": "api_error", "message": f"key {auth(request)}"}}
        if streamed:
            return sse_response(f"event: error\ndata: {json.dumps(error)}\n\n".encode())
        return httpx.Response(200, json=error)

    recorder = Recorder(reply)
    model = AnthropicChatModel(
        "c", api_key=KEY, base_url="http://gw", http_client=recorder.client()
    )
    with pytest.raises(AdvisorChainError) as caught:
        if streamed:
            _ = [e async for e in model.stream(REQUEST)]
        else:
            await model.call(REQUEST)
    assert KEY not in exception_chain_text(caught.value)


# --- text that UTF-8 cannot encode -------------------------------------------------------

LONE = "report-\udcff.txt"  # what os.listdir returns for a name that is not valid UTF-8


@tool
def list_files() -> str:
    """List the files in the working directory."""
    return f"files: {LONE}"


def completion(text: str = "done", calls: list[dict[str, Any]] | None = None) -> httpx.Response:
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if calls:
        message["tool_calls"] = calls
    return httpx.Response(
        200, json={"choices": [{"index": 0, "message": message, "finish_reason": "stop"}]}
    )


@pytest.mark.anyio
async def test_lone_surrogates_in_messages_and_tool_results_are_sent_as_replacement() -> None:
    # before: httpx encoded the body as UTF-8 and the request failed (BadRequestError
    # "cannot be sent as JSON"), so a tool listing a directory broke the conversation
    call = {"id": "c1", "type": "function", "function": {"name": "list_files", "arguments": "{}"}}
    recorder = Recorder(completion("", [call]), completion("listed"))
    model = OpenAIChatModel("m", base_url="http://gw/v1", http_client=recorder.client())
    chain = Chain([ToolCallingAdvisor()], model=model, tools=[list_files])
    response = await chain.call(f"what about {LONE}?")
    assert response.text == "listed"
    second = json.loads(recorder.requests[1].content.decode("utf-8"))
    assert second["messages"][0]["content"] == "what about report-\ufffd.txt?"
    assert second["messages"][-1]["content"] == "files: report-\ufffd.txt"
    # the transcript keeps what the tool returned; only the wire form is replaced
    assert isinstance(response.messages[-2], ToolMessage)
    assert LONE in response.messages[-2].content


@pytest.mark.anyio
@pytest.mark.parametrize("provider", ["openai", "anthropic"])
async def test_lone_surrogates_in_arguments_and_streams(provider: str) -> None:
    history = (
        UserMessage(content="\ud800 start"),
        ToolCall(id="c\udc80", name="f", arguments='{"path": "\udcff"}'),
    )
    messages = (
        history[0],
        __import__("advisorchain").AssistantMessage(tool_calls=(history[1],)),
        ToolMessage(tool_call_id="c\udc80", name="f", content="\udcfe"),
    )
    if provider == "openai":
        reply = sse_response(b"".join(OPENAI_EVENTS))
        recorder = Recorder(reply)
        model: Any = OpenAIChatModel("m", base_url="http://gw/v1", http_client=recorder.client())
    else:
        recorder = Recorder(sse_response(b"".join(ANTHROPIC_EVENTS)))
        model = AnthropicChatModel(
            "c", api_key="k", base_url="http://gw", http_client=recorder.client()
        )
    events = [e async for e in model.stream(ChatRequest(messages=messages))]
    assert isinstance(events[-1], ResponseCompleted)
    sent = recorder.requests[0].content.decode("utf-8")
    assert "\ufffd" in sent and "\\ud" not in sent
