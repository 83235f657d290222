"""Tool-call ids are unique in the transcript and valid for every provider before any
advisor sees a model's response (`core/call_ids.py`, the chain's innermost step)."""

from __future__ import annotations

import json
import re
import tracemalloc
from collections import Counter
from collections.abc import AsyncIterator, Sequence
from typing import Any

import httpx
import pytest

from advisorchain import (
    Advisor,
    AssistantMessage,
    Chain,
    ChatRequest,
    ChatResponse,
    Message,
    ResponseCompleted,
    StreamEvent,
    TextDelta,
    ToolCall,
    ToolCallingAdvisor,
    ToolCallStarted,
    ToolMessage,
    UserMessage,
    tool,
)
from advisorchain.core.advisor import CallNext, StreamNext
from advisorchain.core.call_ids import (
    MAX_CALL_ID_CHARS,
    CallIds,
    StreamCallIds,
    is_valid_call_id,
    unique_response,
)
from advisorchain.core.events import ToolCallDelta
from advisorchain.core.text_tool_calls import (
    apply_text_tool_calls,
    parse_text_tool_calls,
)
from advisorchain.providers import AnthropicChatModel, ScriptedChatModel, TextToolCallModel

ANTHROPIC_ID = re.compile(r"^[a-zA-Z0-9_-]+$")

HOSTILE_IDS = [
    "call_1",
    "call_1",
    "",
    "call 1",
    'call"1',
    "call\x001",
    "call\n",
    "ünïcode",
    "x" * 100_000,
    "x" * 100_001,
    "../../etc/passwd",
]


def assert_valid(messages: Sequence[Message]) -> None:
    """Every call answered exactly once, ids unique and accepted by every provider."""
    calls = [c.id for m in messages if isinstance(m, AssistantMessage) for c in m.tool_calls]
    answers = [m.tool_call_id for m in messages if isinstance(m, ToolMessage)]
    assert len(set(calls)) == len(calls), calls
    assert Counter(answers) == Counter(calls)
    assert all(is_valid_call_id(i) and ANTHROPIC_ID.match(i) for i in calls), calls


# -- the rules --------------------------------------------------------------------------------


def test_claim_keeps_valid_free_ids_and_replaces_the_rest() -> None:
    ids = CallIds(["used_before"])
    assert ids.claim("toolu_01A09q90qw90lq917835lq9") == "toolu_01A09q90qw90lq917835lq9"
    assert ids.claim("call_1") == "call_1"
    second = ids.claim("call_1")
    assert second != "call_1" and is_valid_call_id(second)
    assert ids.claim("used_before") != "used_before"
    assert ids.claim("call 2") == "call_2"  # sanitized, kept recognizable
    assert ids.claim("call.2") not in ("call_2", "call.2")  # sanitized form taken
    assert ids.claim("") != ""
    long = ids.claim("a" * 100_000)
    assert long == "a" * MAX_CALL_ID_CHARS


def test_every_hostile_id_becomes_unique_and_valid() -> None:
    calls = tuple(ToolCall(id=i, name="t") for i in HOSTILE_IDS)
    transcript = (UserMessage(content="go"),)
    response = unique_response(ChatResponse(message=AssistantMessage(tool_calls=calls)), transcript)
    ids = [c.id for c in response.message.tool_calls]
    assert len(set(ids)) == len(ids)
    assert all(is_valid_call_id(i) and ANTHROPIC_ID.match(i) for i in ids)
    assert ids[0] == "call_1"
    assert response.messages == (response.message,)


def test_ids_of_earlier_rounds_are_not_reused() -> None:
    earlier = AssistantMessage(tool_calls=(ToolCall(id="call_1", name="t"),))
    transcript: tuple[Message, ...] = (
        UserMessage(content="go"),
        earlier,
        ToolMessage(tool_call_id="call_1", name="t", content="ok"),
    )
    again = ChatResponse(message=AssistantMessage(tool_calls=(ToolCall(id="call_1", name="t"),)))
    (call,) = unique_response(again, transcript).message.tool_calls
    assert call.id != "call_1"


class _MyAssistant(AssistantMessage):
    pass


class _MyToolResult(ToolMessage):
    pass


@pytest.mark.parametrize("where", ["call", "result", "both"])
def test_ids_used_by_message_subclasses_are_not_reused(where: str) -> None:
    # The scan tells the library's own classes by type; subclasses must count as well.
    transcript: list[Message] = [UserMessage(content="go")]
    if where in ("call", "both"):
        transcript.append(_MyAssistant(tool_calls=(ToolCall(id="call_1", name="t"),)))
    if where in ("result", "both"):
        transcript.append(_MyToolResult(tool_call_id="call_1", name="t", content="ok"))
    again = ChatResponse(message=AssistantMessage(tool_calls=(ToolCall(id="call_1", name="t"),)))
    (call,) = unique_response(again, transcript).message.tool_calls
    assert call.id != "call_1" and is_valid_call_id(call.id)
    assert "call_1" in CallIds.of(transcript)


def test_a_later_call_of_the_response_clashing_with_the_transcript_is_renamed() -> None:
    transcript = (ToolMessage(tool_call_id="b", name="t", content="ok"),)
    calls = (ToolCall(id="a", name="t"), ToolCall(id="b", name="t"), ToolCall(id="a", name="t"))
    fixed = unique_response(ChatResponse(message=AssistantMessage(tool_calls=calls)), transcript)
    ids = [c.id for c in fixed.message.tool_calls]
    assert ids[0] == "a" and len(set(ids)) == 3 and "b" not in ids


def test_tool_call_equality_is_unchanged_by_its_identity_shortcut() -> None:
    call = ToolCall(id="a", name="t", arguments='{"x": 1}', provider_data={"v": float("nan")})
    twin = ToolCall(id="a", name="t", arguments='{"x": 1}', provider_data={"v": 1.0})
    assert call == call and not call != call
    assert call != twin and twin == twin.model_copy()
    assert ToolCall(id="a", name="t") == ToolCall(id="a", name="t")
    assert hash(ToolCall(id="a", name="t")) == hash(ToolCall(id="a", name="t"))
    assert call != "a" and {ToolCall(id="a", name="t"): 1}[ToolCall(id="a", name="t")] == 1


def test_a_response_without_changes_is_returned_as_is() -> None:
    response = ChatResponse(message=AssistantMessage(tool_calls=(ToolCall(id="a", name="t"),)))
    assert unique_response(response, ()) is response
    text = ChatResponse(message=AssistantMessage(content="hi"))
    assert unique_response(text, ()) is text


def test_stream_deltas_and_response_agree() -> None:
    ids = StreamCallIds((UserMessage(content="go"),))
    deltas = [
        ids.delta(ToolCallDelta(0, "call_1", "t", "{")),
        ids.delta(ToolCallDelta(0, None, None, "}")),
        ids.delta(ToolCallDelta(1, "call_1", "t", "{}")),
        ids.delta(ToolCallDelta(1, "call_1", None, "")),  # a repeated id in a later fragment
        ids.delta(ToolCallDelta(2, "bad id!", "t", "{}")),
    ]
    first, _, second, second_again, third = (d.id for d in deltas)
    assert first == "call_1" and second not in (None, "call_1") and second_again == second
    assert third == "bad_id_"
    raw = AssistantMessage(
        tool_calls=(
            ToolCall(id="call_1", name="t"),
            ToolCall(id="call_1", name="t"),
            ToolCall(id="bad id!", name="t"),
        )
    )
    final = ids.response(ChatResponse(message=raw))
    assert [c.id for c in final.message.tool_calls] == [first, second, third]


def test_an_index_whose_id_comes_late_keeps_its_position() -> None:
    ids = StreamCallIds((UserMessage(content="go"),))
    ids.delta(ToolCallDelta(0, None, "t", "{"))  # the id arrives in a later fragment
    late = ids.delta(ToolCallDelta(0, "call_9", None, "}")).id
    ids.delta(ToolCallDelta(1, None, "t", "{}"))  # never brings one
    raw = AssistantMessage(
        tool_calls=(ToolCall(id="call_9", name="t"), ToolCall(id="call_9", name="t"))
    )
    final = [c.id for c in ids.response(ChatResponse(message=raw)).message.tool_calls]
    assert final[0] == late == "call_9" and final[1] not in ("call_9", "")


def test_a_stream_without_tool_calls_allocates_no_id_bookkeeping() -> None:
    # thousands of streams may be open at once: one that brings no tool call keeps no
    # dict or set of indices and ids (an empty set alone is 216 bytes)
    transcript = (UserMessage(content="go"),)
    response = ChatResponse(message=AssistantMessage(content="hi"))
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        kept = [StreamCallIds(transcript) for _ in range(1000)]
        for ids in kept:
            assert ids.response(response) is response
        per_stream = (tracemalloc.get_traced_memory()[0] - before) / len(kept)
    finally:
        tracemalloc.stop()
    assert per_stream < 128


# -- through the chain: call and stream ---------------------------------------------------------


class Seen(Advisor):
    """An advisor directly around the model: records the ids it is shown."""

    def __init__(self) -> None:
        self.deltas: list[str] = []
        self.completed: list[list[str]] = []

    async def call_model(self, request: ChatRequest, next: CallNext) -> ChatResponse:
        response = await next(request)
        self.completed.append([c.id for c in response.tool_calls])
        return response

    async def stream_model(
        self, request: ChatRequest, next: StreamNext
    ) -> AsyncIterator[StreamEvent]:
        async for event in next(request):
            if isinstance(event, ToolCallDelta) and event.id:
                self.deltas.append(event.id)
            elif isinstance(event, ResponseCompleted):
                self.completed.append([c.id for c in event.response.tool_calls])
            yield event


def echo_tools() -> list[Any]:
    @tool
    def echo(text: str) -> str:
        """Echo the text."""
        return text

    return [echo]


def hostile_round(round_number: int) -> list[ToolCall]:
    # the same ids every round, as models that number their calls from 1 each time do
    return [
        ToolCall.from_arguments("echo", {"text": f"{round_number}-{n}"}, id=i)
        for n, i in enumerate(["call_1", "call_1", "call 2", "x" * 500])
    ]


async def run(chain: Chain, mode: str, tools: list[Any]) -> ChatResponse:
    if mode == "call":
        return await chain.call("go", tools=tools)
    events = [e async for e in chain.stream("go", tools=tools)]
    last = events[-1]
    assert isinstance(last, ResponseCompleted)
    started = [e.call.id for e in events if isinstance(e, ToolCallStarted)]
    calls = [
        c.id
        for m in last.response.messages
        if isinstance(m, AssistantMessage)
        for c in m.tool_calls
    ]
    assert started == calls
    return last.response


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["call", "stream"])
async def test_the_chain_makes_ids_unique_over_the_whole_turn(mode: str) -> None:
    model = ScriptedChatModel([hostile_round(1), hostile_round(2), "done"], chunk_size=3)
    seen = Seen()
    chain = Chain([ToolCallingAdvisor(), seen], model=model)
    response = await run(chain, mode, echo_tools())
    assert response.text == "done"
    assert_valid(response.messages)
    assert_valid(model.requests[-1].messages)
    results = [m.content for m in response.messages if isinstance(m, ToolMessage)]
    assert results == [f"{r}-{n}" for r in (1, 2) for n in range(4)]  # nothing lost
    if mode == "stream":
        rounds = [ids for ids in seen.completed if ids]
        assert seen.deltas == [i for ids in rounds for i in ids]


class HandWritten:
    """A user's own `ChatModel` that always answers with the same two calls."""

    def __init__(self) -> None:
        self.requests: list[ChatRequest] = []

    def _reply(self, request: ChatRequest) -> ChatResponse:
        self.requests.append(request)
        if len(self.requests) > 1:
            return ChatResponse(message=AssistantMessage(content="done"))
        calls = (
            ToolCall(id="same", name="echo", arguments='{"text": "a"}'),
            ToolCall(id="same", name="echo", arguments='{"text": "b"}'),
        )
        return ChatResponse(message=AssistantMessage(tool_calls=calls), finish_reason="tool_calls")

    async def call(self, request: ChatRequest) -> ChatResponse:
        return self._reply(request)

    async def stream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        response = self._reply(request)
        for index, call in enumerate(response.message.tool_calls):
            yield ToolCallDelta(index, call.id, call.name, call.arguments)
        if response.text:
            yield TextDelta(response.text)
        yield ResponseCompleted(response)


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["call", "stream"])
async def test_a_hand_written_model_gets_unique_ids_too(mode: str) -> None:
    model = HandWritten()
    response = await run(Chain([ToolCallingAdvisor()], model=model), mode, echo_tools())
    assert_valid(response.messages)
    assert [m.content for m in response.messages if isinstance(m, ToolMessage)] == ["a", "b"]


# -- the text tool-call parser ------------------------------------------------------------------


def test_the_text_parser_gives_each_call_an_id_of_its_own() -> None:
    text = (
        '<tool_call>{"name": "echo", "arguments": {"text": "a"}, "id": "c"}</tool_call>'
        '<tool_call>{"name": "echo", "arguments": {"text": "b"}, "id": "c"}</tool_call>'
        '<tool_call>{"name": "echo", "arguments": {"text": "c"}, "id": "bad id"}</tool_call>'
    )
    calls = parse_text_tool_calls(text, {"echo"}).calls
    assert [c.id for c in calls][:1] == ["c"]
    assert len({c.id for c in calls}) == 3 and all(is_valid_call_id(c.id) for c in calls)


def test_text_calls_do_not_take_the_ids_of_the_models_own_calls() -> None:
    own = ToolCall(id="c", name="echo", arguments='{"text": "own"}')
    text = '<tool_call>{"name": "echo", "arguments": {"text": "t"}, "id": "c"}</tool_call>'
    response = ChatResponse(message=AssistantMessage(content=text, tool_calls=(own,)))
    calls = apply_text_tool_calls(response, {"echo"}).message.tool_calls
    assert [c.id for c in calls][0] == "c" and len({c.id for c in calls}) == 2


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["call", "stream"])
async def test_text_tool_calls_with_one_id_through_the_chain(mode: str) -> None:
    text = "".join(
        f'<tool_call>{{"name": "echo", "arguments": {{"text": "{t}"}}, "id": "1"}}</tool_call>'
        for t in "ab"
    )
    model = TextToolCallModel(ScriptedChatModel([text, "done"]))
    response = await run(Chain([ToolCallingAdvisor()], model=model), mode, echo_tools())
    assert_valid(response.messages)
    assert [m.content for m in response.messages if isinstance(m, ToolMessage)] == ["a", "b"]


# -- on the wire: what Anthropic is sent --------------------------------------------------------


@pytest.mark.anyio
async def test_anthropic_is_sent_unique_valid_ids_after_hostile_ones() -> None:
    sent: list[dict[str, Any]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(json.loads(request.content))
        if len(sent) == 1:
            blocks = [
                {"type": "tool_use", "id": i, "name": "echo", "input": {"text": t}}
                for i, t in (("toolu 1", "a"), ("toolu 1", "b"), ("toolu_2", "c"))
            ]
            body: dict[str, Any] = {"content": blocks, "stop_reason": "tool_use"}
        else:
            body = {"content": [{"type": "text", "text": "done"}], "stop_reason": "end_turn"}
        return httpx.Response(200, json={"id": "m", "model": "c", "usage": {}, **body})

    async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
        model = AnthropicChatModel("c", api_key="k", base_url="http://x", http_client=client)
        response = await Chain([ToolCallingAdvisor()], model=model).call("go", tools=echo_tools())
    assert response.text == "done"
    assistant, results = sent[1]["messages"][1:3]
    uses = [b["id"] for b in assistant["content"] if b["type"] == "tool_use"]
    answered = [b["tool_use_id"] for b in results["content"] if b["type"] == "tool_result"]
    assert len(set(uses)) == 3 and uses == answered
    assert all(ANTHROPIC_ID.match(i) for i in uses)
    assert uses[2] == "toolu_2"


def test_provider_responses_carry_unique_valid_ids() -> None:
    from advisorchain.providers.anthropic import message_response
    from advisorchain.providers.openai import completion_response

    function = {"name": "echo", "arguments": "{}"}
    openai = completion_response(
        {
            "choices": [
                {
                    "message": {
                        "tool_calls": [
                            {"id": "call_1", "type": "function", "function": function},
                            {"id": "call_1", "type": "function", "function": function},
                        ]
                    },
                    "finish_reason": "tool_calls",
                }
            ]
        }
    )
    anthropic = message_response(
        {
            "content": [
                {"type": "tool_use", "id": "toolu 1", "name": "echo", "input": {}},
                {"type": "tool_use", "id": "toolu 1", "name": "echo", "input": {}},
            ],
            "stop_reason": "tool_use",
        }
    )
    for response in (openai, anthropic):
        ids = [c.id for c in response.tool_calls]
        assert len(set(ids)) == 2 and all(ANTHROPIC_ID.match(i) for i in ids)


@pytest.mark.parametrize("seed", range(40))
def test_random_hostile_ids_always_come_out_unique_valid_and_agreeing(seed: int) -> None:
    """Seeded random rounds: ids from a small hostile alphabet (so they collide), some
    reused from the transcript, fragments of several calls interleaved."""
    import random

    rng = random.Random(seed)
    alphabet = ["a", "1", "_", "-", " ", '"', "\x00", "é", "/", "\n"]

    def some_id() -> str | None:
        if rng.random() < 0.1:
            return None
        return "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 3))) * rng.choice(
            [1, 1, 1, 30]
        )

    earlier = [ToolCall(id=i or "x", name="t") for i in (some_id() for _ in range(3))]
    transcript: tuple[Message, ...] = (
        UserMessage(content="go"),
        AssistantMessage(tool_calls=tuple(earlier)),
        *(ToolMessage(tool_call_id=c.id, name="t", content="ok") for c in earlier),
    )
    count = rng.randint(1, 6)
    ids = [some_id() for _ in range(count)]
    fragments = [ToolCallDelta(i, ids[i], "t", "{") for i in range(count)]
    fragments += [ToolCallDelta(i, rng.choice([None, ids[i]]), None, "}") for i in range(count)]
    rng.shuffle(fragments)
    fragments.sort(key=lambda d: d.name is None)  # each call's first fragment comes first
    stream = StreamCallIds(transcript)
    shown: dict[int, str] = {}
    for delta in fragments:
        out = stream.delta(delta)
        if out.id:  # an empty id is none (as `StreamAssembler` reads it)
            assert shown.setdefault(out.index, out.id) == out.id
    raw = tuple(ToolCall(id=i or f"fresh{n}", name="t") for n, i in enumerate(ids))
    final = stream.response(ChatResponse(message=AssistantMessage(tool_calls=raw)))
    got = [c.id for c in final.message.tool_calls]
    taken = {c.id for c in earlier}
    assert len(set(got)) == count and not set(got) & taken
    assert all(is_valid_call_id(i) for i in got)
    assert all(got[i] == shown[i] for i in shown)
    called = unique_response(ChatResponse(message=AssistantMessage(tool_calls=raw)), transcript)
    again = [c.id for c in called.message.tool_calls]
    assert len(set(again)) == count and not set(again) & taken
    assert all(is_valid_call_id(i) for i in again)
