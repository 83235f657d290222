from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from advisorchain.core.errors import StreamInterruptedError
from advisorchain.providers.sse import ServerSentEvent, SSEDecoder, aiter_sse


def parse(*chunks: bytes) -> list[ServerSentEvent]:
    decoder = SSEDecoder()
    events = [e for chunk in chunks for e in decoder.feed(chunk)]
    return events + decoder.close()


def test_fields_comments_and_multiline_data() -> None:
    stream = (
        b": a comment\n"
        b"event: message_start\n"
        b"id: 7\n"
        b"retry: 1500\n"
        b"data: first\n"
        b"data:second\n"
        b"\n"
        b"data\n"
        b"\n"
    )
    assert parse(stream) == [
        ServerSentEvent("message_start", "first\nsecond", id="7", retry=1500),
        ServerSentEvent("message", "", id="7", retry=1500),
    ]


def test_only_one_leading_space_is_removed_and_colons_in_values_stay() -> None:
    assert parse(b"data:  two spaces: yes\n\n") == [ServerSentEvent(data=" two spaces: yes")]


def test_event_without_data_is_not_dispatched_and_resets_the_type() -> None:
    assert parse(b"event: ping\n\ndata: x\n\n") == [ServerSentEvent("message", "x")]


def test_unknown_fields_and_bad_retry_are_ignored() -> None:
    assert parse(b"foo: bar\nretry: 1s\ndata: x\n\n") == [ServerSentEvent(data="x")]


@pytest.mark.parametrize("newline", [b"\n", b"\r\n", b"\r"])
def test_every_line_ending(newline: bytes) -> None:
    stream = newline.join([b"event: a", b"data: 1", b"", b"data: 2", b"", b""])
    assert parse(stream) == [ServerSentEvent("a", "1"), ServerSentEvent("message", "2")]


def test_crlf_split_between_chunks_is_one_line_ending() -> None:
    # A CR ending one chunk and an LF starting the next must not make a blank line,
    # which would dispatch "a" alone instead of "a\nb".
    assert parse(b"data: a\r", b"\ndata: b\r", b"\n\r", b"\n") == [ServerSentEvent(data="a\nb")]


def test_byte_order_mark_is_skipped_once() -> None:
    assert parse(b"\xef\xbb", b"\xbfdata: x\n\n") == [ServerSentEvent(data="x")]


def test_incomplete_last_event_is_discarded_and_reported_pending() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b'data: done\n\ndata: {"trunc') == [ServerSentEvent(data="done")]
    assert decoder.pending
    assert decoder.close() == []
    assert not decoder.pending


def test_invalid_utf8_becomes_replacement_character() -> None:
    assert parse(b"data: a\xffb\n\n") == [ServerSentEvent(data="a\ufffdb")]


STREAM = (
    "event: delta\r\n"
    'data: {"text": "Grüße aus Zürich 🌦"}\r\n'
    "\r\n"
    ": keep-alive\n"
    "data: 日本語のテキスト\n"
    "data: ✓\n"
    "\n"
    "data: [DONE]\r\r"
).encode()

EXPECTED = [
    ServerSentEvent("delta", '{"text": "Grüße aus Zürich 🌦"}'),
    ServerSentEvent("message", "日本語のテキスト\n✓"),
    ServerSentEvent("message", "[DONE]"),
]


def test_every_single_split_point_gives_the_same_events() -> None:
    assert parse(STREAM) == EXPECTED
    for point in range(len(STREAM) + 1):
        assert parse(STREAM[:point], STREAM[point:]) == EXPECTED, point


def test_every_pair_of_split_points_gives_the_same_events() -> None:
    size = len(STREAM)
    for first in range(0, size + 1, 3):
        for second in range(first, size + 1, 5):
            chunks = (STREAM[:first], STREAM[first:second], STREAM[second:])
            assert parse(*chunks) == EXPECTED, (first, second)


def test_byte_by_byte() -> None:
    assert parse(*(STREAM[i : i + 1] for i in range(len(STREAM)))) == EXPECTED


@pytest.mark.anyio
async def test_aiter_sse_yields_each_event_when_its_blank_line_arrives() -> None:
    seen: list[str] = []

    async def chunks() -> AsyncIterator[bytes]:
        for chunk in (b"data: a\n", b"\n", b"data: b\n\n"):
            seen.append(chunk.decode())
            yield chunk

    events = []
    async for event in aiter_sse(chunks()):
        events.append((event.data, len(seen)))
    assert events == [("a", 2), ("b", 3)]


@pytest.mark.parametrize("line_end", [b"\n", b"\r\n"])
def test_a_complete_line_over_the_bound_in_one_chunk_is_refused(line_end: bytes) -> None:
    # LF-only text takes the split fast path, text with CR the general one: same bound
    decoder = SSEDecoder(max_event_size=100)
    assert decoder.feed(b"data: " + b"x" * 90 + line_end + line_end)
    with pytest.raises(StreamInterruptedError, match="larger than 100"):
        decoder.feed(b"data: " + b"x" * 200 + line_end + line_end)


def test_the_fast_path_and_the_general_path_give_the_same_events() -> None:
    text = b"event: a\ndata: 1\ndata: 2\n: note\nid: 7\nretry: 30\n\ndata: \xc3\xbc\n\n"
    fast = SSEDecoder().feed(text)
    general = SSEDecoder().feed(text.replace(b"\n", b"\r\n"))
    assert fast == general and len(fast) == 2 and fast[1].data == "ü"
