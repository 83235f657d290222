"""McpToolset against a real MCP server over streamable HTTP on 127.0.0.1.

The server (tests/mcp_servers/calc_server.py, the SDK's `MCPServer`) runs under uvicorn
in a thread with its own asyncio loop, on a port the OS picks, so the client side of
each test can run on asyncio and on trio.
"""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

try:
    import mcp  # noqa: F401
    import uvicorn
except ImportError:  # pragma: no cover - only without the extra
    if os.environ.get("CI"):
        raise
    pytest.skip("needs the 'mcp' extra: pip install -e '.[mcp]'", allow_module_level=True)

from advisorchain import Chain, ChatResponse, ToolCall, ToolCallingAdvisor, ToolMessage
from advisorchain.providers import ScriptedChatModel
from advisorchain.toolsets import McpConnectionError, McpToolset

SERVER = Path(__file__).parent / "mcp_servers" / "calc_server.py"

# On trio, the SDK's streamable-HTTP client leaves its SSE readers (httpx2/httpcore2 async
# generators) to the garbage collector, and trio's finalizer reports each as a
# ResourceWarning. The behaviour is right on both backends; only these warnings, from
# the SDK's own generators, are ignored.
pytestmark = [
    pytest.mark.filterwarnings(r"ignore:Async generator 'http(x|core)2\.:ResourceWarning"),
    pytest.mark.filterwarnings(
        r"ignore:Exception ignored in. <async_generator object "
        r"(EventSource\.__aiter__|PoolByteStream\.__aiter__|Response\.aiter_(bytes|text))"
        ":pytest.PytestUnraisableExceptionWarning"
    ),
]


def _load_server_module() -> Any:
    spec = importlib.util.spec_from_file_location("calc_server", SERVER)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class _HttpServer:
    """uvicorn serving the calc server's streamable-HTTP app in a background thread."""

    def __init__(self) -> None:
        self.socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.socket.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.socket.getsockname()[1]}/mcp"
        self.server: uvicorn.Server | None = None
        self.failed: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        try:
            # Built in this thread so the app's anyio primitives belong to its own loop.
            app = _load_server_module().build_server().streamable_http_app()
            config = uvicorn.Config(app, log_level="critical", timeout_graceful_shutdown=1)
            self.server = uvicorn.Server(config)
            self.server.run(sockets=[self.socket])
        except BaseException as exc:  # reported by start()
            self.failed = exc

    def start(self) -> None:
        self.thread.start()
        deadline = time.monotonic() + 30
        while not (self.server is not None and self.server.started):
            if self.failed is not None or not self.thread.is_alive():
                raise RuntimeError(f"the MCP test server did not start: {self.failed!r}")
            if time.monotonic() > deadline:
                raise RuntimeError("the MCP test server did not start within 30 s")
            time.sleep(0.01)

    def stop(self) -> None:
        if self.server is not None:
            self.server.should_exit = True
            self.server.force_exit = True
        self.thread.join(30)
        self.socket.close()
        assert not self.thread.is_alive(), "the MCP test server did not stop"


@pytest.fixture
def http_server() -> Iterator[_HttpServer]:
    server = _HttpServer()
    server.start()
    yield server
    server.stop()


def _call(tool_name: str, call_id: str, /, **arguments: Any) -> ToolCall:
    return ToolCall.from_arguments(tool_name, arguments, id=call_id)


def _tool_messages(response: ChatResponse) -> list[ToolMessage]:
    return [m for m in response.messages if isinstance(m, ToolMessage)]


@pytest.mark.anyio
async def test_a_full_tool_calling_turn_over_http(http_server: _HttpServer) -> None:
    headers = {"X-Api-Key": "k-123"}
    async with McpToolset.http(http_server.url, headers=headers, prefix="calc_") as toolset:
        tools = await toolset.tools()
        assert {"calc_add", "calc_divide", "calc_header_value"} <= {t.name for t in tools}
        model = ScriptedChatModel(
            [
                [
                    _call("calc_add", "c1", a=40, b=2),
                    _call("calc_header_value", "c2", name="X-Api-Key"),
                ],
                _call("calc_divide", "c3", a=1, b=0),
                "done",
            ]
        )
        chain = Chain([ToolCallingAdvisor()], model=model, tools=tools)
        response = await chain.call("go")
    added, header, divided = _tool_messages(response)
    assert added == ToolMessage(tool_call_id="c1", name="calc_add", content="42")
    assert header.content == "k-123"  # the configured headers reach the server
    assert divided.is_error and "cannot divide by zero" in divided.content
    assert response.text == "done"
    assert "k-123" not in repr(toolset)


@pytest.mark.anyio
async def test_tools_are_listed_again_after_list_changed_over_http(
    http_server: _HttpServer,
) -> None:
    async with McpToolset.http(http_server.url) as toolset:
        before = {t.name for t in await toolset.tools()}
        assert "double" not in before
        changed = anyio.Event()

        async def watch() -> None:
            await toolset.wait_for_tools_change()
            changed.set()

        async with anyio.create_task_group() as group:
            group.start_soon(watch)
            await anyio.wait_all_tasks_blocked()
            assert await toolset.call("grow", {}) == "grown"
            with anyio.fail_after(10):
                await changed.wait()
        after = {t.name for t in await toolset.tools()}
        assert after == before | {"double"}
        assert await toolset.call("double", {"x": 4}) == "8"


@pytest.mark.anyio
async def test_context_values_do_not_travel_over_http(http_server: _HttpServer) -> None:
    async with McpToolset.http(http_server.url, context_arguments={"tenant_id": "tenant"}) as ts:
        model = ScriptedChatModel(
            [[_call("echo_arguments", "c1", text="hi"), _call("whoami", "c2", question="q")], "ok"]
        )
        chain = Chain([ToolCallingAdvisor()], model=model, tools=await ts.tools())
        response = await chain.call("go", tool_context={"tenant": "acme", "api_key": "sk-1"})
    echoed, whoami = (json.loads(m.text) for m in _tool_messages(response))
    assert echoed == {"text": "hi"}
    assert whoami == {"question": "q", "tenant_id": "acme"}


@pytest.mark.anyio
async def test_a_server_that_goes_away_is_a_clear_error(http_server: _HttpServer) -> None:
    async with McpToolset.http(http_server.url, name="calc-http") as toolset:
        tools = await toolset.tools()
        await anyio.to_thread.run_sync(http_server.stop)
        model = ScriptedChatModel([_call("add", "c1", a=1, b=1), "The calculator is down."])
        chain = Chain([ToolCallingAdvisor()], model=model, tools=tools)
        response = await chain.call("1+1?")
        [result] = _tool_messages(response)
        assert result.is_error
        assert "McpConnectionError" in result.content and "'calc-http'" in result.content
        assert response.text == "The calculator is down."  # the turn went on
        with pytest.raises(McpConnectionError):
            await toolset.tools()


@pytest.mark.anyio
async def test_an_unreachable_url_is_a_connection_error() -> None:
    with socket.socket() as probe:  # a port with nobody listening
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    toolset = McpToolset.http(f"http://127.0.0.1:{port}/mcp", headers={"Authorization": "s-9"})
    with pytest.raises(McpConnectionError, match="cannot connect") as caught:
        async with toolset:
            pass
    assert "s-9" not in str(caught.value)
