"""`RedactionAdvisor`: built-in and custom rules, strategies, targets, on both paths."""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Sequence

import pytest

from advisorchain import (
    AssistantMessage,
    Chain,
    ChatResponse,
    Message,
    ResponseCompleted,
    StreamEvent,
    TextDelta,
    ToolCall,
    ToolCallFinished,
    ToolCallingAdvisor,
    ToolMessage,
    UserMessage,
    tool,
)
from advisorchain.advisors import (
    ApprovalAdvisor,
    Approve,
    DeferredApprover,
    InMemoryApprovalStore,
    InMemoryChatMemoryStore,
    MemoryAdvisor,
    RedactionAdvisor,
    RedactionBlocked,
    RedactionRule,
)
from advisorchain.advisors.redaction import BUILTIN_RULES, iban_valid, luhn_valid
from advisorchain.providers import ScriptedChatModel

EMAIL = "jane.roe@example.com"
ALL = list(BUILTIN_RULES)


def redact(text: str, rules: Sequence[str] = ALL) -> str:
    return RedactionAdvisor(rules).redact(text)


@pytest.mark.parametrize(
    ("rule", "found", "ignored"),
    [
        (
            "email",
            ["a@b.io", "jane.roe+tag@mail.example.co.uk", "X_Y-z%1@sub-domain.example.org"],
            ["a@b", "@example.com", "user at example dot com", "v1.2@3"],
        ),
        (
            "phone",
            ["+1 415-555-0123", "(415) 555-0123", "415.555.0123", "020 7946 0958", "+4930123456"],
            ["2024-01-15 10:30", "3.14159265358", "1 2 3 4 5 6 7 8 9", "555-0123", "12.05.2024"],
        ),
        (
            "card",
            ["4242 4242 4242 4242", "4111-1111-1111-1111", "378282246310005", "5555555555554444"],
            ["4242 4242 4242 4241", "1234 5678 9012 3456", "4242 4242 4242 4242 4"],
        ),
        (
            "iban",
            ["DE89 3704 0044 0532 0130 00", "GB82WEST12345698765432", "NL91 ABNA 0417 1643 00"],
            ["DE89 3704 0044 0532 0130 01", "GB00WEST12345698765432", "DE89"],
        ),
        (
            "api_key",
            [
                "sk-" + "A1b2" * 12,
                "sk-proj-" + "x_Y-" * 40,
                "sk-ant-api03-" + "q" * 95,
                "AKIAIOSFODNN7EXAMPLE",
                "ghp_" + "a1" * 18,
                "github_pat_" + "B2_" * 10,
                "xoxb-1234567890-abcdef",
                "AIza" + "c" * 35,
            ],
            ["sk-short", "task-force-" + "a" * 30, "AKIA-NOT-A-KEY", "ghp_short"],
        ),
    ],
)
def test_builtin_rules(rule: str, found: list[str], ignored: list[str]) -> None:
    for value in found:
        assert redact(f"see {value}, ok", [rule]) == f"see [REDACTED:{rule}], ok", value
    for value in ignored:
        assert redact(f"see {value}, ok", ALL) == f"see {value}, ok", value


def test_checks() -> None:
    assert luhn_valid("4242 4242 4242 4242") and not luhn_valid("4242 4242 4242 4241")
    assert not luhn_valid("")
    assert iban_valid("DE89 3704 0044 0532 0130 00") and not iban_valid("DE89370400440532013001")
    assert not iban_valid("DE89")


def test_overlapping_rules_prefer_the_earliest_then_the_longest() -> None:
    short = RedactionRule("short", r"ab")
    long = RedactionRule("long", r"abcd")
    assert RedactionAdvisor([short, long]).redact("xabcdx") == "x[REDACTED:long]x"
    assert RedactionAdvisor([long, RedactionRule("b", "bc")]).redact("abcd") == "[REDACTED:long]"


def test_strategies() -> None:
    text = f"mail {EMAIL}, card 4242 4242 4242 4242."
    masked = RedactionAdvisor(["email", "card"], strategy="mask").redact(text)
    assert masked == "mail ****.***@******e.com, card **** **** **** 4242."
    unsalted = RedactionAdvisor(strategy="hash").redact(text)
    digest = hashlib.sha256(EMAIL.encode()).hexdigest()[:12]
    assert unsalted == f"mail [email:{digest}], card 4242 4242 4242 4242."
    salted = RedactionAdvisor(strategy="hash", hash_salt="pepper").redact(text)
    keyed = hmac.new(b"pepper", EMAIL.encode(), hashlib.sha256).hexdigest()[:12]
    assert salted == f"mail [email:{keyed}], card 4242 4242 4242 4242."
    assert RedactionAdvisor(strategy="hash", hash_salt="pepper").redact(text) == salted  # stable
    with pytest.raises(RedactionBlocked) as blocked:
        RedactionAdvisor(strategy="block").redact(text)
    assert blocked.value.rule == "email" and EMAIL not in str(blocked.value)


def test_mask_hides_at_least_half() -> None:
    assert (
        RedactionAdvisor([RedactionRule("pin", r"PIN\d{4}")], strategy="mask").redact("PIN1234")
        == "****234"
    )
    assert (
        RedactionAdvisor([RedactionRule("id", r"ID\d\d")], strategy="mask").redact("ID12") == "**12"
    )


def test_redacted_and_masked_text_is_redacted_to_itself() -> None:
    text = (
        f"{EMAIL} +1 415-555-0123 4242 4242 4242 4242 DE89 3704 0044 0532 0130 00 "
        "AKIAIOSFODNN7EXAMPLE"
    )
    for strategy in ("redact", "mask"):
        advisor = RedactionAdvisor(ALL, strategy=strategy)
        once = advisor.redact(text)
        assert advisor.redact(once) == once
        assert once != text


def test_custom_rules_with_their_own_strategy() -> None:
    advisor = RedactionAdvisor(
        ["email", RedactionRule("order", re.compile(r"ORD-\d{6}"), strategy="mask")],
    )
    assert advisor.redact(f"{EMAIL} ORD-123456") == "[REDACTED:email] ***-**3456"
    checked = RedactionRule("even", r"\b\d+\b", check=lambda s: int(s) % 2 == 0)
    assert RedactionAdvisor([checked]).redact("1 2 3 44") == "1 [REDACTED:even] 3 [REDACTED:even]"


def test_configuration_errors() -> None:
    with pytest.raises(ValueError, match="unknown built-in"):
        RedactionAdvisor(["passport"])
    with pytest.raises(ValueError, match="strategy"):
        RedactionAdvisor(strategy="shred")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="apply_to"):
        RedactionAdvisor(apply_to=["system"])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="empty"):
        RedactionRule("any", r"x*")
    with pytest.raises(ValueError, match="unique"):
        RedactionAdvisor(["email", RedactionRule("email", "@")])
    with pytest.raises(ValueError, match="at least one rule"):
        RedactionAdvisor([])
    with pytest.raises(ValueError, match="max_match"):
        RedactionAdvisor(hold_back=10, max_match=10)


# --- through a chain, on both paths ---------------------------------------------------


async def run(chain: Chain, prompt: str, streaming: bool) -> tuple[ChatResponse, list[str]]:
    """The turn's response and its text deltas (none for `call`)."""
    if not streaming:
        return await chain.call(prompt, conversation_id="c1"), []
    events: list[StreamEvent] = [e async for e in chain.stream(prompt, conversation_id="c1")]
    final = events[-1]
    assert isinstance(final, ResponseCompleted)
    return final.response, [e.text for e in events if isinstance(e, TextDelta)]


ANSWER = f"Write to {EMAIL} or call +1 415-555-0123."
REDACTED_ANSWER = "Write to [REDACTED:email] or call +1 415-555-0123."


@pytest.mark.anyio
@pytest.mark.parametrize("streaming", [False, True])
async def test_default_advisor_redacts_emails_both_ways(streaming: bool) -> None:
    model = ScriptedChatModel([ANSWER], chunk_size=3)
    chain = Chain([RedactionAdvisor()], model=model)
    response, deltas = await run(chain, f"I am {EMAIL}, phone +1 415-555-0123", streaming)
    assert model.requests[0].messages[-1].content == (
        "I am [REDACTED:email], phone +1 415-555-0123"
    )
    assert response.text == REDACTED_ANSWER
    assert response.messages == (response.message,)
    if streaming:
        assert "".join(deltas) == REDACTED_ANSWER
        assert all(EMAIL[:5] not in d for d in deltas)


@pytest.mark.anyio
@pytest.mark.parametrize("streaming", [False, True])
async def test_apply_to_limits_where_rules_run(streaming: bool) -> None:
    model = ScriptedChatModel([ANSWER, ANSWER], chunk_size=3)
    answer_only = Chain([RedactionAdvisor(apply_to=["answer"])], model=model)
    response, _ = await run(answer_only, f"I am {EMAIL}", streaming)
    assert model.requests[0].messages[-1].content == f"I am {EMAIL}"
    assert response.text == REDACTED_ANSWER
    user_only = Chain([RedactionAdvisor(apply_to=["user"])], model=model)
    response, deltas = await run(user_only, f"I am {EMAIL}", streaming)
    assert model.requests[1].messages[-1].content == "I am [REDACTED:email]"
    assert response.text == ANSWER
    if streaming:  # nothing to rewrite in the answer: no hold-back, the model's own chunks
        assert deltas == [ANSWER[i : i + 3] for i in range(0, len(ANSWER), 3)]


@tool
def customer(customer_id: str) -> str:
    """The customer's contact details."""
    return f"{customer_id}: {EMAIL}, card 4242 4242 4242 4242"


@tool
def secret_config() -> str:
    """The service configuration."""
    return "token=AKIAIOSFODNN7EXAMPLE region=eu"


def tool_model() -> ScriptedChatModel:
    return ScriptedChatModel(
        [
            [
                ToolCall.from_arguments("customer", {"customer_id": "C7"}, id="c1"),
                ToolCall.from_arguments("secret_config", {}, id="c2"),
            ],
            "Done.",
        ],
        chunk_size=2,
    )


@pytest.mark.anyio
@pytest.mark.parametrize("streaming", [False, True])
async def test_tool_results_are_redacted_and_blocked_ones_withheld(streaming: bool) -> None:
    model = tool_model()
    redaction = RedactionAdvisor(
        ["email", "card", RedactionRule("aws", r"AKIA[A-Z0-9]{16}", strategy="block")],
    )
    chain = Chain([redaction, ToolCallingAdvisor()], model=model, tools=[customer, secret_config])
    response, _ = await run(chain, "details of C7", streaming)
    assert response.text == "Done."
    sent = [m for m in model.requests[1].messages if isinstance(m, ToolMessage)]
    assert [m.content for m in sent] == [
        "C7: [REDACTED:email], card [REDACTED:card]",
        "Error: the result was withheld (redaction rule 'aws')",
    ]
    assert [m.is_error for m in sent] == [False, True]
    assert [m for m in response.messages if isinstance(m, ToolMessage)] == sent
    text = repr(model.requests) + repr(response)
    assert EMAIL not in text and "AKIAIOSFODNN7EXAMPLE" not in text


@pytest.mark.anyio
async def test_streamed_tool_events_carry_redacted_results() -> None:
    chain = Chain(
        [RedactionAdvisor(["email", "card"]), ToolCallingAdvisor()],
        model=tool_model(),
        tools=[customer, secret_config],
    )
    events = [e async for e in chain.stream("details of C7")]
    # parallel calls report their end in the order they finish: look each up by name
    finished = {e.call.name: e.result for e in events if isinstance(e, ToolCallFinished)}
    assert finished["customer"].content == "C7: [REDACTED:email], card [REDACTED:card]"
    assert EMAIL not in repr(events)


@pytest.mark.anyio
@pytest.mark.parametrize("streaming", [False, True])
async def test_tool_messages_in_the_request_are_redacted(streaming: bool) -> None:
    model = ScriptedChatModel(["ok"])
    history: list[Message] = [
        UserMessage(content="who?"),
        AssistantMessage(tool_calls=(ToolCall.from_arguments("customer", {}, id="c1"),)),
        ToolMessage(tool_call_id="c1", name="customer", content=EMAIL),
        UserMessage(content=f"and {EMAIL}?"),
    ]
    chain = Chain([RedactionAdvisor()], model=model)
    if streaming:
        [e async for e in chain.stream(history)]
    else:
        await chain.call(history)
    sent = model.requests[0].messages
    assert [getattr(m, "content", None) for m in sent[2:]] == [
        "[REDACTED:email]",
        "and [REDACTED:email]?",
    ]
    assert sent[1] is history[1]


@pytest.mark.anyio
@pytest.mark.parametrize("streaming", [False, True])
async def test_block_in_a_user_message_refuses_before_the_model(streaming: bool) -> None:
    model = ScriptedChatModel(["never"])
    chain = Chain([RedactionAdvisor(["api_key"], strategy="block")], model=model)
    with pytest.raises(RedactionBlocked) as blocked:
        await run(chain, "my key is AKIAIOSFODNN7EXAMPLE", streaming)
    assert (blocked.value.rule, blocked.value.target) == ("api_key", "user")
    assert model.requests == []


@pytest.mark.anyio
async def test_block_in_the_answer_raises_on_both_paths_without_leaking() -> None:
    key = "sk-" + "k" * 40
    answer = "Sure. Here is the key you asked for: " + key + " and more text after it."

    def chain() -> Chain:
        return Chain(
            [RedactionAdvisor(["api_key"], strategy="block", hold_back=32, max_match=24)],
            model=ScriptedChatModel([answer], chunk_size=1),
        )

    with pytest.raises(RedactionBlocked) as blocked:
        await chain().call("key?")
    assert blocked.value.target == "answer"
    deltas: list[str] = []
    with pytest.raises(RedactionBlocked):
        async for event in chain().stream("key?"):
            if isinstance(event, TextDelta):
                deltas.append(event.text)
    streamed = "".join(deltas)
    assert streamed and answer.startswith(streamed)  # the text before the key was shown
    assert "sk-" not in streamed


@pytest.mark.anyio
@pytest.mark.parametrize("streaming", [False, True])
async def test_memory_stores_the_redacted_answer_once(streaming: bool) -> None:
    store = InMemoryChatMemoryStore()
    model = ScriptedChatModel([ANSWER, "Noted."], chunk_size=5)
    chain = Chain([MemoryAdvisor(store), RedactionAdvisor(), ToolCallingAdvisor()], model=model)
    response, _ = await run(chain, f"I am {EMAIL}", streaming)
    stored = await store.load("c1")
    # the user's own words are stored as written, and redacted each time they are sent
    assert [m.content for m in stored] == [f"I am {EMAIL}", REDACTED_ANSWER]
    assert response.messages == (response.message,) and response.text == REDACTED_ANSWER
    await run(chain, "and?", streaming)
    assert EMAIL not in repr(model.requests)


@pytest.mark.anyio
@pytest.mark.parametrize("streaming", [False, True])
async def test_a_second_link_before_memory_keeps_user_data_out_of_the_store(
    streaming: bool,
) -> None:
    store = InMemoryChatMemoryStore()
    model = ScriptedChatModel([ANSWER], chunk_size=5)
    links = [RedactionAdvisor(apply_to=["user"]), MemoryAdvisor(store), RedactionAdvisor()]
    await run(Chain([*links, ToolCallingAdvisor()], model=model), f"I am {EMAIL}", streaming)
    stored = await store.load("c1")
    assert [m.content for m in stored] == ["I am [REDACTED:email]", REDACTED_ANSWER]


def test_builtin_rules_stay_linear_on_adversarial_text() -> None:
    advisor = RedactionAdvisor(ALL)
    hostile = [
        "a" * 20_000 + "@",
        "a@" * 10_000,
        "a@b." * 5_000,
        "1 " * 10_000,
        "1-" * 10_000 + "x",
        "4" * 20_000,
        "DE00 " * 4_000,
        "sk-" + "a-" * 10_000,
        ("x" * 63 + ".") * 300 + "@",
    ]
    for text in hostile:  # a catastrophic pattern would not finish
        assert len(advisor.redact(text)) > 0


@pytest.mark.anyio
@pytest.mark.parametrize("streaming", [False, True])
async def test_a_resumed_turn_redacts_the_results_of_the_approved_calls(streaming: bool) -> None:
    model = ScriptedChatModel(
        [ToolCall.from_arguments("customer", {"customer_id": "C7"}, id="c1"), f"Sent to {EMAIL}."]
    )
    approval = ApprovalAdvisor(
        DeferredApprover(),
        policy=lambda tool, arguments, context: True,
        store=InMemoryApprovalStore(),
    )
    chain = Chain(
        [RedactionAdvisor(["email", "card"]), ToolCallingAdvisor(), approval],
        model=model,
        tools=[customer],
    )
    pending = await chain.call("details of C7")
    assert pending.finish_reason == "deferred"
    transcript = [UserMessage(content="details of C7"), *pending.messages]
    if streaming:
        resumed = chain.stream(transcript, decisions={"c1": Approve()})
        events = [e async for e in resumed]
        final = events[-1]
        assert isinstance(final, ResponseCompleted)
        response = final.response
        deltas = "".join(e.text for e in events if isinstance(e, TextDelta))
        assert deltas == "Sent to [REDACTED:email]."
    else:
        response = await chain.call(transcript, decisions={"c1": Approve()})
    assert response.text == "Sent to [REDACTED:email]."
    results = [m.content for m in response.messages if isinstance(m, ToolMessage)]
    assert results == ["C7: [REDACTED:email], card [REDACTED:card]"]
    assert EMAIL not in repr(model.requests[-1].messages)
