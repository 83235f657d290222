"""MCP error text: what a server reports about itself (`isError`, JSON-RPC errors) reaches
the model with its paths, bounded and scrubbed of what this process gave the server; local
exceptions keep their paths redacted. Against tests/mcp_servers/errors_server.py (stdio)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

import pytest

try:
    import mcp_types  # noqa: F401
except ImportError:  # pragma: no cover - only without the extra
    if os.environ.get("CI"):
        raise
    pytest.skip("needs the 'mcp' extra: pip install -e '.[mcp]'", allow_module_level=True)

from advisorchain import (
    Chain,
    ChatResponse,
    ResponseCompleted,
    ToolCall,
    ToolCallingAdvisor,
    ToolMessage,
    tool,
)
from advisorchain.core.scrub import describe_exception
from advisorchain.providers import ScriptedChatModel
from advisorchain.toolsets import McpProtocolError, McpToolError, McpToolset

pytestmark = pytest.mark.anyio

SERVER = str(Path(__file__).parent / "mcp_servers" / "errors_server.py")
TOKEN = "tok-4f9a1c2e7b"


@pytest.fixture
def errlog(tmp_path: Path) -> Iterator[TextIO]:
    with open(tmp_path / "server-stderr.log", "w") as log:
        yield log


def _server(errlog: TextIO, **options: Any) -> McpToolset:
    env = {"SERVER_TOKEN": TOKEN}
    return McpToolset.stdio(sys.executable, [SERVER], env=env, errlog=errlog, name="errors")


async def _results(toolset: McpToolset, calls: list[ToolCall], *, streamed: bool) -> list[str]:
    model = ScriptedChatModel([calls, "ok"])
    chain = Chain([ToolCallingAdvisor()], model=model, tools=await toolset.tools())
    response: ChatResponse
    if streamed:
        events = [event async for event in chain.stream("go")]
        assert isinstance(events[-1], ResponseCompleted)
        response = events[-1].response
    else:
        response = await chain.call("go")
    messages = [m for m in response.messages if isinstance(m, ToolMessage)]
    assert all(m.is_error for m in messages)
    return [m.text for m in messages]


@pytest.mark.parametrize("streamed", [False, True])
async def test_server_errors_reach_the_model_with_their_text(
    errlog: TextIO, streamed: bool
) -> None:
    calls = [
        ToolCall.from_arguments("read_file", {"path": "/data/x"}, id="c1"),
        ToolCall.from_arguments("checkout", {"path": "/etc/passwd"}, id="c2"),
        ToolCall.from_arguments("leaky", {}, id="c3"),
    ]
    async with _server(errlog) as toolset:
        read, checkout, leaky = await _results(toolset, calls, streamed=streamed)
    assert read == "Error: McpToolError: Error executing tool read_file: file not found: /data/x"
    assert checkout == (
        "Error: McpProtocolError: MCP server 'errors' failed tools/call 'checkout': "
        "/etc/passwd is outside the allowed repository '/srv/repo' (code -32602)"
    )
    # the server's words and paths stay; the value this process gave it and its traceback go
    assert leaky == (
        "Error: McpToolError: login with token <redacted> failed in /srv/app/auth.py "
        "[traceback removed]"
    )
    assert TOKEN not in leaky


async def test_secret_looking_environment_values_are_scrubbed(
    errlog: TextIO, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The server got the token by another way than `env`: still never shown.
    monkeypatch.setenv("MY_API_KEY", TOKEN)
    toolset = McpToolset.stdio(
        sys.executable, [SERVER], env={"SERVER_TOKEN": TOKEN}, errlog=errlog, name="errors"
    )
    toolset._given_values = ()  # only the environment scrub is left
    async with toolset:
        with pytest.raises(McpToolError) as raised:
            await toolset.call("leaky", {})
    assert TOKEN not in describe_exception(raised.value)
    assert "<redacted>" in describe_exception(raised.value)


async def test_server_error_text_is_bounded() -> None:
    long = McpToolError("file not found: /data/" + "x" * 10_000)
    described = describe_exception(long)
    assert described.startswith("McpToolError: file not found: /data/xxx")
    assert len(described) <= len("McpToolError: ") + 503


async def test_local_failures_keep_their_paths_redacted(errlog: TextIO) -> None:
    # The SDK refusing an answer here is a local failure: its message is redacted.
    local = McpProtocolError("MCP server 'x' failed: ValueError: bad /home/alice/.cache/f")
    assert describe_exception(local) == (
        "McpProtocolError: MCP server 'x' failed: ValueError: bad <path>"
    )

    @tool
    def open_config() -> str:
        """A local tool whose exception names a local file."""
        raise FileNotFoundError("/home/alice/secrets/config.toml")

    chain = Chain(
        [ToolCallingAdvisor()],
        model=ScriptedChatModel([ToolCall.from_arguments("open_config", {}), "ok"]),
        tools=[open_config],
    )
    response = await chain.call("go")
    result = next(m for m in response.messages if isinstance(m, ToolMessage))
    assert result.text == "Error: FileNotFoundError: <path>"
