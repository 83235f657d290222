"""The hot path's shortcuts give what the general code gives (issue 13 item 10).

The bare tool loop takes written-out fast paths (tool-call ids, argument bounds, ...);
each test here runs a fast path and the general code it stands for over many generated
inputs and requires the same answer, so a shortcut that is wrong fails here.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from advisorchain import (
    AssistantMessage,
    Chain,
    ChatOptions,
    ChatResponse,
    Tool,
    ToolCall,
    ToolCallingAdvisor,
    ToolMessage,
    UserMessage,
    tool,
)
from advisorchain.core.arguments import ArgumentsError, _deeper_than, parse_arguments
from advisorchain.core.call_ids import (
    MAX_CALL_ID_CHARS,
    CallIds,
    _kind,
    _uses,
    is_valid_call_id,
    unique_response,
)
from advisorchain.core.errors import ChainConfigurationError
from advisorchain.core.messages import Message, SystemMessage
from advisorchain.core.parts import DocumentPart, ImagePart, TextPart
from advisorchain.core.tools import merge_tools, result_parts
from advisorchain.providers import ScriptedChatModel

# -- tool-call ids (core/call_ids.py) ------------------------------------------------------

_REGEX = re.compile(r"[A-Za-z0-9_-]+")


def _valid_by_regex(value: object) -> bool:
    """The rule as first written: a regex over the id, and the length cap."""
    return (
        isinstance(value, str)
        and len(value) <= MAX_CALL_ID_CHARS
        and _REGEX.fullmatch(value) is not None
    )


_ID_CHARS = st.sampled_from(list("aZ09_-") + [" ", '"', "\x00", "é", "/", "\n", "٣", "ａ"])
ids = st.one_of(
    st.text(_ID_CHARS, max_size=5),
    st.text(max_size=45),
    st.builds(lambda c, n: c * n, st.sampled_from(["a", "_", "é"]), st.integers(38, 42)),
)


@given(ids)
@settings(max_examples=600)
def test_the_char_set_check_is_the_regex(value: str) -> None:
    assert is_valid_call_id(value) == _valid_by_regex(value)


class _Assistant(AssistantMessage):
    pass


class _Tool(ToolMessage):
    pass


def _message(kind: str, call_ids: list[str]) -> Message:
    calls = tuple(ToolCall(id=i, name="t") for i in call_ids)
    if kind == "assistant":
        return AssistantMessage(tool_calls=calls)
    if kind == "assistant_sub":
        return _Assistant(tool_calls=calls)
    if kind == "tool":
        return ToolMessage(tool_call_id=call_ids[0] if call_ids else "", name="t", content="ok")
    if kind == "tool_sub":
        return _Tool(tool_call_id=call_ids[0] if call_ids else "", name="t", content="ok")
    if kind == "system":
        return SystemMessage(content="s")
    return UserMessage(content="u")


_SMALL_IDS = st.text(st.sampled_from(list("ab_") + [" ", "é"]), max_size=3)
messages = st.lists(
    st.builds(
        _message,
        st.sampled_from(["assistant", "assistant_sub", "tool", "tool_sub", "system", "user"]),
        st.lists(_SMALL_IDS, max_size=3),
    ),
    max_size=6,
)


def _uses_by_kind(transcript: list[Message], taken: set[str]) -> bool:
    """`_uses` as first written, through `_kind` for every message."""
    for message in transcript:
        kind = _kind(message)
        if kind is AssistantMessage:
            if any(c.id in taken for c in message.tool_calls):  # type: ignore[union-attr]
                return True
        elif kind is ToolMessage and message.tool_call_id in taken:  # type: ignore[union-attr]
            return True
    return False


@given(messages, st.sets(_SMALL_IDS, max_size=3))
@settings(max_examples=400)
def test_the_transcript_scan_is_the_one_through_kind(
    transcript: list[Message], taken: set[str]
) -> None:
    assert _uses(transcript, taken) == _uses_by_kind(transcript, taken)


@given(messages, st.lists(_SMALL_IDS, min_size=1, max_size=4))
@settings(max_examples=400)
def test_a_response_is_kept_exactly_when_the_general_rules_keep_every_id(
    transcript: list[Message], call_ids: list[str]
) -> None:
    calls = tuple(ToolCall(id=i, name="t") for i in call_ids)
    response = ChatResponse(message=AssistantMessage(tool_calls=calls))
    general = CallIds.of(transcript).calls(calls)  # claims every id, in order
    kept = [c.id for c in general] == call_ids
    out = unique_response(response, transcript)
    assert (out is response) == kept
    got = [c.id for c in out.message.tool_calls]
    assert len(set(got)) == len(got) and all(is_valid_call_id(i) for i in got)
    taken = CallIds.of(transcript)
    assert not any(i in taken for i in got)


# -- argument bounds (core/arguments.py) --------------------------------------------------


def _parse_checking_depth_always(text: str, max_depth: int) -> object:
    """`parse_arguments` as first written: the depth walk whenever brackets could nest."""
    value = parse_arguments(text, max_depth=10**9)
    stripped = text.strip()
    if stripped.count("[") + stripped.count("{") > max_depth and _deeper_than(value, max_depth):
        raise ArgumentsError(f"too deeply nested (at most {max_depth} levels)")
    return value


def _nested(wrappers: list[str], leaf: object, siblings: int) -> object:
    value = leaf
    for kind in wrappers:
        value = [value] * (1 + siblings % 2) if kind == "list" else {"k": value}
        siblings //= 2
    return value


leaves: st.SearchStrategy[object] = (
    st.none() | st.integers(-5, 5) | st.text("ab[{", max_size=3) | st.just([])
)
json_values = st.one_of(
    st.recursive(
        leaves,
        lambda inner: (
            st.lists(inner, max_size=3) | st.dictionaries(st.text("k", max_size=2), inner)
        ),
        max_leaves=12,
    ),
    # chains of brackets around a leaf: as deep as the text is long, near every limit
    st.builds(
        _nested,
        st.lists(st.sampled_from(["list", "dict"]), max_size=12),
        leaves,
        st.integers(0, 63),
    ),
)


@given(json_values, st.integers(0, 8), st.sampled_from(["", " ", "\n", "\x0c"]))
@settings(max_examples=500)
def test_the_depth_check_skipped_for_short_text_changes_no_answer(
    value: object, max_depth: int, pad: str
) -> None:
    text = pad + json.dumps(value, separators=(",", ":")) + pad

    def outcome(parse: Callable[[], object]) -> object:
        try:
            return ("value", parse())
        except ArgumentsError as exc:
            return ("error", str(exc))

    fast = outcome(lambda: parse_arguments(text, max_depth=max_depth))
    assert fast == outcome(lambda: _parse_checking_depth_always(text, max_depth))


# -- the derived answer (core/response.py) ----------------------------------------------------


def _derived(response: ChatResponse, name: str) -> object:
    """What the descriptor computes (its function), not the value `__init__` wrote."""
    descriptor = vars(ChatResponse)[name]
    return descriptor.func(response)


@given(messages, st.text(max_size=3), st.lists(_SMALL_IDS, max_size=2))
@settings(max_examples=300)
def test_the_answer_written_by_init_is_the_derived_one(
    transcript: list[Message], text: str, call_ids: list[str]
) -> None:
    answer = AssistantMessage(
        content=text or None, tool_calls=tuple(ToolCall(id=i, name="t") for i in call_ids)
    )
    for response in (
        ChatResponse(message=answer),
        ChatResponse(messages=(*transcript, answer)),
        ChatResponse(messages=(answer, *transcript)),
        ChatResponse(message=answer).with_message(AssistantMessage(content="other")),
        replace(ChatResponse(message=answer), messages=(*transcript, answer)),
    ):
        assert response.message is _derived(response, "message")
        assert response.tool_calls is _derived(response, "tool_calls")
        assert (
            response.message
            is response.messages[
                max(i for i, m in enumerate(response.messages) if isinstance(m, AssistantMessage))
            ]
        )


# -- tool results (core/tools.py) -------------------------------------------------------------


class _Str(str):
    pass


def _parts_by_isinstance(value: object) -> object:
    """`result_parts` as first written, without the exact-type shortcut."""
    if isinstance(value, (TextPart, ImagePart, DocumentPart)):
        return (value,)
    if not isinstance(value, (list, tuple)) or not value:
        return None
    if not any(isinstance(item, (TextPart, ImagePart, DocumentPart)) for item in value):
        return None
    if not all(isinstance(item, (str, TextPart, ImagePart, DocumentPart)) for item in value):
        return None
    return tuple(TextPart(text=item) if isinstance(item, str) else item for item in value)


_part_items = st.one_of(
    st.text(max_size=2),
    st.builds(TextPart, text=st.text(max_size=2)),
    st.just(ImagePart(url="https://example.com/a.png")),
    st.integers(),
    st.none(),
)
results = st.one_of(
    st.text(max_size=3),
    st.builds(_Str, st.text(max_size=3)),
    st.binary(max_size=3),
    st.integers(),
    st.floats(allow_nan=False),
    st.booleans(),
    st.none(),
    st.dictionaries(st.text(max_size=2), st.integers(), max_size=2),
    _part_items,
    st.lists(_part_items, max_size=3),
    st.lists(_part_items, max_size=3).map(tuple),
)


@given(results)
@settings(max_examples=400)
def test_result_parts_with_the_exact_type_shortcut_is_unchanged(value: object) -> None:
    assert result_parts(value) == _parts_by_isinstance(value)


# -- a chain's request (core/chain.py, core/options.py) ---------------------------------------


def test_a_request_without_extra_tools_or_options_is_the_merged_one() -> None:
    @tool
    async def one(city: str) -> str:
        """One."""
        return city

    @tool
    async def two(city: str) -> str:
        """Two."""
        return city

    chain = Chain([ToolCallingAdvisor()], model=ScriptedChatModel(["ok"]), tools=[one, two])
    options = ChatOptions(temperature=0.5)
    assert options.merged() is options and options.merged(None) is options
    assert options.merged(ChatOptions()) == options
    request = chain.request("go")
    assert request.tools == merge_tools(chain.tools) == (one, two)
    assert request.options == chain.options.merged(None).merged(None)
    chain.tools = (two, one, two)  # a changed attribute is merged again (and refused here)
    with pytest.raises(ChainConfigurationError):
        chain.request("go", tools=[Tool("two", "Another tool named two.")])
    assert chain.request("go").tools == (two, one)
