"""SSE framing (`providers/sse.py`) under any byte split, line ending, BOM, comment,
retry field, invalid UTF-8 and huge line: the same events as the whole stream, and only
`StreamInterruptedError` when a line or event exceeds its bound."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from advisorchain import StreamInterruptedError
from advisorchain.providers.sse import ServerSentEvent, SSEDecoder

from .strategies import byte_fragments
from .support import PROPERTY

newlines = st.sampled_from(["\n", "\r", "\r\n"])
field_text = st.text(
    st.characters(blacklist_categories=["Cs"], blacklist_characters="\r\n"), max_size=30
)


@st.composite
def streams(draw: st.DrawFn) -> tuple[bytes, list[ServerSentEvent]]:
    """A stream written with random line endings, comments and fields, and its events."""
    lines: list[str] = []
    expected: list[ServerSentEvent] = []
    last_id: str | None = None
    retry: int | None = None
    for _ in range(draw(st.integers(0, 6))):
        if draw(st.booleans()):
            lines.append(":" + draw(field_text))  # a comment (keep-alive)
        event = draw(st.none() | st.sampled_from(["delta", "error", "message_stop"]))
        if event is not None:
            lines.append(f"event: {event}")
        if draw(st.booleans()):
            last_id = draw(field_text.filter(lambda t: "\0" not in t and not t.startswith(" ")))
            lines.append(f"id: {last_id}")
        if draw(st.booleans()):
            retry = draw(st.integers(0, 10**9))
            lines.append(f"retry: {retry}")
        data = draw(st.lists(field_text, min_size=1, max_size=3))
        for line in data:
            lines.append(
                "data:" + (" " + line if line.startswith(" ") or draw(st.booleans()) else line)
            )
        lines.append("")
        expected.append(ServerSentEvent(event or "message", "\n".join(data), last_id, retry))
    text = ""
    for line in lines:
        ending = draw(newlines)
        if not line and ending == "\n" and text.endswith("\r"):
            ending = "\r\n"  # a lone LF after a CR would be the CR's pair, not a blank line
        text += line + ending
    bom = "\ufeff" if draw(st.booleans()) else ""
    return (bom + text).encode(), expected


def parse(chunks: list[bytes], **kwargs: int) -> list[ServerSentEvent]:
    decoder = SSEDecoder(**kwargs)
    events = [e for chunk in chunks for e in decoder.feed(chunk)]
    return events + decoder.close()


@PROPERTY
@given(streams(), st.lists(st.integers(0, 10_000), max_size=12))
def test_any_split_of_a_well_formed_stream_gives_its_events(
    stream: tuple[bytes, list[ServerSentEvent]], cuts: list[int]
) -> None:
    data, expected = stream
    assert parse([data]) == expected
    assert parse(byte_fragments(data, cuts)) == expected


@PROPERTY
@given(st.binary(max_size=400), st.lists(st.integers(0, 400), max_size=10))
def test_arbitrary_bytes_never_raise_and_do_not_depend_on_the_split(
    data: bytes, cuts: list[int]
) -> None:
    whole = parse([data])
    assert parse(byte_fragments(data, cuts)) == whole
    assert parse([data[i : i + 1] for i in range(len(data))]) == whole


def test_retry_field_with_thousands_of_digits_is_ignored() -> None:
    # before: int() of a 5,000-digit value raised ValueError (Python's int-string limit)
    events = parse([b"retry: " + b"9" * 5000 + b"\ndata: x\n\n"])
    assert events == [ServerSentEvent(data="x")]


def test_a_line_that_never_ends_is_bounded() -> None:
    decoder = SSEDecoder(max_event_size=1000)
    decoder.feed(b"data: " + b"x" * 900)
    with pytest.raises(StreamInterruptedError, match="larger than 1000"):
        for _ in range(10):
            decoder.feed(b"x" * 100)


def test_many_data_lines_in_one_event_are_bounded() -> None:
    decoder = SSEDecoder(max_event_size=1000)
    with pytest.raises(StreamInterruptedError):
        decoder.feed(b"data: x\n" * 600)


def test_a_long_comment_is_bounded_too() -> None:
    with pytest.raises(StreamInterruptedError):
        SSEDecoder(max_event_size=100).feed(b":" + b"k" * 200)


def test_bounds_reset_after_each_event() -> None:
    decoder = SSEDecoder(max_event_size=100)
    events = []
    for _ in range(50):
        events += decoder.feed(b"data: " + b"y" * 80 + b"\n\n")
    assert len(events) == 50


@pytest.mark.parametrize("line_end", [b"\n", b"\r", b"\r\n"])
def test_one_megabyte_of_short_lines_in_one_chunk_is_linear(line_end: bytes) -> None:
    # before: each line searched the rest of the chunk for the other line ending, so a
    # 1 MB chunk of LF-only lines took about 5 * 10**11 character comparisons
    count = 1_000_000 // (6 + len(line_end))
    chunk = (b"data: " + line_end + line_end) * (count // 2)
    events = SSEDecoder().feed(chunk)
    assert len(events) == count // 2


def test_one_megabyte_event_in_tiny_chunks() -> None:
    decoder = SSEDecoder()
    payload = b"data: " + b"z" * 1_000_000 + b"\n\n"
    events = []
    for i in range(0, len(payload), 997):
        events += decoder.feed(payload[i : i + 997])
    assert [len(e.data) for e in events] == [1_000_000]
