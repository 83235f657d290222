"""McpToolset beyond text, against tests/mcp_servers/rich_server.py over stdio: content
parts, structured output, progress, timeouts, logs, cancellation, annotations."""

from __future__ import annotations

import io
import logging
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

import anyio
import pytest

try:
    import mcp_types
except ImportError:  # pragma: no cover - only without the extra
    if os.environ.get("CI"):
        raise
    pytest.skip("needs the 'mcp' extra: pip install -e '.[mcp]'", allow_module_level=True)

from advisorchain import (
    Advisor,
    Chain,
    ChatResponse,
    DocumentPart,
    ImagePart,
    StreamEvent,
    TextPart,
    ToolCall,
    ToolCallFinished,
    ToolCallingAdvisor,
    ToolCallStarted,
    ToolInvocation,
    ToolMessage,
    ToolNext,
    ToolProgress,
    ToolResult,
    UserMessage,
)
from advisorchain.advisors import ConsoleApprover, RedactionAdvisor, RedactionRule
from advisorchain.providers import ScriptedChatModel
from advisorchain.toolsets import (
    ElicitationAnswer,
    ElicitationRequest,
    McpCallResult,
    McpConnectionError,
    McpError,
    McpTaskRequiredError,
    McpToolset,
    SamplingPolicy,
    SamplingRequest,
)

SERVERS = Path(__file__).parent / "mcp_servers"
RICH = str(SERVERS / "rich_server.py")
CALC = str(SERVERS / "calc_server.py")


@pytest.fixture
def errlog(tmp_path: Path) -> Iterator[TextIO]:
    with open(tmp_path / "server-stderr.log", "w") as log:
        yield log


def _rich(errlog: TextIO, **options: Any) -> McpToolset:
    return McpToolset.stdio(sys.executable, [RICH], errlog=errlog, name="rich", **options)


def _call(name: str, call_id: str, **arguments: Any) -> ToolCall:
    return ToolCall.from_arguments(name, arguments, id=call_id)


def _tool_messages(response: ChatResponse) -> list[ToolMessage]:
    return [m for m in response.messages if isinstance(m, ToolMessage)]


class _Results(Advisor):
    """Keeps every tool result the loop produced (what a caller's hook sees)."""

    def __init__(self) -> None:
        self.results: list[ToolResult] = []

    async def call_tool(self, invocation: ToolInvocation, next: ToolNext) -> ToolResult:
        result = await next(invocation)
        self.results.append(result)
        return result


async def _turn(
    toolset: McpToolset, call: ToolCall, *, streamed: bool
) -> tuple[ChatResponse, list[ToolResult], list[StreamEvent]]:
    results = _Results()
    model = ScriptedChatModel([call, "ok"])
    chain = Chain([ToolCallingAdvisor(), results], model=model, tools=await toolset.tools())
    events: list[StreamEvent] = []
    if streamed:
        async for event in chain.stream("go"):
            events.append(event)
        response = chain_response(events)
    else:
        response = await chain.call("go")
    return response, results.results, events


def chain_response(events: list[StreamEvent]) -> ChatResponse:
    last = events[-1]
    assert hasattr(last, "response")
    response: ChatResponse = last.response
    return response


@pytest.mark.anyio
@pytest.mark.parametrize("streamed", [False, True])
async def test_images_reach_the_model_as_parts_audio_as_a_note(
    errlog: TextIO, streamed: bool
) -> None:
    async with _rich(errlog) as toolset:
        response, [result], _ = await _turn(toolset, _call("picture", "c1"), streamed=streamed)
    [message] = _tool_messages(response)
    assert not message.is_error
    assert isinstance(message.content, tuple)
    image, audio, caption = message.content
    assert isinstance(image, ImagePart) and image.media_type == "image/png"
    assert image.data is not None and image.data.startswith(b"\x89PNG")
    assert audio == TextPart(
        text="[audio content, audio/wav, about 4 bytes: not sent to the model]"
    )
    assert caption == TextPart(text="a caption")
    assert isinstance(result.value, McpCallResult)
    assert isinstance(result.value.raw, mcp_types.CallToolResult)
    assert [block.type for block in result.value.raw.content] == ["image", "audio", "text"]


@pytest.mark.anyio
async def test_embedded_blobs_and_resource_links(errlog: TextIO) -> None:
    async with _rich(errlog) as toolset:
        response, _, _ = await _turn(toolset, _call("resources", "c1"), streamed=False)
    [message] = _tool_messages(response)
    assert isinstance(message.content, tuple)
    document, link = message.content
    assert isinstance(document, DocumentPart) and document.data == b"%PDF-1.4"
    assert document.name == "report.pdf"
    assert link == TextPart(text="[resource link demo://docs/2 (second)]")


@pytest.mark.anyio
async def test_structured_content_is_validated_and_reaches_the_caller(errlog: TextIO) -> None:
    async with _rich(errlog) as toolset:
        tools = {t.name: t for t in await toolset.tools()}
        assert tools["count"].metadata["mcp_output_schema"]["required"] == ["total", "unit"]
        response, [result], _ = await _turn(toolset, _call("count", "c1", a=2, b=3), streamed=False)
        assert isinstance(result.value, McpCallResult)
        assert result.value.structured_content == {"total": 5, "unit": "items"}
        assert '"total": 5' in result.text

        response, [bad], _ = await _turn(toolset, _call("bad_count", "c2"), streamed=False)
    [message] = _tool_messages(response)
    assert message.is_error and bad.outcome == "error"
    assert "Invalid structured content returned by tool bad_count" in message.text


@pytest.mark.anyio
async def test_progress_arrives_as_tool_progress_events_between_start_and_finish(
    errlog: TextIO,
) -> None:
    async with _rich(errlog) as toolset:
        response, _, events = await _turn(toolset, _call("slow", "c7", steps=3), streamed=True)
    started = next(i for i, e in enumerate(events) if isinstance(e, ToolCallStarted))
    finished = next(i for i, e in enumerate(events) if isinstance(e, ToolCallFinished))
    progress = [e for e in events if isinstance(e, ToolProgress)]
    assert progress == [
        ToolProgress("c7", progress=float(n), total=3.0, message=f"step {n}") for n in (1, 2, 3)
    ]
    assert all(started < events.index(e) < finished for e in progress)
    assert _tool_messages(response)[0].text == "done after 3 steps"
    assert response.text == "ok"


@pytest.mark.issue32(3)
@pytest.mark.anyio
async def test_mcp_progress_messages_are_redacted(errlog: TextIO) -> None:
    redaction = RedactionAdvisor([RedactionRule("step", r"step \d")])
    async with _rich(errlog) as toolset:
        model = ScriptedChatModel([_call("slow", "c7", steps=2), "ok"])
        chain = Chain([redaction, ToolCallingAdvisor()], model=model, tools=await toolset.tools())
        events = [e async for e in chain.stream("go")]
    progress = [e for e in events if isinstance(e, ToolProgress)]
    assert [e.message for e in progress] == ["[REDACTED:step]"] * 2
    assert [e.progress for e in progress] == [1.0, 2.0]


@pytest.mark.anyio
@pytest.mark.parametrize("streamed", [False, True])
async def test_progress_keeps_a_call_alive_past_its_timeout(errlog: TextIO, streamed: bool) -> None:
    # 8 steps of 0.3 s: 2.4 s in all, never 1.5 s without an answer or progress.
    async with _rich(errlog, timeout=1.5) as toolset:
        response, [result], _ = await _turn(
            toolset, _call("slow", "c1", steps=8), streamed=streamed
        )
    assert result.outcome == "ok", result.text
    assert result.text == "done after 8 steps"


@pytest.mark.anyio
async def test_a_silent_call_times_out_and_the_server_is_told(
    errlog: TextIO, tmp_path: Path
) -> None:
    marker = tmp_path / "cancelled"
    async with _rich(errlog, timeout=0.5) as toolset:
        response, [result], _ = await _turn(
            toolset, _call("wait_forever", "c1", marker=str(marker)), streamed=False
        )
        assert result.outcome == "error"
        assert "McpTimeoutError" in result.text and "within 0.5 s" in result.text
        await _wait_for(marker)
        # The session is still usable.
        assert await toolset.call("lookup", {"key": "k"}) == "value of k"


@pytest.mark.anyio
async def test_cancelling_a_turn_sends_notifications_cancelled(
    errlog: TextIO, tmp_path: Path
) -> None:
    marker = tmp_path / "cancelled"
    async with _rich(errlog) as toolset:
        model = ScriptedChatModel([_call("wait_forever", "c1", marker=str(marker)), "never"])
        chain = Chain([ToolCallingAdvisor()], model=model, tools=await toolset.tools())
        stream = chain.stream("go")
        async for event in stream:
            if isinstance(event, ToolProgress):
                break  # the user gave up: closing the stream cancels the call
        await stream.aclose()  # type: ignore[attr-defined]
        await _wait_for(marker)
        assert marker.read_text() == "cancelled"


async def _wait_for(path: Path) -> None:
    """Until the server process wrote `path` (another process: nothing to wait on)."""
    with anyio.fail_after(20):
        while not await anyio.Path(path).exists():  # noqa: ASYNC110
            await anyio.sleep(0.05)


@pytest.mark.anyio
async def test_server_logs_go_to_python_logging_at_the_mapped_level(
    errlog: TextIO, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="advisorchain.mcp.server")
    async with _rich(errlog, log_level="debug") as toolset:
        assert await toolset.call("shout", {"text": "disk almost full"}) == "shouted"
        # Notifications may trail the answer: wait for both.
        with anyio.fail_after(20):
            while len([r for r in caplog.records if r.name == "advisorchain.mcp.server"]) < 2:  # noqa: ASYNC110
                await anyio.sleep(0.05)
    records = [r for r in caplog.records if r.name == "advisorchain.mcp.server"]
    assert [(r.levelno, r.getMessage()) for r in records] == [
        (logging.WARNING, "MCP server 'rich' (shouter): disk almost full"),
        (logging.DEBUG, "MCP server 'rich': quiet detail"),
    ]


@pytest.mark.anyio
async def test_annotations_make_effects_and_destructive_tools_need_approval(
    errlog: TextIO,
) -> None:
    async with _rich(errlog) as toolset:
        tools = {t.name: t for t in await toolset.tools()}
    assert tools["drop_table"].requires_approval
    assert not tools["lookup"].requires_approval
    assert tools["lookup"].read_only and tools["lookup"].idempotent
    assert not tools["drop_table"].read_only and not tools["picture"].requires_approval
    async with _rich(errlog, requires_approval=False) as toolset:
        tools = {t.name: t for t in await toolset.tools()}
    assert not tools["drop_table"].requires_approval


@pytest.mark.anyio
async def test_the_connect_timeout_bounds_initialize_not_the_calls(
    errlog: TextIO, tmp_path: Path
) -> None:
    late = tmp_path / "late_server.py"
    late.write_text(
        "import runpy, sys, time\n"
        "time.sleep(1.0)\n"
        f"sys.argv = [{CALC!r}]\n"
        f"runpy.run_path({CALC!r}, run_name='__main__')\n"
    )
    async with McpToolset.stdio(
        sys.executable, [str(late)], errlog=errlog, timeout=0.2, connect_timeout=60
    ) as toolset:
        assert await toolset.call("add", {"a": 1, "b": 2}) == "3"

    silent = McpToolset.stdio(
        sys.executable, ["-c", "import time; time.sleep(60)"], errlog=errlog, connect_timeout=0.5
    )
    with pytest.raises(McpConnectionError, match=r"no answer to initialize within 0.5 s"):
        await silent.connect()


@pytest.mark.anyio
async def test_a_tool_that_requires_mcp_tasks_fails_clearly() -> None:
    toolset = McpToolset.http("http://127.0.0.1:9/mcp", name="tasks")
    listed = mcp_types.Tool(
        name="research",
        input_schema={"type": "object", "properties": {}},
        execution=mcp_types.ToolExecution(task_support="required"),
    )
    [tool] = toolset._build([listed])
    model = ScriptedChatModel([_call("research", "c1"), "sorry"])
    response = await Chain([ToolCallingAdvisor()], model=model, tools=[tool]).call("go")
    [message] = _tool_messages(response)
    assert message.is_error
    assert "McpTaskRequiredError" in message.text
    assert "runs only as an MCP task" in message.text and "SDK" in message.text
    with pytest.raises(McpTaskRequiredError):
        await toolset.call("research", {})


@pytest.mark.anyio
async def test_resources_and_prompts_are_listed_read_and_refreshed(errlog: TextIO) -> None:
    async with _rich(errlog) as toolset:
        resources = {r.uri: r for r in await toolset.resources()}
        assert set(resources) == {"demo://readme", "demo://logo"}
        assert resources["demo://readme"].description == "The readme."
        assert await toolset.read_resource("demo://readme") == (TextPart(text="Read me first."),)
        [logo] = await toolset.read_resource("demo://logo")
        assert isinstance(logo, ImagePart) and logo.media_type == "image/png"

        [prompt] = await toolset.prompts()
        assert prompt.name == "review" and prompt.description == "Review a piece of code."
        assert [(a.name, a.required) for a in prompt.arguments] == [("code", True)]
        [message] = await toolset.get_prompt("review", {"code": "x = 1"})
        assert isinstance(message, UserMessage) and message.content == "Please review: x = 1"

        assert await toolset.call("publish", {}) == "published"
        with anyio.fail_after(20):  # the list_changed notifications trail the answer
            while len(await toolset.resources()) < 3 or len(await toolset.prompts()) < 2:  # noqa: ASYNC110
                await anyio.sleep(0.05)
        assert "demo://news" in {r.uri for r in await toolset.resources()}
        assert {p.name for p in await toolset.prompts()} == {"review", "summarize"}


@pytest.mark.anyio
async def test_the_model_browses_resources_through_resource_tools(errlog: TextIO) -> None:
    async with _rich(errlog, prefix="rich_") as toolset:
        tools = toolset.resource_tools()
        assert [t.name for t in tools] == ["rich_list_resources", "rich_read_resource"]
        assert all(t.read_only for t in tools)
        model = ScriptedChatModel(
            [
                _call("rich_list_resources", "c1"),
                _call("rich_read_resource", "c2", uri="demo://readme"),
                "It says to read it first.",
            ]
        )
        chain = Chain([ToolCallingAdvisor()], model=model, tools=tools)
        response = await chain.call("what is there?")
    listing, readme = _tool_messages(response)
    assert "demo://readme (readme): The readme." in listing.text
    assert readme.text == "Read me first."


@pytest.mark.anyio
async def test_sampling_is_answered_by_the_configured_model_under_the_policy(
    errlog: TextIO,
) -> None:
    seen: list[SamplingRequest] = []

    def approve(request: SamplingRequest) -> bool:
        seen.append(request)
        return len(seen) == 1  # the first request only

    model = ScriptedChatModel(["Paris."])
    policy = SamplingPolicy(model=model, max_tokens=100, approve=approve)
    async with _rich(errlog, sampling=policy) as toolset:
        assert await toolset.call("ask_model", {"question": "Capital of France?"}) == (
            "model said: Paris."
        )
        with pytest.raises(McpError, match="sampling refused by the user"):
            await toolset.call("ask_model", {"question": "Again?"})
    [request] = model.requests
    assert request.options.max_tokens == 100  # the server asked for 5000
    assert [type(m).__name__ for m in request.messages] == ["SystemMessage", "UserMessage"]
    assert request.messages[1].text == "Capital of France?"
    assert [(r.server, r.max_tokens, r.system_prompt) for r in seen] == [
        ("rich", 100, "Be brief."),
        ("rich", 100, "Be brief."),
    ]


@pytest.mark.anyio
async def test_without_a_policy_sampling_is_not_offered(errlog: TextIO) -> None:
    async with _rich(errlog) as toolset:
        with pytest.raises(McpError, match="(?i)sampling not supported"):
            await toolset.call("ask_model", {"question": "?"})


@pytest.mark.anyio
async def test_elicitation_goes_to_the_handler_and_answers_are_checked(errlog: TextIO) -> None:
    answers = [
        ElicitationAnswer("accept", {"name": "Ada", "age": 36}),
        ElicitationAnswer("accept", {"name": "Ada", "age": "old"}),
        ElicitationAnswer("decline"),
    ]
    asked: list[ElicitationRequest] = []

    async def handler(request: ElicitationRequest) -> ElicitationAnswer:
        asked.append(request)
        return answers[len(asked) - 1]

    async with _rich(errlog, elicitation=handler) as toolset:
        assert await toolset.call("ask_user", {}) == "hello Ada, 36"
        with pytest.raises(McpError, match="does not fit the requested schema"):
            await toolset.call("ask_user", {})  # "old" is no integer: never sent back
        assert await toolset.call("ask_user", {}) == "user chose decline"
    assert asked[0].server == "rich" and asked[0].message == "Who are you?"
    assert asked[0].schema is not None
    assert set(asked[0].schema["properties"]) == {"name", "age"}


@pytest.mark.anyio
async def test_sampling_can_ask_a_person_through_an_approver(errlog: TextIO) -> None:
    answers = iter(["a", "r", "not this one"])
    shown = io.StringIO()
    approver = ConsoleApprover(input_fn=lambda: next(answers), output=shown)
    model = ScriptedChatModel(["Paris."])
    policy = SamplingPolicy(model=model, max_tokens=50, approver=approver)
    async with _rich(errlog, sampling=policy) as toolset:
        assert await toolset.call("ask_model", {"question": "Capital?"}) == "model said: Paris."
        with pytest.raises(McpError, match="sampling refused by the user"):
            await toolset.call("ask_model", {"question": "Again?"})
    assert len(model.requests) == 1
    assert "mcp_sampling" in shown.getvalue() and "Capital?" in shown.getvalue()
