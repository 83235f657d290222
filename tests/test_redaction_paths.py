"""Issue 32 item 3: with a `RedactionAdvisor` on the chain, nothing it redacts reaches the
caller by any path: a sub-chain's forwarded events, tools' progress messages, transcripts
and texts carried by exceptions, cards written with Unicode separators, overlapping
rules. Each test runs on `call` and `stream` where both exist."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

import anyio
import anyio.lowlevel
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from advisorchain import (
    Advisor,
    AnswerDiscarded,
    AssistantMessage,
    Chain,
    ChatRequest,
    ChatResponse,
    ResponseCompleted,
    StreamEvent,
    StreamNext,
    TextDelta,
    ToolCall,
    ToolCallFinished,
    ToolCallingAdvisor,
    ToolCallLimitExceeded,
    ToolContext,
    ToolExecutionError,
    ToolMessage,
    ToolProgress,
    chain_tool,
    tool,
)
from advisorchain.advisors import BudgetAdvisor, BudgetExceeded, RedactionAdvisor, RedactionRule
from advisorchain.advisors.redaction import (
    _INVISIBLE_OR_VARIANT,
    _VARIANT_CATEGORIES,
    _WHERE_THEY_ARE,
)
from advisorchain.advisors.text_transform import _ProgressText
from advisorchain.providers import ScriptedChatModel
from advisorchain.providers.errors import BadRequestError

EMAIL = "jane.roe@example.com"
CARD = "4242 4242 4242 4242"
RULES = ["email", "card"]


async def run(chain: Chain, prompt: str, streaming: bool) -> tuple[ChatResponse, list[StreamEvent]]:
    if not streaming:
        return await chain.call(prompt), []
    events = [e async for e in chain.stream(prompt)]
    final = events[-1]
    assert isinstance(final, ResponseCompleted)
    return final.response, events


def nested_text(events: Sequence[StreamEvent]) -> str:
    """The text deltas a sub-chain forwarded, joined."""
    return "".join(progress_deltas(events))


def progress_deltas(events: Sequence[StreamEvent]) -> list[str]:
    out = []
    for event in events:
        if isinstance(event, ToolProgress):
            inner: StreamEvent | None = event.event
            while isinstance(inner, ToolProgress):
                inner = inner.event
            if isinstance(inner, TextDelta):
                out.append(inner.text)
    return out


# -- a sub-chain's streamed text ----------------------------------------------------------


def sub_agent_chain(answer: str, chunk_size: int = 2) -> Chain:
    return Chain([ToolCallingAdvisor()], model=ScriptedChatModel([answer], chunk_size=chunk_size))


@pytest.mark.issue32(3)
@pytest.mark.anyio
@pytest.mark.parametrize("streaming", [False, True])
async def test_a_sub_chains_streamed_text_is_redacted(streaming: bool) -> None:
    answer = f"Found {EMAIL}, card {CARD}, nothing else. " + "More words. " * 40
    helper = chain_tool(sub_agent_chain(answer), "helper", "Looks people up.")
    model = ScriptedChatModel(
        [ToolCall.from_arguments("helper", {"task": "find jane"}, id="h1"), "Done."]
    )
    chain = Chain([RedactionAdvisor(RULES), ToolCallingAdvisor()], model=model, tools=[helper])
    response, events = await run(chain, "who is jane?", streaming)
    expected = "Found [REDACTED:email], card [REDACTED:card], nothing else. " + "More words. " * 40
    tool_messages = [m for m in response.messages if isinstance(m, ToolMessage)]
    assert [m.content for m in tool_messages] == [expected]
    seen = repr(response) + repr(events)
    assert EMAIL not in seen and "4242" not in seen
    if streaming:
        assert nested_text(events) == expected
        deltas = progress_deltas(events)
        assert len(deltas) > 1  # still streamed, not one block at the end
        # the held-back text is flushed before the parent's call ends
        finished = next(i for i, e in enumerate(events) if isinstance(e, ToolCallFinished))
        assert nested_text(events[:finished]) == expected


@pytest.mark.issue32(3)
@pytest.mark.anyio
@pytest.mark.parametrize("streaming", [False, True])
async def test_a_nested_sub_chains_tool_results_and_text_are_redacted(streaming: bool) -> None:
    @tool
    def lookup(name: str) -> str:
        """Looks a customer up."""
        return f"{name}: {EMAIL}"

    inner = Chain(
        [ToolCallingAdvisor()],
        model=ScriptedChatModel(
            [ToolCall.from_arguments("lookup", {"name": "jane"}, id="l1"), f"mail {EMAIL}"],
            chunk_size=3,
        ),
        tools=[lookup],
    )
    middle = Chain(
        [ToolCallingAdvisor()],
        model=ScriptedChatModel(
            [ToolCall.from_arguments("inner", {"task": "t"}, id="i1"), f"so {EMAIL} it is"],
            chunk_size=3,
        ),
        tools=[chain_tool(inner, "inner", "inner agent")],
    )
    model = ScriptedChatModel(
        [ToolCall.from_arguments("middle", {"task": "t"}, id="m1"), "Done."], chunk_size=3
    )
    chain = Chain(
        [RedactionAdvisor(RULES), ToolCallingAdvisor()],
        model=model,
        tools=[chain_tool(middle, "middle", "middle agent")],
    )
    response, events = await run(chain, "go", streaming)
    assert EMAIL not in repr(response) + repr(events)
    assert "jane.roe" not in repr(events)
    if streaming:
        assert nested_text(events) == "mail [REDACTED:email]so [REDACTED:email] it is"
        results = []
        for event in events:
            while isinstance(event, ToolProgress) and event.event is not None:
                event = event.event
            if isinstance(event, ToolCallFinished):
                results.append(event.result.content)
        assert "jane: [REDACTED:email]" in results


# -- progress messages --------------------------------------------------------------------


@tool(reports_progress=True)
async def charge(context: ToolContext) -> str:
    """Charges the card on file."""
    context.report_progress(1, 2, f"charging card {CARD}")
    await anyio.lowlevel.checkpoint()
    context.report_progress(2, 2, f"receipt to {EMAIL}")
    return "charged"


@pytest.mark.issue32(3)
@pytest.mark.anyio
@pytest.mark.parametrize("streaming", [False, True])
async def test_progress_messages_are_redacted(streaming: bool) -> None:
    model = ScriptedChatModel([ToolCall.from_arguments("charge", {}, id="c1"), "Charged."])
    chain = Chain([RedactionAdvisor(RULES), ToolCallingAdvisor()], model=model, tools=[charge])
    response, events = await run(chain, "charge me", streaming)
    assert response.text == "Charged."
    if streaming:
        messages = [e.message for e in events if isinstance(e, ToolProgress)]
        assert messages == ["charging card [REDACTED:card]", "receipt to [REDACTED:email]"]
        assert [(e.progress, e.total) for e in events if isinstance(e, ToolProgress)] == [
            (1.0, 2.0),
            (2.0, 2.0),
        ]
    assert "4242" not in repr(events) and EMAIL not in repr(events)


@pytest.mark.issue32(3)
@pytest.mark.anyio
async def test_progress_is_shown_with_block_rules_redacted_not_raised() -> None:
    model = ScriptedChatModel([ToolCall.from_arguments("charge", {}, id="c1"), "Charged."])
    chain = Chain(
        [RedactionAdvisor(["card"], strategy="block"), ToolCallingAdvisor()],
        model=model,
        tools=[charge],
    )
    events = [e async for e in chain.stream("charge me")]
    assert [e.message for e in events if isinstance(e, ToolProgress)][0] == (
        "charging card [REDACTED:card]"
    )


def test_progress_text_is_chunking_independent_and_flushed_per_call() -> None:
    redaction = RedactionAdvisor(RULES, hold_back=40, max_match=32)
    text = f"a {EMAIL} b {CARD} c"
    progress = _ProgressText(redaction)
    out: list[StreamEvent] = []
    for i in range(0, len(text), 3):  # two calls interleaved, one nested a level deeper
        out += progress.rewrite(ToolProgress("x", event=TextDelta(text[i : i + 3])), ())
        inner = ToolProgress("y", event=ToolProgress("z", event=TextDelta(text[i : i + 3])))
        out += progress.rewrite(inner, ())
    out += progress.flush(("x",))
    wrapped = [e for e in out if isinstance(e, ToolProgress)]
    assert len(wrapped) == len(out)
    x_only = [e for e in wrapped if e.call_id == "x"]
    assert nested_text(x_only) == redaction.rewrite_progress(text)
    out += progress.flush(())
    y_only = [e for e in out if isinstance(e, ToolProgress) and e.call_id == "y"]
    assert nested_text(y_only) == redaction.rewrite_progress(text)


LOWER = "abcdefghij"
pieces = st.lists(
    st.sampled_from(
        [EMAIL, CARD, "4242\u00a04242\u202f4242\u200b4242", " ", "x", "hello ", "@", "."]
    )
    | st.text(LOWER, min_size=1, max_size=6),
    max_size=12,
).map(" and ".join)


@settings(max_examples=150, deadline=None)
@given(text=pieces, cuts=st.lists(st.integers(1, 9), min_size=1, max_size=30))
def test_forwarded_text_redacts_alike_for_every_chunking(text: str, cuts: list[int]) -> None:
    redaction = RedactionAdvisor(RULES, hold_back=48, max_match=40)
    progress = _ProgressText(redaction)
    out: list[StreamEvent] = []
    i = 0
    for n in cuts * (len(text) // max(1, sum(cuts)) + 1):
        if i >= len(text):
            break
        out += progress.rewrite(ToolProgress("c", event=TextDelta(text[i : i + n])), ())
        i += n
    out += progress.flush(("c",))
    joined = nested_text(out)
    assert joined == redaction.rewrite_progress(text)
    for delta in progress_deltas(out):
        assert EMAIL not in delta and "4242 4242" not in delta


# -- exceptions that carry a transcript or text --------------------------------------------


@tool
def customer() -> str:
    """The customer on file."""
    return f"on file: {EMAIL}"


def calls_with_text(*ids: str) -> AssistantMessage:
    calls = tuple(ToolCall.from_arguments("customer", {}, id=i) for i in ids)
    return AssistantMessage(content=f"Writing to {EMAIL} first.", tool_calls=calls)


@pytest.mark.issue32(3)
@pytest.mark.anyio
@pytest.mark.parametrize("streaming", [False, True])
async def test_budget_exceeded_carries_a_redacted_transcript(streaming: bool) -> None:
    model = ScriptedChatModel([calls_with_text("c1"), "never"])
    chain = Chain(
        [RedactionAdvisor(RULES), BudgetAdvisor(max_model_calls=1), ToolCallingAdvisor()],
        model=model,
        tools=[customer],
    )
    with pytest.raises(BudgetExceeded) as caught:
        await run(chain, f"I am {EMAIL}", streaming)
    messages = caught.value.messages
    assert messages and EMAIL not in repr(messages)
    assert isinstance(messages[0], AssistantMessage)
    assert messages[0].content == "Writing to [REDACTED:email] first."
    assert [m.content for m in messages if isinstance(m, ToolMessage)] == [
        "on file: [REDACTED:email]"
    ]


@pytest.mark.issue32(3)
@pytest.mark.anyio
@pytest.mark.parametrize("streaming", [False, True])
async def test_tool_call_limit_exceeded_carries_a_redacted_transcript(streaming: bool) -> None:
    model = ScriptedChatModel([calls_with_text("c1", "c2"), "never"])
    chain = Chain(
        [RedactionAdvisor(RULES), ToolCallingAdvisor(max_calls=1, on_limit="raise")],
        model=model,
        tools=[customer],
    )
    with pytest.raises(ToolCallLimitExceeded) as caught:
        await run(chain, "go", streaming)
    assert caught.value.messages and EMAIL not in repr(caught.value.messages)
    assert "[REDACTED:email]" in repr(caught.value.messages)


@pytest.mark.issue32(3)
@pytest.mark.anyio
@pytest.mark.parametrize("streaming", [False, True])
async def test_a_raised_tool_error_and_its_cause_are_redacted(streaming: bool) -> None:
    @tool
    def lookup() -> str:
        """Looks the customer up."""
        raise LookupError(f"no account for {EMAIL}")

    model = ScriptedChatModel([ToolCall.from_arguments("lookup", {}, id="l1"), "never"])
    chain = Chain(
        [RedactionAdvisor(RULES), ToolCallingAdvisor(on_tool_error="raise")],
        model=model,
        tools=[lookup],
    )
    with pytest.raises(ToolExecutionError) as caught:
        await run(chain, "go", streaming)
    assert EMAIL not in str(caught.value) and "[REDACTED:email]" in str(caught.value)
    assert caught.value.__cause__ is not None
    assert EMAIL not in str(caught.value.__cause__)


@pytest.mark.issue32(3)
@pytest.mark.anyio
@pytest.mark.parametrize("streaming", [False, True])
async def test_a_provider_error_echoing_the_input_is_redacted(streaming: bool) -> None:
    error = BadRequestError(
        f"content rejected: {EMAIL}", status_code=400, body=f'{{"input": "{EMAIL}"}}'
    )
    chain = Chain([RedactionAdvisor(RULES, apply_to=["answer"])], model=ScriptedChatModel([error]))
    with pytest.raises(BadRequestError) as caught:
        await run(chain, "hi", streaming)
    assert EMAIL not in str(caught.value) + caught.value.body + repr(caught.value)


# -- matching -----------------------------------------------------------------------------

SEPARATORS = ["\u00a0", "\u202f", "\u200b", "\u2009", "\u3000", "\u2013", "\u2011", "\u2060"]


@pytest.mark.issue32(3)
@pytest.mark.anyio
@pytest.mark.parametrize("separator", [*SEPARATORS, " \u200b", "\u00ad-"])
@pytest.mark.parametrize("streaming", [False, True])
async def test_cards_with_unicode_separators_are_matched(separator: str, streaming: bool) -> None:
    card = separator.join(["4242"] * 4)
    answer = f"Card {card} is on file."
    chain = Chain([RedactionAdvisor(["card"])], model=ScriptedChatModel([answer], chunk_size=1))
    response, events = await run(chain, "which card?", streaming)
    assert response.text == "Card [REDACTED:card] is on file."
    if streaming:
        assert "".join(e.text for e in events if isinstance(e, TextDelta)) == response.text


def test_invisible_characters_inside_an_address_do_not_hide_it() -> None:
    redaction = RedactionAdvisor(["email", "api_key"])
    assert redaction.redact("to jane\u200b.roe@exam\u2060ple.com!") == "to [REDACTED:email]!"
    key = "sk-" + "\u200b".join(["Ab12Cd34Ef56Gh78"] * 3)
    assert redaction.redact(f"key {key}") == "key [REDACTED:api_key]"


def test_the_variant_ranges_hold_every_such_character() -> None:
    import sys
    import unicodedata

    pattern = _INVISIBLE_OR_VARIANT()
    missing = [
        hex(c)
        for c in range(0x80, sys.maxunicode + 1)
        if unicodedata.category(chr(c)) in _VARIANT_CATEGORIES and not pattern.match(chr(c))
    ]
    assert missing == [], f"widen _WHERE_THEY_ARE: {missing[:10]}"
    assert all(first < last for first, last in _WHERE_THEY_ARE)


@pytest.mark.issue32(3)
@pytest.mark.anyio
@pytest.mark.parametrize("streaming", [False, True])
@pytest.mark.parametrize("order", ["custom first", "email first"])
async def test_overlapping_rules_leave_nothing_of_either_match(streaming: bool, order: str) -> None:
    user = RedactionRule("user", r"user:\s*\w+")
    rules: list[str | RedactionRule] = (
        [user, "email"] if order == "custom first" else ["email", user]
    )
    answer = f"Logged in as user: {EMAIL} today."
    chain = Chain([RedactionAdvisor(rules)], model=ScriptedChatModel([answer], chunk_size=2))
    response, _ = await run(chain, "who?", streaming)
    assert response.text == "Logged in as [REDACTED:user] today."
    for piece in ("jane", "roe", "example", ".com"):
        assert piece not in response.text


def test_a_block_rule_in_an_overlap_decides() -> None:
    from advisorchain.advisors import RedactionBlocked

    rules = [
        RedactionRule("user", r"user:\s*\w+"),
        RedactionRule("mail", r"\S+@\S+", strategy="block"),
    ]
    with pytest.raises(RedactionBlocked) as caught:
        RedactionAdvisor(rules).redact(f"user: {EMAIL}")
    assert caught.value.rule == "mail"


overlapping = st.lists(
    st.sampled_from(["user: ", "user:", "id ", EMAIL, "bob@mail.example.org", " ", "x", "."]),
    max_size=14,
).map("".join)


@settings(max_examples=200, deadline=None)
@given(text=overlapping, custom_first=st.booleans())
def test_no_part_of_an_overlapped_address_survives(text: str, custom_first: bool) -> None:
    user = RedactionRule("user", r"user:\s*\w+")
    rules: list[str | RedactionRule] = [user, "email"] if custom_first else ["email", user]
    redaction = RedactionAdvisor(rules, hold_back=64, max_match=48)
    out = redaction.redact(text)
    alone = RedactionAdvisor(["email"]).redact(text)
    # whatever the custom rule took, every address the email rule finds alone is gone
    assert out.count("@") <= alone.count("@")
    if "example" not in alone.replace("[REDACTED:email]", ""):
        shown = out.replace("[REDACTED:email]", "").replace("[REDACTED:user]", "")
        assert "example" not in shown


@settings(max_examples=40, deadline=None)
@given(text=pieces, sizes=st.lists(st.integers(1, 9), min_size=1, max_size=12))
def test_a_sub_chains_stream_redacts_alike_for_every_chunking(text: str, sizes: list[int]) -> None:
    redaction = RedactionAdvisor(RULES, hold_back=48, max_match=40)
    child = Chain([ToolCallingAdvisor()], model=ScriptedChatModel([text or "-"], chunk_size=sizes))
    model = ScriptedChatModel([ToolCall.from_arguments("helper", {"task": "t"}, id="h1"), "ok"])
    chain = Chain(
        [redaction, ToolCallingAdvisor()], model=model, tools=[chain_tool(child, "helper", "h")]
    )

    async def main() -> list[StreamEvent]:
        return [e async for e in chain.stream("go")]

    events = anyio.run(main)
    assert nested_text(events) == redaction.rewrite_progress(text or "-")
    for delta in progress_deltas(events):
        assert EMAIL not in delta and "4242 4242" not in delta


@pytest.mark.issue32(3)
@pytest.mark.anyio
async def test_a_sub_chains_tool_call_arguments_are_shown_redacted() -> None:
    @tool
    def notify(address: str) -> str:
        """Sends a note."""
        return "sent"

    child = Chain(
        [ToolCallingAdvisor()],
        model=ScriptedChatModel(
            [ToolCall.from_arguments("notify", {"address": EMAIL}, id="n1"), "Noted."]
        ),
        tools=[notify],
    )
    model = ScriptedChatModel([ToolCall.from_arguments("helper", {"task": "t"}, id="h1"), "ok"])
    chain = Chain(
        [RedactionAdvisor(RULES), ToolCallingAdvisor()],
        model=model,
        tools=[chain_tool(child, "helper", "h")],
    )
    events = [e async for e in chain.stream("go")]
    assert EMAIL not in repr(events)
    assert '{"address":"[REDACTED:email]"}' in repr(events)


class Discarding(Advisor):
    """Rejects the first answer, naming what it saw (as a validating link might)."""

    single_path = True  # AnswerDiscarded exists on the stream path only

    async def stream(self, request: ChatRequest, next: StreamNext) -> AsyncIterator[StreamEvent]:
        async for event in next(request):
            if not isinstance(event, ResponseCompleted):
                yield event
        yield AnswerDiscarded(reason=f"no addresses like {EMAIL}", attempt=1)
        async for event in next(request):
            yield event


@pytest.mark.issue32(3)
@pytest.mark.anyio
async def test_a_discarded_answer_is_flushed_before_the_marker_and_its_reason_redacted() -> None:
    first = "a" * 30 + f" {EMAIL}"
    model = ScriptedChatModel([first, "second"], chunk_size=4)
    chain = Chain([RedactionAdvisor(RULES), Discarding()], model=model)
    events = [e async for e in chain.stream("go")]
    marker = next(i for i, e in enumerate(events) if isinstance(e, AnswerDiscarded))
    before = "".join(e.text for e in events[:marker] if isinstance(e, TextDelta))
    after = "".join(e.text for e in events[marker:] if isinstance(e, TextDelta))
    assert (before, after) == ("a" * 30 + " [REDACTED:email]", "second")
    discarded = events[marker]
    assert isinstance(discarded, AnswerDiscarded)
    assert discarded.reason == "no addresses like [REDACTED:email]"
