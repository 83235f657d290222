"""format_transcript / print_transcript: roles, calls, results, approvals, usage; colour
only where it belongs; secrets redacted."""

from __future__ import annotations

import io

import pytest

from advisorchain import (
    AssistantMessage,
    Chain,
    ImagePart,
    Message,
    TextPart,
    ToolCall,
    ToolCallingAdvisor,
    ToolMessage,
    UserMessage,
    tool,
)
from advisorchain.advisors import ApprovalAdvisor, DeferredApprover, InMemoryApprovalStore
from advisorchain.providers import ScriptedChatModel
from advisorchain.transcript import format_transcript, print_transcript, supports_color

PNG = b"\x89PNG\r\n\x1a\n" + b"\0" * 8


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_conversation_shows_every_role_and_part() -> None:
    text = format_transcript(
        [
            {"role": "system", "content": "Be brief."},
            UserMessage(content=(TextPart(text="What is this?"), ImagePart(data=PNG))),
            AssistantMessage(
                content="Let me look.\nOne moment.",
                tool_calls=(ToolCall(id="c1", name="inspect", arguments='{"depth": 2}'),),
            ),
            ToolMessage(tool_call_id="c1", name="inspect", content="Error: boom", is_error=True),
        ]
    )
    assert text == (
        "system: Be brief.\n"
        "user: What is this? [image image/png, 16 bytes]\n"
        "assistant: Let me look.\n"
        "           One moment.\n"
        "assistant → inspect(depth=2)  [c1]\n"
        "tool inspect [c1] error: Error: boom\n"
    )


@pytest.mark.anyio
async def test_a_suspended_turn_shows_what_waits() -> None:
    @tool(requires_approval=True)
    def refund(order_id: str) -> str:
        """Refund."""
        return "done"

    chain = Chain(
        [ToolCallingAdvisor(), ApprovalAdvisor(DeferredApprover(), store=InMemoryApprovalStore())],
        model=ScriptedChatModel([ToolCall.from_arguments("refund", {"order_id": "7"}, id="c1")]),
        tools=[refund],
    )
    response = await chain.call("refund 7")
    assert response.finish_reason == "deferred"
    lines = format_transcript(response).splitlines()
    assert 'waiting (approval): refund(order_id="7")  [c1]' in lines
    assert lines[-1].startswith("-- finish: deferred")


def test_secrets_are_redacted_in_text_and_arguments_unless_told_otherwise() -> None:
    key = "sk-proj-abcdefghijklmnopqrstuvwx"
    messages: list[Message] = [
        AssistantMessage(
            tool_calls=(ToolCall.from_arguments("pay", {"card": "4242 4242 4242 4242"}, id="c"),)
        ),
        ToolMessage(tool_call_id="c", name="pay", content=f"used key {key}"),
    ]
    shown = format_transcript(messages)
    assert "4242 4242" not in shown and key not in shown
    assert "[REDACTED:card]" in shown and "[REDACTED:api_key]" in shown
    assert key in format_transcript(messages, redact=None)


def test_long_text_is_cut_saying_how_much() -> None:
    shown = format_transcript([UserMessage(content="x" * 50)], max_chars=10)
    assert shown == "user: xxxxxxxxxx... [40 more characters]\n"


@pytest.mark.parametrize(
    ("env", "tty", "expected"),
    [
        ({}, True, True),
        ({}, False, False),
        ({"NO_COLOR": "1"}, True, False),
        ({"NO_COLOR": ""}, True, True),  # set but empty: no-color.org says ignore it
        ({"TERM": "dumb"}, True, False),
        ({"FORCE_COLOR": "1"}, False, True),
    ],
)
def test_colour_follows_the_terminal_and_the_environment(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], tty: bool, expected: bool
) -> None:
    for name in ("NO_COLOR", "FORCE_COLOR", "TERM"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    stream = Terminal() if tty else io.StringIO()
    assert supports_color(stream) is expected
    print_transcript([UserMessage(content="hi")], file=stream)
    assert ("\x1b[" in stream.getvalue()) is expected


def test_in_colour_a_models_escape_codes_cannot_reach_the_terminal() -> None:
    shown = format_transcript([AssistantMessage(content="\x1b]0;pwned\x07hi")], color=True)
    assert "\x1b]" not in shown and "^[]0;pwned" in shown
