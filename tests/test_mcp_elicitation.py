"""Elicitation handlers: `ConsoleElicitor` (a terminal, field by field, with injected
streams) and `DeferredElicitation` (the question defers the call; a resume with
`Result(content)` continues it with the answer, exactly once). Against
tests/mcp_servers/rich_server.py over stdio; the real server-everything is in
test_mcp_real_servers.py."""

from __future__ import annotations

import importlib.util
import io
import logging
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
    InvalidDecisions,
    Message,
    ResponseCompleted,
    Result,
    StreamEvent,
    ToolCall,
    ToolCallFinished,
    ToolCallingAdvisor,
    ToolMessage,
    UserMessage,
)
from advisorchain.advisors import Approve, Reject
from advisorchain.providers import ScriptedChatModel
from advisorchain.toolsets import (
    ConsoleElicitor,
    DeferredElicitation,
    ElicitationAnswer,
    ElicitationNotWaiting,
    ElicitationRequest,
    McpToolset,
)

pytestmark = pytest.mark.anyio

RICH = str(Path(__file__).parent / "mcp_servers" / "rich_server.py")

PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "title": "Name", "minLength": 2},
        "age": {"type": "integer", "minimum": 0, "maximum": 150},
        "email": {"type": "string", "format": "email"},
        "color": {"type": "string", "enum": ["red", "green", "blue"], "default": "green"},
        "tags": {
            "type": "array",
            "items": {"anyOf": [{"const": "a", "title": "A"}, {"const": "b", "title": "B"}]},
            "maxItems": 2,
        },
        "subscribe": {"type": "boolean"},
    },
    "required": ["name", "age"],
}


def _console(*lines: str) -> tuple[ConsoleElicitor, io.StringIO]:
    shown = io.StringIO()
    return ConsoleElicitor(input=io.StringIO("".join(f"{x}\n" for x in lines)), output=shown), shown


def _question(schema: dict[str, Any] | None = PERSON, **fields: Any) -> ElicitationRequest:
    return ElicitationRequest(server="srv", message="Who are you?", schema=schema, **fields)


# -- the console --------------------------------------------------------------------------


async def test_the_console_asks_each_field_and_asks_again_until_it_fits() -> None:
    console, shown = _console(
        "A",  # too short
        "Ada",
        "old",  # no integer
        "200",  # over the maximum
        "36",
        "ada-at-example",  # no e-mail address
        "ada@example.com",
        "",  # the default: green
        "2, 1",  # choices by number
        "maybe",
        "yes",
    )
    answer = await console(_question())
    assert answer == ElicitationAnswer(
        "accept",
        {
            "name": "Ada",
            "age": 36,
            "email": "ada@example.com",
            "color": "green",
            "tags": ["b", "a"],
            "subscribe": True,
        },
    )
    text = shown.getvalue()
    assert "The MCP server 'srv' asks: Who are you?" in text
    assert "Name (string, required): " in text
    assert "at least 2 characters" in text
    assert "not an integer" in text
    assert "must be <= 150" in text
    assert "not an e-mail address" in text
    assert "choices: red, green, blue" in text
    assert "answer yes or no" in text


async def test_optional_fields_can_be_left_out_and_required_ones_cannot() -> None:
    console, shown = _console("", "Bo", "7", "", "", "", "")
    answer = await console(_question())
    assert answer == ElicitationAnswer("accept", {"name": "Bo", "age": 7, "color": "green"})
    assert "required: type an answer" in shown.getvalue()


@pytest.mark.parametrize(
    ("lines", "action"),
    [((":decline",), "decline"), (("Ada", ":cancel"), "cancel"), (("Ada",), "cancel")],
)
async def test_decline_cancel_and_end_of_input(lines: tuple[str, ...], action: str) -> None:
    console, _ = _console(*lines)  # the last case ends its input before the age: cancel
    assert await console(_question()) == ElicitationAnswer(action)  # type: ignore[arg-type]


async def test_too_many_wrong_answers_cancel() -> None:
    console, shown = _console("Ada", *["x"] * 5)
    assert await console(_question()) == ElicitationAnswer("cancel")
    assert "no valid answer for 'age'" in shown.getvalue()


async def test_a_url_request_asks_whether_it_was_done() -> None:
    console, shown = _console("perhaps", "y")
    request = _question(None, url="https://example.com/consent")
    assert await console(request) == ElicitationAnswer("accept")
    assert "Open: https://example.com/consent" in shown.getvalue()


async def test_server_text_cannot_drive_the_terminal_and_huge_forms_are_refused() -> None:
    console, shown = _console(":cancel")
    await console(ElicitationRequest(server="s", message="hi\x1b[2J\x1b]0;pwned\x07", schema={}))
    assert "\x1b" not in shown.getvalue() and "\x07" not in shown.getvalue()
    many = {"type": "object", "properties": {f"f{i}": {"type": "string"} for i in range(51)}}
    console, shown = _console()
    assert await console(_question(many)) == ElicitationAnswer("cancel")
    assert "a form of 51 fields: cancelled" in shown.getvalue()


@pytest.fixture
def errlog(tmp_path: Path) -> Iterator[TextIO]:
    with open(tmp_path / "server-stderr.log", "w") as log:
        yield log


def _rich(errlog: TextIO, **options: Any) -> McpToolset:
    return McpToolset.stdio(sys.executable, [RICH], errlog=errlog, name="rich", **options)


async def test_the_console_answers_a_server(errlog: TextIO) -> None:
    console, shown = _console("Ada", "old", "36")
    async with _rich(errlog, elicitation=console) as toolset:
        assert await toolset.call("ask_user", {}) == "hello Ada, 36"
    assert "Who are you?" in shown.getvalue()


# -- deferred -----------------------------------------------------------------------------


def _chain(toolset_tools: list[Any], elicitation: DeferredElicitation, *replies: Any) -> Chain:
    model = ScriptedChatModel(list(replies))
    return Chain([ToolCallingAdvisor(), elicitation], model=model, tools=toolset_tools)


def _tool_messages(response: ChatResponse) -> list[ToolMessage]:
    return [m for m in response.messages if isinstance(m, ToolMessage)]


def _drop(call_id: str = "c1") -> ToolCall:
    return ToolCall.from_arguments("confirm_drop", {"table": "users"}, id=call_id)


async def _completed(events: list[StreamEvent]) -> ChatResponse:
    last = events[-1]
    assert isinstance(last, ResponseCompleted)
    return last.response


def _transcript(prompt: str, response: ChatResponse) -> list[Message]:
    return [UserMessage(content=prompt), *response.messages]


async def _resume(
    chain: Chain, transcript: list[Message], decisions: Any, streamed: bool = False
) -> tuple[ChatResponse, list[StreamEvent]]:
    if not streamed:
        return await chain.call(transcript, decisions=decisions), []
    events = [e async for e in chain.stream(transcript, decisions=decisions)]
    return await _completed(events), events


@pytest.mark.parametrize("streamed", [False, True])
async def test_a_question_defers_the_call_and_the_answer_resumes_it_once(
    errlog: TextIO, streamed: bool
) -> None:
    elicitation = DeferredElicitation()
    async with _rich(errlog, elicitation=elicitation) as toolset:
        chain = _chain(await toolset.tools(), elicitation, _drop(), "The table is gone.")
        if streamed:
            response = await _completed([e async for e in chain.stream("drop users")])
        else:
            response = await chain.call("drop users")
        assert response.finish_reason == "deferred"
        (question,) = response.deferred
        assert (question.id, question.kind, question.accepts) == (
            "c1",
            "elicitation",
            ("result", "reject"),
        )
        assert question.metadata["message"] == "Drop the table users?"
        assert question.metadata["server"] == "rich"
        assert set(question.metadata["schema"]["properties"]) == {"confirm", "reason"}

        transcript = _transcript("drop users", response)
        answer = {"c1": Result({"confirm": True, "reason": "unused"})}
        resumed, events = await _resume(chain, transcript, answer, streamed)
        if streamed:
            finished = [e for e in events if isinstance(e, ToolCallFinished)]
            assert [(e.call.id, e.outcome) for e in finished] == [("c1", "ok")]
        # the call was issued again, and the server got the answer the second time it asked
        assert _tool_messages(resumed)[0].text == "dropped users: unused (run 2)"
        assert resumed.text == "The table is gone."
        with pytest.raises(ElicitationNotWaiting):  # answered once
            await chain.call(transcript, decisions=answer)


async def test_a_wrong_answer_is_refused_and_claims_nothing(errlog: TextIO) -> None:
    elicitation = DeferredElicitation()
    async with _rich(errlog, elicitation=elicitation) as toolset:
        chain = _chain(await toolset.tools(), elicitation, _drop(), "ok")
        response = await chain.call("drop users")
        transcript = _transcript("drop users", response)
        wrong: list[dict[str, Any]] = [
            {"c1": Result({"confirm": "yes", "reason": "x"})},
            {"c1": Result({"confirm": True})},
            {"c1": Approve()},
            {"c2": Reject("no")},
            {"c1": "yes"},
        ]
        for answers in wrong:
            with pytest.raises(InvalidDecisions):
                await chain.call(transcript, decisions=answers)
        resumed = await chain.call(transcript, decisions={"c1": Reject("not now")})
        assert _tool_messages(resumed)[0].text == "not dropped: decline (run 2)"


async def test_outside_a_chain_or_with_parallel_calls_the_question_is_cancelled(
    errlog: TextIO, caplog: pytest.LogCaptureFixture
) -> None:
    alone = DeferredElicitation()
    async with _rich(errlog, elicitation=alone) as toolset:
        with caplog.at_level(logging.WARNING, logger="advisorchain.mcp"):
            assert await toolset.call("confirm_drop", {"table": "t"}) == (
                "not dropped: cancel (run 1)"
            )
        assert "not in a chain" in caplog.text

    elicitation = DeferredElicitation()
    async with _rich(errlog, elicitation=elicitation) as toolset:
        chain = _chain(await toolset.tools(), elicitation, [_drop("c1"), _drop("c2")], "ok")
        with caplog.at_level(logging.WARNING, logger="advisorchain.mcp"):
            response = await chain.call("drop users twice")
        assert response.finish_reason != "deferred"
        assert all("not dropped: cancel" in m.text for m in _tool_messages(response))
        assert "cannot be tied to one tool call" in caplog.text


# -- the SDK's own server, in process -----------------------------------------------------


def _in_process(**options: Any) -> McpToolset:
    from mcp.client._memory import InMemoryTransport

    spec = importlib.util.spec_from_file_location("rich_server", RICH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    server = module.build_server()
    return McpToolset(lambda: InMemoryTransport(server), name="in-process", **options)


@pytest.mark.parametrize("streamed", [False, True])
async def test_deferred_elicitation_with_the_sdk_server_in_process(streamed: bool) -> None:
    elicitation = DeferredElicitation()
    async with _in_process(elicitation=elicitation) as toolset:
        chain = _chain(await toolset.tools(), elicitation, _drop(), "Kept.")
        if streamed:
            response = await _completed([e async for e in chain.stream("drop users")])
        else:
            response = await chain.call("drop users")
        (question,) = response.deferred
        assert question.metadata["server"] == "in-process"
        answer = {"c1": Result({"confirm": False, "reason": "in use"})}
        resumed, _ = await _resume(chain, _transcript("drop users", response), answer, streamed)
        assert _tool_messages(resumed)[0].text == "kept users (run 2)"
        assert resumed.text == "Kept."


async def test_the_console_with_the_sdk_server_in_process() -> None:
    console, _ = _console(":decline")
    async with _in_process(elicitation=console) as toolset:
        assert await toolset.call("ask_user", {}) == "user chose decline"
