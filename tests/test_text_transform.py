"""`TextRewriter` and `TextTransformAdvisor`: stream-safe rewriting with a bounded hold-back."""

from __future__ import annotations

import re

import pytest

from advisorchain import (
    Advisor,
    AssistantMessage,
    Chain,
    ChatResponse,
    ResponseCompleted,
    StreamEvent,
    TextDelta,
    ToolCall,
    ToolCallingAdvisor,
    ToolCallStarted,
    tool,
)
from advisorchain.advisors.text_transform import Span, TextRewriter, TextTransformAdvisor
from advisorchain.providers import ScriptedChatModel

SECRET = re.compile(r"secret-\d+")


def find_secret(text: str, start: int) -> Span | None:
    match = SECRET.search(text, start)
    return None if match is None else Span(match.start(), match.end(), "secret")


def upper(value: str, span: Span) -> str:
    return f"<{span.label}>"


def rewriter(hold_back: int = 16, max_match: int = 12) -> TextRewriter:
    return TextRewriter(find_secret, upper, hold_back=hold_back, max_match=max_match)


def feed_all(r: TextRewriter, pieces: list[str]) -> list[str]:
    return [*(r.feed(p) for p in pieces), r.finish()]


def test_a_span_cut_across_pieces_is_rewritten_and_output_matches_whole_rewrite() -> None:
    text = "before secret-12345 middle " * 3 + "end"
    whole = rewriter().rewrite(text)
    assert whole == "before <secret> middle " * 3 + "end"
    for size in (1, 2, 3, 5, 7, 100):
        pieces = [text[i : i + size] for i in range(0, len(text), size)]
        out = feed_all(rewriter(), pieces)
        assert "".join(out) == whole, size
        assert not any("secret-" in o for o in out)


def test_held_back_text_never_reaches_hold_back() -> None:
    r = rewriter(hold_back=16, max_match=12)
    text = "plain words without anything to find, " * 5
    produced = emitted = 0
    for c in text:
        emitted += len(r.feed(c))
        produced += 1
        assert produced - emitted == r.pending
        assert r.pending < 16
    assert emitted + len(r.finish()) == len(text)


def test_one_big_piece_is_rewritten_like_many_small_ones() -> None:
    text = ("x" * 30 + "secret-9 ") * 20
    r = rewriter()
    head = r.feed(text)
    assert r.pending < 16  # a big piece is decided at once, but for its last characters
    assert head + r.finish() == ("x" * 30 + "<secret> ") * 20


def test_a_span_longer_than_max_match_may_be_cut() -> None:
    r = rewriter(hold_back=8, max_match=4)
    assert r.rewrite("ab secret-123456789") != "ab <secret>"  # longer than the window


def test_invalid_sizes_and_bad_spans_raise() -> None:
    with pytest.raises(ValueError, match="max_match < hold_back"):
        TextRewriter(find_secret, upper, hold_back=8, max_match=8)
    bad = TextRewriter(lambda text, start: Span(start, start), upper, hold_back=8, max_match=4)
    with pytest.raises(ValueError, match="non-empty span"):
        bad.rewrite("abc")
    r = rewriter()
    r.feed("abc")
    with pytest.raises(RuntimeError):
        r.rewrite("x")


class SecretFilter(TextTransformAdvisor):
    hold_back = 16
    max_match = 12

    def find(self, text: str, start: int) -> Span | None:
        return find_secret(text, start)

    def replace(self, value: str, span: Span) -> str:
        return "[hidden]"


ANSWER = "your code is secret-4711, and secret-42 is the other one"
HIDDEN = "your code is [hidden], and [hidden] is the other one"


async def stream_events(chain: Chain, prompt: str) -> list[StreamEvent]:
    return [event async for event in chain.stream(prompt)]


@pytest.mark.anyio
async def test_advisor_rewrites_call_and_stream_alike() -> None:
    called = await Chain([SecretFilter()], model=ScriptedChatModel([ANSWER])).call("code?")
    assert called.text == HIDDEN
    assert called.messages == (called.message,)
    for size in (1, 3, 16):
        chain = Chain([SecretFilter()], model=ScriptedChatModel([ANSWER], chunk_size=size))
        events = await stream_events(chain, "code?")
        deltas = [e.text for e in events if isinstance(e, TextDelta)]
        assert "".join(deltas) == HIDDEN
        assert not any("secret" in d for d in deltas)
        final = events[-1]
        assert isinstance(final, ResponseCompleted)
        assert final.response.text == HIDDEN
        assert final.response.messages == (final.response.message,)


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


@pytest.mark.anyio
async def test_each_round_of_a_tool_turn_is_flushed_before_its_tool_calls() -> None:
    first = AssistantMessage(
        content="looking up secret-1 now",
        tool_calls=(ToolCall.from_arguments("lookup", {"key": "secret-1"}, id="c1"),),
    )

    def model() -> ScriptedChatModel:
        return ScriptedChatModel([first, ANSWER], chunk_size=5)

    def links() -> list[Advisor]:
        return [SecretFilter(), ToolCallingAdvisor()]

    called = await Chain(links(), model=model(), tools=[lookup]).call("go")
    chain = Chain(links(), model=model(), tools=[lookup])
    events = await stream_events(chain, "go")
    started = next(i for i, e in enumerate(events) if isinstance(e, ToolCallStarted))
    before = "".join(e.text for e in events[:started] if isinstance(e, TextDelta))
    after = "".join(e.text for e in events[started:] if isinstance(e, TextDelta))
    assert before == "looking up [hidden] now"
    assert after == HIDDEN
    final = events[-1]
    assert isinstance(final, ResponseCompleted)
    for response in (called, final.response):
        assert response.text == HIDDEN
        assistant = [m for m in response.messages if isinstance(m, AssistantMessage)]
        assert [m.content for m in assistant] == ["looking up [hidden] now", HIDDEN]
        assert assistant[0].tool_calls[0].arguments == '{"key":"secret-1"}'  # never rewritten
        assert response.messages[-1] is response.message


@pytest.mark.anyio
async def test_inside_the_loop_each_model_call_is_rewritten() -> None:
    first = AssistantMessage(
        content="secret-7", tool_calls=(ToolCall.from_arguments("lookup", {"key": "k"}, id="c1"),)
    )
    model = ScriptedChatModel([first, ANSWER], chunk_size=2)
    chain = Chain([ToolCallingAdvisor(), SecretFilter()], model=model, tools=[lookup])
    events = await stream_events(chain, "go")
    final = events[-1]
    assert isinstance(final, ResponseCompleted)
    assert [m.content for m in final.response.messages if isinstance(m, AssistantMessage)] == [
        "[hidden]",
        HIDDEN,
    ]
    # the second model call sees the rewritten first answer in its transcript
    assert model.requests[1].messages[1].content == "[hidden]"


def test_scripted_model_streams_chosen_chunks() -> None:
    import anyio

    async def deltas(chunk_size: int | list[int]) -> list[str]:
        model = ScriptedChatModel(["abcdefghij"], chunk_size=chunk_size)
        out: list[str] = []
        async for event in model.stream(Chain([], model=model).request("x")):
            if isinstance(event, TextDelta):
                out.append(event.text)
            elif isinstance(event, ResponseCompleted):
                assert event.response.text == "abcdefghij"
        return out

    assert anyio.run(deltas, [1, 3, 2]) == ["a", "bcd", "ef", "gh", "ij"]
    assert anyio.run(deltas, [20]) == ["abcdefghij"]
    assert anyio.run(deltas, 4) == ["abcd", "efgh", "ij"]
    with pytest.raises(ValueError, match="chunk_size"):
        ScriptedChatModel(["a"], chunk_size=[2, 0])
    with pytest.raises(ValueError, match="chunk_size"):
        ScriptedChatModel(["a"], chunk_size=[])


def test_response_without_text_is_left_alone() -> None:
    response = ChatResponse(message=AssistantMessage(content=None))
    assert SecretFilter().rewrite_response(response).message.content is None
