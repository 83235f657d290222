"""Tool-call arguments and ids as a model writes them: any text as arguments, unknown
names, odd ids. Every call is answered by exactly one tool message (an error result when
the arguments are bad), on the call and the stream path, and nothing untyped escapes."""

from __future__ import annotations

import json
import re
from typing import Any

import anyio
from hypothesis import given
from hypothesis import strategies as st

from advisorchain import (
    AssistantMessage,
    Chain,
    ResponseCompleted,
    ToolCall,
    ToolCallingAdvisor,
    ToolMessage,
    tool,
)
from advisorchain.providers import ScriptedChatModel

from .strategies import json_values
from .support import PROPERTY


@tool
def add(a: int, b: int = 0) -> int:
    """Add two integers."""
    return a + b


@tool
def echo(text: str) -> str:
    """Echo a text."""
    return text


raw_arguments = (
    st.text(max_size=40)
    | json_values.map(json.dumps)
    | st.fixed_dictionaries({"a": json_values}, optional={"b": json_values}).map(json.dumps)
    | st.fixed_dictionaries({"text": json_values}).map(json.dumps)
    | st.sampled_from(['{"a": 1}', '{"a": 1', "", "null", "[]", '{"a": 1}{"b": 2}', "\ufeff{}"])
)
calls = st.lists(
    st.tuples(st.sampled_from(["add", "echo", "missing", "ADD", ""]), raw_arguments),
    min_size=1,
    max_size=4,
)
ids = st.text(min_size=1, max_size=12)


async def run(batch: list[ToolCall], streamed: bool) -> tuple[Any, ...]:
    chain = Chain(
        [ToolCallingAdvisor()], model=ScriptedChatModel([batch, "done"]), tools=[add, echo]
    )
    if streamed:
        events = [e async for e in chain.stream("go")]
        final = events[-1]
        assert isinstance(final, ResponseCompleted)
        return final.response.messages
    return (await chain.call("go")).messages


@PROPERTY
@given(calls, st.lists(ids, min_size=4, max_size=4, unique=True), st.booleans())
def test_every_tool_call_is_answered_once(
    drawn: list[tuple[str, str]], call_ids: list[str], streamed: bool
) -> None:
    batch = []
    for (name, arguments), call_id in zip(drawn, call_ids, strict=False):
        try:
            batch.append(ToolCall(id=call_id, name=name or "x", arguments=arguments))
        except ValueError:
            return  # the message type itself refuses it: nothing reaches the loop
    messages = anyio.run(run, batch, streamed)
    assistant = messages[0]
    assert isinstance(assistant, AssistantMessage)
    answered = [m.tool_call_id for m in messages if isinstance(m, ToolMessage)]
    sent = [c.id for c in assistant.tool_calls]  # the chain makes the model's ids valid
    assert len(sent) == len(batch) == len(set(sent))
    assert all(re.fullmatch(r"[A-Za-z0-9_-]{1,64}", i) for i in sent)
    assert sorted(answered) == sorted(sent)
    assert messages[-1].content == "done"
