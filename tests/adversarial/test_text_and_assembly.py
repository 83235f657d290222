"""Tool calls written as text (`core/text_tool_calls.py`) and streamed fragments
(`core/assembly.py`): any text in any split gives the same pieces, plain text is never
lost, every call written is found, and 1 MB of hostile text is parsed in linear time."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from advisorchain import StreamInterruptedError, TextDelta, ToolCall, ToolCallDelta
from advisorchain.core.text_tool_calls import TextToolCallParser, parse_text_tool_calls
from advisorchain.providers import StreamAssembler

from .strategies import fragments, json_values
from .support import PROPERTY

NAMES = frozenset({"get_weather", "send_mail"})

# Text built from the pieces that matter to the parser: markers, braces, quotes, fences.
atoms = st.sampled_from(
    [
        "<tool_call>",
        "</tool_call>",
        "<tool",
        "```",
        "```json\n",
        "\n",
        " ",
        "{",
        "}",
        "[",
        "]",
        '"',
        '\\"',
        '"name"',
        ":",
        ",",
        '"get_weather"',
        '"arguments"',
        "{}",
        "`",
        "<",
        "x",
        "é",
    ]
)
hostile_text = st.lists(atoms | st.text(max_size=5), max_size=40).map("".join)


def pieces_of(text: str, chunks: list[str]) -> tuple[str, list[tuple[str, str]]]:
    parser = TextToolCallParser(NAMES)
    out: list[str | ToolCall] = []
    for chunk in chunks:
        out += parser.feed(chunk)
    out += parser.finish()
    return (
        "".join(p for p in out if isinstance(p, str)),
        [(p.name, p.arguments) for p in out if isinstance(p, ToolCall)],
    )


@PROPERTY
@given(hostile_text, st.lists(st.integers(0, 400), max_size=12))
def test_any_text_in_any_split_gives_the_same_pieces(text: str, cuts: list[int]) -> None:
    whole = pieces_of(text, [text])
    assert pieces_of(text, fragments(text, cuts)) == whole
    assert pieces_of(text, list(text)) == whole


@PROPERTY
@given(hostile_text)
def test_text_without_a_known_tool_name_is_kept_exactly(text: str) -> None:
    parser = TextToolCallParser({"no_such_tool"})
    out = parser.feed(text) + parser.finish()
    assert "".join(str(p) for p in out) == text


call_objects = st.tuples(
    st.sampled_from(sorted(NAMES)), st.dictionaries(st.text(max_size=5), json_values, max_size=3)
)
plain = st.text(max_size=30).filter(lambda t: not any(c in t for c in "<`{"))


def written(name: str, arguments: dict[str, Any], form: str) -> str:
    body = json.dumps({"name": name, "arguments": arguments})
    if form == "tag":
        return f"<tool_call>\n{body}\n</tool_call>"
    if form == "fence":
        return f"```json\n{body}\n```"
    return body


@PROPERTY
@given(
    st.lists(st.tuples(plain, call_objects, st.sampled_from(["tag", "fence", "bare"])), max_size=4),
    plain,
    st.lists(st.integers(0, 2000), max_size=10),
)
def test_every_call_written_is_found_and_the_text_around_it_kept(
    parts: list[tuple[str, tuple[str, dict[str, Any]], str]], tail: str, cuts: list[int]
) -> None:
    text = (
        "".join(before + written(name, args, form) for before, (name, args), form in parts) + tail
    )
    found_text, calls = pieces_of(text, fragments(text, cuts))
    assert found_text == "".join(before for before, _, _ in parts) + tail
    assert [(n, json.loads(a)) for n, a in calls] == [
        (name, json.loads(json.dumps(args))) for _, (name, args), _ in parts
    ]


MB = 1_000_000
QUARTER = MB // 4
HOSTILE = {
    "open braces": "{" * MB,
    "open tag then text": "<tool_call>{" + "a" * MB,
    "open tag then >": '<tool_call>{"a":"' + ">" * MB,
    "fence then spaces": "```json" + " " * MB,
    "one huge call": '{"name":"get_weather","arguments":{"x":"' + "y" * MB + '"}}',
    # a tool-call candidate every 4-11 characters: 256 KB (linear: twice the text, twice
    # the time; the suite must stay fast on a loaded machine)
    "call-like keys never closed": '{"name":' * (QUARTER // 8),
    "quote and brace": '{"name":"}' * (QUARTER // 10),
    "many tags": "<tool_call>" * (QUARTER // 11),
    "many fences": "```\n" * (QUARTER // 4),
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_a_megabyte_of_hostile_text_is_linear_whole_and_streamed(name: str) -> None:
    # before: "open braces" took minutes whole (every "{" searched the rest of the text for
    # each marker and the text was rebuilt piece by piece), streamed inputs were rescanned
    # from the start at every delta
    text = HOSTILE[name]
    whole = parse_text_tool_calls(text, NAMES)
    parser = TextToolCallParser(NAMES)
    out: list[str | ToolCall] = []
    for i in range(0, len(text), 4096):
        out += parser.feed(text[i : i + 4096])
    out += parser.finish()
    assert "".join(p for p in out if isinstance(p, str)) == whole.text
    assert len([p for p in out if isinstance(p, ToolCall)]) == len(whole.calls)
    assert len(whole.text) + sum(len(c.arguments) for c in whole.calls) > 0


def test_a_call_streamed_in_small_deltas_is_not_rescanned() -> None:
    text = '<tool_call>{"name":"get_weather","arguments":{"x":"' + "y" * 200_000 + '"}}</tool_call>'
    parser = TextToolCallParser(NAMES)
    out: list[str | ToolCall] = []
    for i in range(0, len(text), 3):
        out += parser.feed(text[i : i + 3])
    out += parser.finish()
    assert [type(p) for p in out] == [ToolCall]


@pytest.mark.parametrize(
    "text",
    [
        "<tool_call>" + "[" * 100_000 + "]" * 100_000 + "</tool_call>",
        "```json\n" + "[" * 100_000 + "\n```",
        '{"name": "get_weather", "arguments": ' + "[" * 100_000 + "]" * 100_000 + "}",
        '{"name": "get_weather", "arguments": "' + "[" * 100_000 + '"}',
    ],
)
def test_deeply_nested_json_in_text_stays_text(text: str) -> None:
    # before: RecursionError escaped from the parser (and from chain.call)
    parsed = parse_text_tool_calls(text, NAMES)
    assert parsed.calls == () or all(c.name == "get_weather" for c in parsed.calls)


# --- the stream assembler ---------------------------------------------------------------


@PROPERTY
@given(
    st.lists(st.tuples(st.sampled_from(sorted(NAMES)), st.text(max_size=40)), max_size=5),
    st.text(max_size=80),
    st.integers(1, 7),
    st.randoms(use_true_random=False),
)
def test_assembler_rebuilds_interleaved_fragments(
    calls: list[tuple[str, str]], text: str, size: int, rnd: Any
) -> None:
    queues: list[list[TextDelta | ToolCallDelta]] = [
        [TextDelta(text[i : i + size]) for i in range(0, len(text), size)]
    ]
    for index, (name, arguments) in enumerate(calls):
        parts = [arguments[i : i + size] for i in range(0, len(arguments), size)] or [""]
        queue: list[TextDelta | ToolCallDelta] = [
            ToolCallDelta(index, f"id{index}", name, parts[0])
        ]
        queue += [ToolCallDelta(index, arguments=p) for p in parts[1:]]
        queues.append(queue)
    assembler = StreamAssembler()
    while any(queues):
        queue = rnd.choice([q for q in queues if q])
        assembler.add(queue.pop(0))
    message = assembler.message()
    assert (message.content or "") == text
    assert [(c.id, c.name, c.arguments) for c in message.tool_calls] == [
        (f"id{i}", name, arguments or "{}") for i, (name, arguments) in enumerate(calls)
    ]


def test_assembler_call_without_a_name_is_a_typed_error() -> None:
    assembler = StreamAssembler()
    assembler.add(ToolCallDelta(0, "a", None, "{}"))
    with pytest.raises(StreamInterruptedError):
        assembler.message()
