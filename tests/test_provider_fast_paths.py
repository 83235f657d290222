"""The providers' fast paths give what their general paths give.

Each hot-path shortcut in `providers/` (exact-type dispatch, inlined parsing) has a
general path it must agree with; these tests run both on the same inputs, including
the odd ones the shortcut hands over to the general path.
"""

from __future__ import annotations

import codecs
import enum
import itertools
import json
import random
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from types import MappingProxyType
from typing import Any

import httpx
import pytest

from advisorchain import ChatRequest, UserMessage
from advisorchain.core.errors import StreamInterruptedError
from advisorchain.providers import GeminiChatModel, ProviderError
from advisorchain.providers.http.client import MAX_CACHED_URLS
from advisorchain.providers.http.json_values import json_body, json_dumps, json_loads, plain
from advisorchain.providers.sse import ServerSentEvent, SSEDecoder


def _reference_plain(value: Any) -> Any:
    """`plain` as 0.1 wrote it: by the ABCs alone."""
    if isinstance(value, Mapping):
        return {str(k): _reference_plain(v) for k, v in value.items()}
    if isinstance(value, Sequence) and not isinstance(value, (str, bytes)):
        return [_reference_plain(v) for v in value]
    return value


class _Color(enum.StrEnum):
    RED = "red"


class _Frozen(Mapping[str, Any]):
    def __init__(self, data: dict[str, Any]) -> None:
        self._data = data

    def __getitem__(self, key: str) -> Any:
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)


def _random_value(rng: random.Random, depth: int = 0) -> Any:
    scalars: list[Any] = [
        "text",
        "",
        "ünï",
        _Color.RED,
        0,
        -3,
        True,
        False,
        None,
        1.5,
        b"raw",
        bytearray(b"ba"),
    ]
    if depth > 3 or rng.random() < 0.3:
        return rng.choice(scalars)
    items = [_random_value(rng, depth + 1) for _ in range(rng.randrange(4))]
    keys: list[Any] = ["a", "type", 1, True, None, _Color.RED, 2.5]
    pairs = {rng.choice(keys): v for v in items}
    makers: list[Callable[[], Any]] = [
        lambda: items,
        lambda: tuple(items),
        lambda: pairs,
        lambda: OrderedDict(pairs),
        lambda: MappingProxyType(pairs),
        lambda: _Frozen({str(k): v for k, v in pairs.items()}),
        lambda: range(len(items)),
    ]
    return rng.choice(makers)()


def _json_value(rng: random.Random, depth: int = 0) -> Any:
    if depth > 3 or rng.random() < 0.4:
        return rng.choice(["x", "ü}", 'q"', 0, 1.5, -2, True, None, ""])
    items = [_json_value(rng, depth + 1) for _ in range(rng.randrange(3))]
    return rng.choice([items, {f"k{i}": v for i, v in enumerate(items)}])


def _same(a: Any, b: Any) -> bool:
    """Equal, and of the same types all the way down (a dict is not an OrderedDict)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def test_plain_agrees_with_the_abc_walk_on_random_values() -> None:
    rng = random.Random(16)
    for _ in range(3000):
        value = _random_value(rng)
        assert _same(plain(value), _reference_plain(value)), value


def test_plain_copies_every_container_of_a_schema() -> None:
    schema: dict[str, Any] = {"type": "object", "properties": {"a": {"enum": ("x", "y")}}}
    out = plain(schema)
    assert out == {"type": "object", "properties": {"a": {"enum": ["x", "y"]}}}
    assert out is not schema and out["properties"] is not schema["properties"]
    out["properties"]["a"]["enum"].append("z")
    assert schema["properties"]["a"]["enum"] == ("x", "y")


def _random_sse(rng: random.Random) -> str:
    lines = []
    for _ in range(rng.randrange(1, 12)):
        lines.append(
            rng.choice(
                [
                    "data: {}",
                    'data: {"a": "ü"}',
                    "data:tight",
                    "data:  two spaces",
                    "data",
                    "data: ",
                    "event: delta",
                    "event:",
                    "id: 3",
                    "retry: 10",
                    ": comment",
                    "dat: typo",
                    "",
                    "",
                ]
            )
        )
    return "\n".join(lines) + "\n" * rng.randrange(3)


def _events_in_chunks(text: bytes, cuts: list[int], *, max_event_size: int) -> list[Any]:
    decoder = SSEDecoder(max_event_size=max_event_size)
    events: list[Any] = []
    bounds = [0, *sorted(cuts), len(text)]
    try:
        for start, end in zip(bounds, bounds[1:], strict=False):
            events += decoder.feed(text[start:end])
        events += decoder.close()
    except StreamInterruptedError:
        events.append("too large")
    return events


def test_sse_lf_fast_path_agrees_with_the_cr_path_at_random_splits() -> None:
    # LF-only text takes the inlined split path; the same text with CRLF (or CR) line
    # ends takes the general one; fields via `feed_fields` are the events' own
    rng = random.Random(9)
    for _ in range(1500):
        text = _random_sse(rng).encode()
        bound = rng.choice([8, 20, 1000])
        cuts = [rng.randrange(len(text) + 1) for _ in range(rng.randrange(4))]
        fast = _events_in_chunks(text, cuts, max_event_size=bound)
        crlf_cuts = [c + text[:c].count(b"\n") for c in cuts]  # the same places
        crlf = _events_in_chunks(text.replace(b"\n", b"\r\n"), crlf_cuts, max_event_size=bound)
        cr = _events_in_chunks(text.replace(b"\n", b"\r"), cuts, max_event_size=bound)
        assert crlf == fast and cr == fast, (text, cuts)
        fields = SSEDecoder(max_event_size=10**6).feed_fields(text)
        objects = SSEDecoder(max_event_size=10**6).feed(text)
        assert [ServerSentEvent(*f) for f in fields] == objects


@pytest.mark.anyio
async def test_parsed_urls_are_reused_and_bounded() -> None:
    # Gemini puts the model in the path: each model its own URL, each request to its own
    seen: list[str] = []

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(str(request.url))
        return httpx.Response(400, json={"error": {"message": "no"}})

    async with httpx.AsyncClient(transport=httpx.MockTransport(handle)) as client:
        model = GeminiChatModel("g", api_key="k" * 20, http_client=client, max_retries=0)
        names = [f"m{i}" for i in range(MAX_CACHED_URLS + 5)] + ["m0", "m1"]
        for name in names:
            request = ChatRequest(messages=(UserMessage(content="hi"),)).with_options(model=name)
            with pytest.raises(ProviderError):
                await model.call(request)
        assert [url.split("/models/")[1].split(":")[0] for url in seen] == names
        assert 0 < len(model._http._urls) <= MAX_CACHED_URLS


def _loads_outcome(load: Any, text: str) -> Any:
    try:
        return ("value", load(text))
    except Exception as exc:  # the same class and message
        return ("error", type(exc), str(exc))


@pytest.mark.parametrize(
    "text",
    [
        '{"a": 1}',
        "{}",
        ' {"a": 1}',
        '{"a": 1} ',
        '{"a": 1}{"b": 2}',
        '{"a": 1}}',
        '{"a": }',
        '{"a": [1, 2}',
        "{",
        "}",
        "{}}",
        '{"a": NaN}',
        '{"a": "\\ud800"}',
        '{"a": "ctrl\x01"}',
        "[1]",
        '"text"',
        "",
        "[DONE]",
        "\ufeff{}",
        '{"a": {"b": 1}, "c": "x}"}',
        "{" * 5000 + "}" * 5000,
    ],
)
def test_json_loads_agrees_with_the_stdlib(text: str) -> None:
    assert _loads_outcome(json_loads, text) == _loads_outcome(json.loads, text)


def test_json_loads_agrees_with_the_stdlib_on_random_objects() -> None:
    rng = random.Random(5)
    for _ in range(500):
        text = json.dumps({"k": _json_value(rng)}, separators=rng.choice([(",", ":"), None]))
        if rng.random() < 0.3:
            cut = rng.randrange(len(text))
            text = text[:cut] + rng.choice(["", "}", "{", ",", '"']) + text[cut + 1 :]
        assert _loads_outcome(json_loads, text) == _loads_outcome(json.loads, text), text


def test_sse_utf8_decoding_agrees_with_the_stdlib_incremental_decoder() -> None:
    rng = random.Random(3)
    alphabet = [
        b"a",
        b"\n",
        "ü".encode(),
        "🌦".encode(),
        "…".encode(),
        b"\xff",
        b"\xc3",
        b"\xe2\x80",
    ]
    for _ in range(2000):
        raw = b"data: " + b"".join(rng.choice(alphabet) for _ in range(rng.randrange(12))) + b"\n\n"
        cuts = sorted(rng.randrange(len(raw) + 1) for _ in range(rng.randrange(5)))
        bounds = [0, *cuts, len(raw)]
        chunks = [raw[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]
        stdlib = codecs.getincrementaldecoder("utf-8")(errors="replace")
        expected = "".join(stdlib.decode(c) for c in chunks) + stdlib.decode(b"", final=True)
        decoder = SSEDecoder()
        got = [decoder._decode(c, final=False) for c in chunks] + [decoder._decode(b"", final=True)]
        assert "".join(got) == expected, raw
        # and per chunk, the same pieces as the stdlib gives (events come out as early)
        stdlib = codecs.getincrementaldecoder("utf-8")(errors="replace")
        decoder = SSEDecoder()
        assert [decoder._decode(c, final=False) for c in chunks] == [
            stdlib.decode(c) for c in chunks
        ]


def test_sse_one_event_chunks_agree_with_byte_by_byte_feeding() -> None:
    # a chunk holding exactly one `data: ...` event takes a shortcut; byte by byte never
    # does: both must give the same events, ids, retries, errors and final state
    rng = random.Random(12)
    pieces = [
        b"data: {}\n\n",
        b'data: {"t": "\xc3\xbc"}\n\n',
        b"data:  spaced\n\n",
        b"data: \n\n",
        b"data: " + b"x" * 30 + b"\n\n",
        b"data: " + b"y" * 19 + b"\n\n",  # a 25-character line: at the bound of 25
        b"data: " + b"y" * 20 + b"\n\n",  # one over it
        b"data: a\ndata: b\n\n",
        b"event: delta\n",
        b"id: 4\n",
        b"retry: 9\n",
        b": keep-alive\n\n",
        b"data: half",
        b"\n\n",
        b"\xef\xbb\xbfdata: bom\n\n",
        b"data: cut \xe2\x80",
        b"\xa6\n\n",
        b"data: x\r\n\r\n",
        b"data: lone cr\r",
    ]
    for _ in range(1500):
        chunks = [rng.choice(pieces) for _ in range(rng.randrange(1, 8))]
        bound = rng.choice([10, 25, 1000])
        ours = _events_in_chunks(
            b"".join(chunks),
            list(itertools.accumulate(map(len, chunks)))[:-1],
            max_event_size=bound,
        )
        joined = b"".join(chunks)
        byte_cuts = list(range(1, len(joined)))
        assert ours == _events_in_chunks(joined, byte_cuts, max_event_size=bound), chunks


def test_json_writers_built_once_write_what_json_dumps_writes() -> None:
    circular: list[Any] = []
    circular.append(circular)
    values: list[Any] = [
        {"a": "ü", "b": [1, 2.5, None, True], "c": {"d": ("t", 1)}, 3: "int key"},
        {"nan": float("nan")},
        {"inf": float("inf")},
        {"s": "\ud800 lone"},
        {"obj": object()},
        circular,
        "🌦",
    ]
    for value in values:
        for ours, theirs in [
            (
                json_body,
                lambda v: json.dumps(
                    v, ensure_ascii=False, separators=(",", ":"), allow_nan=False
                ).encode(),
            ),
            (json_dumps, lambda v: json.dumps(v, separators=(",", ":"), ensure_ascii=False)),
        ]:
            expected = _loads_outcome(theirs, value)
            got = _loads_outcome(ours, value)
            if expected[0] == "error" and expected[1] is UnicodeEncodeError:
                assert got == ("value", json_body(value))  # lone surrogates: U+FFFD (json_body)
                continue
            assert got == expected, value
