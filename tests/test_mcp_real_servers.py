"""McpToolset against servers nobody here wrote, each through a real `Chain` turn:
the npm reference server `@modelcontextprotocol/server-everything` (stdio and streamable
HTTP) and the PyPI server `mcp-server-time` (stdio).

`.ci/mcp-servers` installs them under `.cache/mcp-servers/` (or set
`ADVISORCHAIN_MCP_SERVERS` to where they are). Without them these tests skip, saying how
to install them; in CI (`CI` set) they fail instead.
"""

from __future__ import annotations

import io
import os
import shutil
import socket
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TextIO

import anyio
import pytest

try:
    import mcp  # noqa: F401
except ImportError:  # pragma: no cover - only without the extra
    if os.environ.get("CI"):
        raise
    pytest.skip("needs the 'mcp' extra: pip install -e '.[mcp]'", allow_module_level=True)

from advisorchain import (
    Chain,
    ChatResponse,
    ImagePart,
    ResponseCompleted,
    Result,
    StreamEvent,
    ToolCall,
    ToolCallingAdvisor,
    ToolMessage,
    ToolProgress,
    UserMessage,
)
from advisorchain.providers import ScriptedChatModel
from advisorchain.toolsets import (
    ConsoleElicitor,
    DeferredElicitation,
    McpToolset,
)

ROOT = Path(__file__).resolve().parent.parent
SERVERS = Path(os.environ.get("ADVISORCHAIN_MCP_SERVERS", ROOT / ".cache" / "mcp-servers"))
EVERYTHING = SERVERS / "npm/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
TIME_SERVER = SERVERS / "pypi" / "bin" / "mcp-server-time"
NODE = shutil.which("node")


def _require(present: bool, what: str) -> None:
    if present:
        return
    message = f"{what} is not installed: run `bash .ci/mcp-servers` (looked in {SERVERS})"
    if os.environ.get("CI"):
        pytest.fail(f"CI must run the real-server tests: {message}")
    pytest.skip(message)


@pytest.fixture
def everything() -> list[str]:
    """The command line of server-everything (without the transport argument)."""
    _require(NODE is not None and EVERYTHING.is_file(), "@modelcontextprotocol/server-everything")
    assert NODE is not None
    return [NODE, str(EVERYTHING)]


@pytest.fixture
def time_server() -> str:
    _require(TIME_SERVER.is_file(), "mcp-server-time")
    return str(TIME_SERVER)


@pytest.fixture
def errlog(tmp_path: Path) -> Iterator[TextIO]:
    with open(tmp_path / "server-stderr.log", "w") as log:
        yield log


def _call(name: str, call_id: str, **arguments: Any) -> ToolCall:
    return ToolCall.from_arguments(name, arguments, id=call_id)


def _tool_messages(response: ChatResponse) -> list[ToolMessage]:
    return [m for m in response.messages if isinstance(m, ToolMessage)]


@pytest.mark.anyio
async def test_server_everything_over_stdio_in_a_chain_turn(
    everything: list[str], errlog: TextIO, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ADVISORCHAIN_TEST_SECRET", "s3cret-value")
    command, *args = everything
    async with McpToolset.stdio(
        command, [*args, "stdio"], errlog=errlog, name="everything", timeout=30
    ) as toolset:
        tools = await toolset.tools()
        by_name = {t.name: t for t in tools}
        assert by_name["get-sum"].read_only
        model = ScriptedChatModel(
            [
                [
                    _call("get-sum", "c1", a=2, b=40),
                    _call("get-tiny-image", "c2"),
                    _call("get-structured-content", "c3", location="Chicago"),
                    _call("get-env", "c4"),
                ],
                "done",
            ]
        )
        chain = Chain([ToolCallingAdvisor()], model=model, tools=tools)
        response = await chain.call("use the tools")
    total, image, weather, env = _tool_messages(response)
    assert not any(m.is_error for m in (total, image, weather, env)), response.messages
    assert "42" in total.text
    assert isinstance(image.content, tuple)
    [picture] = [p for p in image.content if isinstance(p, ImagePart)]
    assert picture.media_type == "image/png" and picture.data is not None
    assert picture.data.startswith(b"\x89PNG")
    assert "temperature" in weather.text
    # The server received only the SDK's minimal environment, none of this process's.
    assert "s3cret-value" not in env.text and "ADVISORCHAIN_TEST_SECRET" not in env.text
    assert response.text == "done"
    # The model's next request carried the image to it.
    second = model.requests[1]
    assert any(isinstance(m, ToolMessage) and isinstance(m.content, tuple) for m in second.messages)


@pytest.mark.anyio
async def test_server_everything_progress_streams_and_task_tools_fail_clearly(
    everything: list[str], errlog: TextIO
) -> None:
    command, *args = everything
    async with McpToolset.stdio(
        command, [*args, "stdio"], errlog=errlog, name="everything", timeout=30
    ) as toolset:
        model = ScriptedChatModel(
            [
                _call("trigger-long-running-operation", "c1", duration=1, steps=3),
                _call("simulate-research-query", "c2", topic="MCP"),
                "done",
            ]
        )
        chain = Chain([ToolCallingAdvisor()], model=model, tools=await toolset.tools())
        events: list[StreamEvent] = [event async for event in chain.stream("go")]
    progress = [e for e in events if isinstance(e, ToolProgress)]
    assert [(e.call_id, e.progress, e.total) for e in progress] == [
        ("c1", 1.0, 3.0),
        ("c1", 2.0, 3.0),
        ("c1", 3.0, 3.0),
    ]
    last = events[-1]
    assert isinstance(last, ResponseCompleted)
    operation, research = _tool_messages(last.response)
    assert not operation.is_error and "completed" in operation.text
    assert research.is_error and "runs only as an MCP task" in research.text


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@asynccontextmanager
async def _http_server(command: list[str], port: int, log: TextIO) -> AsyncIterator[None]:
    env = {"PATH": os.environ.get("PATH", ""), "PORT": str(port)}
    process = await anyio.open_process(command, env=env, stdout=log, stderr=log)
    try:
        with anyio.fail_after(60):
            while True:
                try:
                    stream = await anyio.connect_tcp("127.0.0.1", port)
                except OSError:
                    if process.returncode is not None:
                        raise RuntimeError("the HTTP server exited at start") from None
                    await anyio.sleep(0.1)
                else:
                    await stream.aclose()
                    break
        yield
    finally:
        process.terminate()
        with anyio.move_on_after(10, shield=True):
            await process.wait()
        if process.returncode is None:
            process.kill()
        await process.aclose()


# On trio the SDK's streamable-HTTP client leaves its SSE readers to the garbage collector
# (see test_mcp_http.py): only those warnings, from the SDK's own generators, are ignored.
@pytest.mark.filterwarnings(r"ignore:Async generator 'http(x|core)2\.:ResourceWarning")
@pytest.mark.filterwarnings(
    r"ignore:Exception ignored in. <async_generator object "
    r"(EventSource\.__aiter__|PoolByteStream\.__aiter__|Response\.aiter_(bytes|text))"
    ":pytest.PytestUnraisableExceptionWarning"
)
@pytest.mark.anyio
async def test_server_everything_over_streamable_http_in_a_chain_turn(
    everything: list[str], errlog: TextIO
) -> None:
    port = _free_port()
    async with _http_server([*everything, "streamableHttp"], port, errlog):
        url = f"http://127.0.0.1:{port}/mcp"
        async with McpToolset.http(url, prefix="ev_", timeout=30) as toolset:
            model = ScriptedChatModel(
                [
                    [
                        _call("ev_echo", "c1", message="over HTTP"),
                        _call("ev_get-resource-reference", "c2", resourceType="Text", resourceId=3),
                    ],
                    "done",
                ]
            )
            chain = Chain([ToolCallingAdvisor()], model=model, tools=await toolset.tools())
            response = await chain.call("go")
    echo, reference = _tool_messages(response)
    assert echo.text == "Echo: over HTTP"
    assert not reference.is_error and "demo://resource" in reference.text
    assert response.text == "done"


@pytest.mark.anyio
@pytest.mark.parametrize("streamed", [False, True])
async def test_mcp_server_time_in_a_chain_turn(
    time_server: str, errlog: TextIO, streamed: bool
) -> None:
    async with McpToolset.stdio(
        time_server, ["--local-timezone", "UTC"], errlog=errlog, timeout=30
    ) as toolset:
        tools = await toolset.tools()
        assert {"get_current_time", "convert_time"} <= {t.name for t in tools}
        model = ScriptedChatModel(
            [
                [
                    _call("get_current_time", "c1", timezone="Europe/Paris"),
                    _call(
                        "convert_time",
                        "c2",
                        source_timezone="UTC",
                        time="12:00",
                        target_timezone="Asia/Tokyo",
                    ),
                    _call("get_current_time", "c3", timezone="Not/AZone"),
                ],
                "done",
            ]
        )
        chain = Chain([ToolCallingAdvisor()], model=model, tools=tools)
        if streamed:
            events = [event async for event in chain.stream("what time is it?")]
            last = events[-1]
            assert isinstance(last, ResponseCompleted)
            response = last.response
        else:
            response = await chain.call("what time is it?")
    now, converted, bad = _tool_messages(response)
    assert not now.is_error and "Europe/Paris" in now.text
    assert not converted.is_error and "21:00" in converted.text
    assert bad.is_error and "Not/AZone" in bad.text
    assert response.text == "done"


@pytest.mark.anyio
async def test_server_everything_elicitation_answered_at_the_console(
    everything: list[str], errlog: TextIO
) -> None:
    lines = [
        "Ada Lovelace",  # name
        "y",  # check
        "",  # firstLine: its default
        "not-an-address",  # email: asked again
        "ada@example.com",
        "",  # homepage: optional, left out
        "1815-12-10",  # birthdate
        "101",  # integer: over its maximum, asked again
        "7",
        "",  # number: its default
        "Rachel",  # single select by value
        "2, 4",  # multiple select by number: Piano, Drums
        "",  # titled single select: its default
        "1",  # titled multiple select: fish-1
        "pet-2",  # legacy titled enum
    ]
    shown = io.StringIO()
    console = ConsoleElicitor(input=io.StringIO("\n".join(lines) + "\n"), output=shown)
    command, *args = everything
    async with McpToolset.stdio(
        command, [*args, "stdio"], errlog=errlog, name="everything", elicitation=console
    ) as toolset:
        model = ScriptedChatModel([_call("trigger-elicitation-request", "c1"), "thanks"])
        chain = Chain([ToolCallingAdvisor()], model=model, tools=await toolset.tools())
        response = await chain.call("ask me")
    [result] = _tool_messages(response)
    assert not result.is_error, result.text
    for line in (
        "- Name: Ada Lovelace",
        "- Agreed to terms: true",
        "- Email: ada@example.com",
        "- Birthdate: 1815-12-10",
        "- Favorite Integer: 7",
        "- Favorite Number: 3.14",
    ):
        assert line in result.text
    assert '"untitledMultipleSelectEnum": [\n' in result.text and '"Drums"' in result.text
    assert "not an e-mail address" in shown.getvalue() and "must be <= 100" in shown.getvalue()


@pytest.mark.anyio
async def test_server_everything_deferred_elicitation_defers_and_resumes(
    everything: list[str], errlog: TextIO
) -> None:
    elicitation = DeferredElicitation()
    command, *args = everything
    async with McpToolset.stdio(
        command, [*args, "stdio"], errlog=errlog, name="everything", elicitation=elicitation
    ) as toolset:
        model = ScriptedChatModel([_call("trigger-elicitation-request", "c1"), "thanks"])
        chain = Chain([ToolCallingAdvisor(), elicitation], model=model, tools=await toolset.tools())
        events = [event async for event in chain.stream("ask me")]
        last = events[-1]
        assert isinstance(last, ResponseCompleted)
        deferred = last.response
        [question] = deferred.deferred
        schema = question.metadata["schema"]
        assert schema is not None and "birthdate" in schema["properties"]
        transcript = [UserMessage(content="ask me"), *deferred.messages]
        answer = Result({"name": "Ada", "integer": 7})
        resumed = await chain.call(transcript, decisions={"c1": answer})
    [result] = _tool_messages(resumed)
    assert "- Name: Ada" in result.text and "- Favorite Integer: 7" in result.text
    assert resumed.text == "thanks"


def test_the_install_script_is_what_ci_can_call() -> None:
    script = ROOT / ".ci" / "mcp-servers"
    assert script.is_file() and os.access(script, os.X_OK)
    text = script.read_text()
    assert "@modelcontextprotocol/server-everything@" in text and "mcp-server-time==" in text
