"""Properties of stream-safe redaction, for any chunking of the model's stream (hypothesis).

For any text and any way of cutting it into deltas: the streamed deltas concatenate to the
final response's text, which equals what `call` returns for the same model output; no
e-mail address, however it is cut, appears unredacted in any delta; and text without
matches is never held back `hold_back` characters or more.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio
from hypothesis import given, settings
from hypothesis import strategies as st

from advisorchain import (
    Advisor,
    CallNext,
    Chain,
    ChatRequest,
    ChatResponse,
    ResponseCompleted,
    StreamEvent,
    StreamNext,
    TextDelta,
)
from advisorchain.advisors import RedactionAdvisor, Span
from advisorchain.advisors.redaction import BUILTIN_RULES, Strategy
from advisorchain.providers import ScriptedChatModel

EMAIL = BUILTIN_RULES["email"]
LOWER = "abcdefghijklmnopqrstuvwxyz"
DIGITS = "0123456789"
emails = st.builds(
    lambda local, labels, tld: f"{local}@{'.'.join(labels)}.{tld}",
    st.text(LOWER + DIGITS + "._+-", min_size=1, max_size=12),
    st.lists(st.text(LOWER + DIGITS, min_size=1, max_size=8), min_size=1, max_size=2),
    st.text(LOWER, min_size=2, max_size=5),
)
"""At most 36 characters: shorter than every `max_match` used below."""
filler = st.lists(st.text(LOWER + DIGITS + ".,;:-+()@\n", min_size=1, max_size=10), max_size=8).map(
    " ".join
)
separators = st.sampled_from([" ", "\n", ", ", " (", ") "])
windows = st.sampled_from([(40, 38), (48, 40), (64, 48), (256, 192)])
"""`(hold_back, max_match)` pairs, from a one-character step to the defaults."""
chunkings = st.lists(st.integers(1, 12), min_size=1, max_size=40)


@st.composite
def texts(draw: st.DrawFn) -> tuple[str, list[str]]:
    """A text of filler and e-mail addresses, each address set off by separators."""
    parts: list[str] = []
    addresses: list[str] = []
    for _ in range(draw(st.integers(0, 12))):
        parts.append(draw(filler))
        if draw(st.booleans()):
            address = draw(emails)
            addresses.append(address)
            parts += [draw(separators), address, draw(separators)]
    return "".join(parts), addresses


async def through_chain(
    advisor: RedactionAdvisor, text: str, chunking: list[int]
) -> tuple[list[str], str, str]:
    """The deltas and final text of a stream, and the text of a call, for one model output."""
    streamed = Chain([advisor], model=ScriptedChatModel([text], chunk_size=chunking))
    deltas: list[str] = []
    final = ""
    async for event in streamed.stream("go"):
        if isinstance(event, TextDelta):
            deltas.append(event.text)
        elif isinstance(event, ResponseCompleted):
            final = event.response.text
    called = await Chain([advisor], model=ScriptedChatModel([text])).call("go")
    return deltas, final, called.text


@settings(max_examples=300, deadline=None)
@given(texts(), chunkings, windows, st.sampled_from(["redact", "mask", "hash"]))
def test_any_chunking_streams_what_call_returns_and_no_address_leaks(
    case: tuple[str, list[str]],
    chunking: list[int],
    window: tuple[int, int],
    strategy: Strategy,
) -> None:
    text, addresses = case
    hold_back, max_match = window
    advisor = RedactionAdvisor(strategy=strategy, hold_back=hold_back, max_match=max_match)
    deltas, final, called = anyio.run(through_chain, advisor, text, chunking)
    assert "".join(deltas) == final == called
    assert called == advisor.redact(text)
    # every match is short, so the result is what one search over the whole text gives
    reference = EMAIL.pattern.sub(lambda m: advisor.replace(m[0], Span(0, 1, "email")), text)
    assert called == reference
    for address in addresses:
        assert address not in final
        assert all(address not in delta for delta in deltas)


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.text(LOWER + DIGITS + ".,;:-+()@\n/_#", max_size=12), max_size=60).map(" ".join),
    chunkings,
    windows,
)
def test_every_rule_streams_what_call_returns(
    text: str, chunking: list[int], window: tuple[int, int]
) -> None:
    hold_back, max_match = window
    advisor = RedactionAdvisor(list(BUILTIN_RULES), hold_back=hold_back, max_match=max_match)
    deltas, final, called = anyio.run(through_chain, advisor, text, chunking)
    assert "".join(deltas) == final == called


class LagCheck(Advisor):
    """Sits between the redaction and the model: before each model delta is passed up, the
    caller must have received all but less than `hold_back` of the text produced so far."""

    def __init__(self, received: list[int], hold_back: int) -> None:
        self.received = received
        self.hold_back = hold_back
        self.worst = 0

    async def call(self, request: ChatRequest, next: CallNext) -> ChatResponse:
        return await next(request)

    async def stream(self, request: ChatRequest, next: StreamNext) -> AsyncIterator[StreamEvent]:
        produced = 0
        async for event in next(request):
            self.worst = max(self.worst, produced - self.received[0])
            assert produced - self.received[0] < self.hold_back
            if isinstance(event, TextDelta):
                produced += len(event.text)
            yield event


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.text(LOWER + ".,\n", min_size=1, max_size=10), min_size=1, max_size=80).map(
        " ".join
    ),
    chunkings,
    windows,
)
def test_streamed_text_never_lags_hold_back_behind(
    text: str, chunking: list[int], window: tuple[int, int]
) -> None:
    hold_back, max_match = window
    received = [0]
    check = LagCheck(received, hold_back)
    advisor = RedactionAdvisor(hold_back=hold_back, max_match=max_match)
    chain = Chain([advisor, check], model=ScriptedChatModel([text], chunk_size=chunking))

    async def consume() -> None:
        async for event in chain.stream("go"):
            if isinstance(event, TextDelta):
                received[0] += len(event.text)

    anyio.run(consume)
    assert received[0] == len(text)  # nothing to redact: every character arrived
    if len(text) > hold_back + 12:
        assert check.worst > 0  # text was held back for a while
