"""`ChatRequest`'s copies (`appended`, `with_messages`, `with_tools`) are what
`dataclasses.replace` makes, also where they take the plain-copy path."""

from __future__ import annotations

from dataclasses import dataclass, replace

from advisorchain import ChatRequest, tool
from advisorchain.core.messages import AssistantMessage, UserMessage


@tool
def one() -> str:
    """One."""
    return "1"


@tool
def two() -> str:
    """Two."""
    return "2"


def _request() -> ChatRequest:
    request = ChatRequest(
        messages=(UserMessage(content="hi"),),
        tools=(one,),
        tool_context={"k": "v"},
        conversation_id="c",
    )
    request.context["shared"] = 1
    assert request.find_tool("one") is one  # builds the tools-by-name index
    return request


def test_copies_equal_what_replace_makes_and_share_the_turns_context() -> None:
    request = _request()
    answer = AssistantMessage(content="hello")
    copies = [
        (request.appended(answer), replace(request, messages=(*request.messages, answer))),
        (request.with_messages((answer,)), replace(request, messages=(answer,))),
        (request.with_tools((two,)), replace(request, tools=(two,))),
    ]
    for copy, expected in copies:
        assert type(copy) is ChatRequest
        assert copy == expected
        assert copy.context is request.context
        assert copy.tool_context is request.tool_context
        assert copy.decisions is expected.decisions
    assert request.messages == (UserMessage(content="hi"),) and request.tools == (one,)


def test_a_copy_with_other_tools_finds_those_tools() -> None:
    request = _request()
    narrowed = request.with_tools((two,))
    assert narrowed.find_tool("one") is None
    assert narrowed.find_tool("two") is two
    assert request.with_messages(()).find_tool("one") is one
    assert request.find_tool("two") is None


def test_a_subclass_copy_runs_its_init() -> None:
    seen: list[int] = []

    @dataclass(frozen=True, kw_only=True)
    class Checked(ChatRequest):
        def __post_init__(self) -> None:
            seen.append(len(self.tools))

    request = Checked(messages=(UserMessage(content="hi"),), tools=(one,))
    assert type(request.with_tools((one, two))) is Checked
    assert type(request.with_messages(())) is Checked
    assert type(request.appended(AssistantMessage(content="x"))) is Checked
    assert seen == [1, 2, 1, 1]
