from __future__ import annotations

import json
import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from advisorchain import (
    Advisor,
    AssistantMessage,
    CallNext,
    Chain,
    ChainConfigurationError,
    ChatRequest,
    ChatResponse,
    ResponseCompleted,
    StreamEvent,
    StreamNext,
    SystemMessage,
    TextDelta,
    ToolCall,
    ToolCallingAdvisor,
    ToolCallStarted,
    ToolMessage,
    UserMessage,
    tool,
)
from advisorchain.core.options import ChatOptions
from advisorchain.core.parts import DocumentPart, ImagePart
from advisorchain.providers import LlamaCppChatModel
from advisorchain.providers.openai import wire_messages as openai_wire_messages


@tool
def get_order_status(order_id: str) -> str:
    """Look up the shipping status of one order by its id, e.g. A-1001."""
    return f"Order {order_id} has shipped with DHL and arrives on Tuesday."


def _text_chunk(text: str) -> dict[str, Any]:
    return {"id": "c1", "choices": [{"delta": {"content": text}, "finish_reason": None}]}


class FakeLlama:
    """Stands in for `llama_cpp.Llama`: records calls, streams scripted chunks."""

    def __init__(self, reply: str = "Hello there", *, gate: threading.Event | None = None):
        self.reply = reply
        self.gate = gate
        self.kwargs: list[dict[str, Any]] = []
        self.active = 0
        self.max_active = 0
        self.closed = 0
        self.n_tokens = 0

    def create_chat_completion(self, **kwargs: Any) -> Any:
        self.kwargs.append(kwargs)
        if kwargs.get("stream"):
            return self._chunks()
        self.n_tokens = 20
        return {
            "id": "c1",
            "choices": [{"message": {"content": self.reply}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 12, "completion_tokens": 5},
        }

    def _chunks(self) -> Iterator[dict[str, Any]]:
        self.active += 1
        self.max_active = max(self.max_active, self.active)
        try:
            yield {"id": "c1", "choices": [{"delta": {"role": "assistant"}}]}
            for i in range(0, len(self.reply), 3):
                if self.gate is not None and i == 3:
                    # Generation continues only if the event loop stays free meanwhile.
                    if not self.gate.wait(timeout=30):
                        raise AssertionError("the event loop was blocked during inference")
                yield _text_chunk(self.reply[i : i + 3])
            self.n_tokens = 10 + len(self.reply) // 3
            yield {"id": "c1", "choices": [{"delta": {}, "finish_reason": "stop"}]}
        finally:
            self.active -= 1
            self.closed += 1


def _request(*messages: Any, **options: Any) -> ChatRequest:
    chain = Chain(model=LlamaCppChatModel(llama=FakeLlama()), tools=[get_order_status])
    return chain.request(list(messages) or "hi", **options)


@pytest.mark.anyio
async def test_call_translates_the_request_and_the_response() -> None:
    fake = FakeLlama("Your order has shipped.")
    model = LlamaCppChatModel(llama=fake, model_name="fake-qwen")
    call = ToolCall.from_arguments("get_order_status", {"order_id": "A-1"}, id="call_1")
    request = _request(
        UserMessage(content="Where is A-1?"),
        AssistantMessage(tool_calls=(call,)),
        ToolMessage(tool_call_id="call_1", name="get_order_status", content="shipped"),
        temperature=0,
        max_tokens=16,
        stop="###",
        extra={"seed": 7},
    )
    response = await model.call(request)
    assert response.text == "Your order has shipped."
    assert response.usage.input_tokens == 12 and response.usage.output_tokens == 5
    assert response.model == "fake-qwen"
    sent = fake.kwargs[0]
    assert sent["messages"][1] == {
        "role": "assistant",
        "content": "",  # never null: servers and templates reject it
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "get_order_status", "arguments": {"order_id": "A-1"}},
            }
        ],
    }
    assert sent["messages"][2]["role"] == "tool"
    assert sent["tools"][0]["function"]["name"] == "get_order_status"
    assert sent["tools"][0]["function"]["parameters"]["required"] == ["order_id"]
    assert "tool_choice" not in sent
    assert (sent["temperature"], sent["max_tokens"], sent["stop"], sent["seed"]) == (
        0,
        16,
        ["###"],
        7,
    )


PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 8


@tool
def screenshot() -> list[object]:
    """A screenshot of the order page."""
    return ["the order page", ImagePart(data=PNG), DocumentPart(data=b"%PDF-1.4")]


class ToolThenText(FakeLlama):
    """Calls `screenshot` first (as a structured call), then answers."""

    def create_chat_completion(self, **kwargs: Any) -> Any:
        if self.kwargs:
            return super().create_chat_completion(**kwargs)
        self.kwargs.append(kwargs)
        function = {"name": "screenshot", "arguments": "{}"}
        call = {"id": "call_s", "type": "function", "function": function}
        if kwargs.get("stream"):
            delta = {"role": "assistant", "tool_calls": [{"index": 0, **call}]}
            return iter(
                [{"id": "c0", "choices": [{"delta": delta, "finish_reason": "tool_calls"}]}]
            )
        message = {"content": None, "tool_calls": [call]}
        return {"id": "c0", "choices": [{"message": message, "finish_reason": "tool_calls"}]}


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["call", "stream"])
async def test_media_in_tool_results_become_the_same_stand_ins_as_openai_omit(mode: str) -> None:
    fake = ToolThenText("It shows the order.")
    chain = Chain([ToolCallingAdvisor()], model=LlamaCppChatModel(llama=fake), tools=[screenshot])
    if mode == "call":
        response = await chain.call("Show me the order page")
    else:
        events = [e async for e in chain.stream("Show me the order page")]
        assert isinstance(events[-1], ResponseCompleted)
        response = events[-1].response
    assert response.text == "It shows the order."
    result = response.messages[1]
    assert isinstance(result, ToolMessage) and len(result.parts) == 3  # kept in the transcript
    sent = fake.kwargs[1]["messages"][-1]
    assert sent["role"] == "tool"
    assert sent["content"] == (
        "the order page\n"
        "[image 1 (image/png): not shown: tool results take text only here]\n"
        "[document 1 (application/pdf): not shown: tool results take text only here]"
    )
    (omitted,) = [m for m in openai_wire_messages([result], tool_media="omit")]
    assert sent["content"] == omitted["content"]  # the OpenAI provider's words, exactly


@pytest.mark.anyio
async def test_tool_choice_mapping() -> None:
    fake = FakeLlama()
    model = LlamaCppChatModel(llama=fake)
    await model.call(_request(tool_choice="get_order_status"))
    await model.call(_request(tool_choice="required"))  # one tool attached: named
    await model.call(_request(tool_choice="none"))
    named = {"type": "function", "function": {"name": "get_order_status"}}
    assert fake.kwargs[0]["tool_choice"] == named
    assert fake.kwargs[1]["tool_choice"] == named
    # "none" keeps the definitions (the KV-cache prefix stays valid) and stops at a call
    assert fake.kwargs[2]["tools"][0]["function"]["name"] == "get_order_status"
    assert "tool_choice" not in fake.kwargs[2]
    assert fake.kwargs[2]["stop"] == ["<tool_call>"]
    await model.call(_request(tool_choice="none", stop="###"))
    assert fake.kwargs[3]["stop"] == ["###", "<tool_call>"]
    dropping = LlamaCppChatModel(llama=fake, tools_when_none="drop")
    await dropping.call(_request(tool_choice="none"))
    assert "tools" not in fake.kwargs[4] and "stop" not in fake.kwargs[4]
    with pytest.raises(ChainConfigurationError, match="not attached"):
        await model.call(_request(tool_choice="cancel_order"))
    with pytest.raises(ValueError, match="tools_when_none"):
        LlamaCppChatModel(llama=fake, tools_when_none="omit")  # type: ignore[arg-type]


@pytest.mark.anyio
async def test_call_parses_a_tool_call_written_as_text() -> None:
    text = '<tool_call>\n{"name": "get_order_status", "arguments": {"order_id": "A-7"}}\n'
    model = LlamaCppChatModel(llama=FakeLlama(text + "</tool_call>"))
    response = await model.call(_request())
    assert response.finish_reason == "tool_calls"
    assert response.message.content is None
    assert [(c.name, json.loads(c.arguments)) for c in response.tool_calls] == [
        ("get_order_status", {"order_id": "A-7"})
    ]
    raw = LlamaCppChatModel(llama=FakeLlama(text), text_tool_calls=False)
    assert (await raw.call(_request())).tool_calls == ()


@pytest.mark.anyio
async def test_stream_hides_tool_call_text_and_counts_usage() -> None:
    text = 'Checking.<tool_call>{"name": "get_order_status", "arguments": {"order_id": "A-7"}}'
    fake = FakeLlama(text + "</tool_call>")
    model = LlamaCppChatModel(llama=fake)
    events = [e async for e in model.stream(_request())]
    shown = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert shown == "Checking."
    final = events[-1]
    assert isinstance(final, ResponseCompleted)
    assert final.response.finish_reason == "tool_calls"
    assert final.response.tool_calls[0].name == "get_order_status"
    assert final.response.usage.output_tokens > 0
    assert fake.closed == 1


@pytest.mark.anyio
async def test_structured_streamed_tool_call_with_repeated_id_and_name() -> None:
    fake = FakeLlama()

    def chunks() -> Iterator[dict[str, Any]]:
        for part in ('{"order', '_id": ', '"A-9"}'):
            call: dict[str, Any] = {
                "index": 0,
                "id": "call_x",
                "function": {"name": "get_order_status"},
            }
            call["function"]["arguments"] = part
            yield {"id": "c", "choices": [{"delta": {"tool_calls": [call]}}]}
        yield {"id": "c", "choices": [{"delta": {}, "finish_reason": "tool_calls"}]}

    fake._chunks = chunks  # type: ignore[method-assign]
    model = LlamaCppChatModel(llama=fake)
    events = [e async for e in model.stream(_request(tool_choice="get_order_status"))]
    final = events[-1]
    assert isinstance(final, ResponseCompleted)
    (call,) = final.response.tool_calls
    assert (call.id, call.name, json.loads(call.arguments)) == (
        "call_x",
        "get_order_status",
        {"order_id": "A-9"},
    )


@pytest.mark.anyio
async def test_streaming_does_not_block_the_event_loop() -> None:
    gate = threading.Event()
    model = LlamaCppChatModel(llama=FakeLlama("abcdefghij", gate=gate))
    text: list[str] = []
    first_chunk = anyio.Event()

    async def consume() -> None:
        async for event in model.stream(_request()):
            if isinstance(event, TextDelta):
                text.append(event.text)
                first_chunk.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(consume)
        await first_chunk.wait()  # the worker thread now waits for this task to run
        gate.set()
    assert "".join(text) == "abcdefghij"


@pytest.mark.anyio
async def test_one_inference_at_a_time() -> None:
    fake = FakeLlama("a longer reply, streamed in many chunks")
    model = LlamaCppChatModel(llama=fake)
    results: list[str] = []

    async def consume() -> None:
        events = [e async for e in model.stream(_request())]
        assert isinstance(events[-1], ResponseCompleted)
        results.append(events[-1].response.text)

    async with anyio.create_task_group() as tg:
        for _ in range(3):
            tg.start_soon(consume)
        tg.start_soon(model.call, _request())
    assert fake.max_active == 1
    assert len(results) == 3


@pytest.mark.anyio
async def test_closing_a_stream_early_stops_generation_and_frees_the_model() -> None:
    fake = FakeLlama("a reply that is never read to the end")
    model = LlamaCppChatModel(llama=fake)
    stream = model.stream(_request())
    async for event in stream:
        if isinstance(event, TextDelta):
            break
    await stream.aclose()  # type: ignore[attr-defined]
    assert fake.closed == 1 and fake.active == 0
    assert (await model.call(_request())).text  # the lock was released


@pytest.mark.anyio
async def test_timings_come_from_llama_cpp_counters(monkeypatch: pytest.MonkeyPatch) -> None:
    llama_cpp = pytest.importorskip("llama_cpp")
    counters = {"t_p_eval_ms": 0.0, "t_eval_ms": 0.0, "n_p_eval": 0, "n_eval": 0}

    class CountingLlama(FakeLlama):
        _ctx = type("Ctx", (), {"ctx": object()})()

        def create_chat_completion(self, **kwargs: Any) -> Any:
            # 12 prompt tokens, 9 of them already cached: 3 evaluated in 30 ms; 5 generated
            counters["n_p_eval"] += 3
            counters["t_p_eval_ms"] += 30.0
            counters["n_eval"] += 5
            counters["t_eval_ms"] += 100.0
            return super().create_chat_completion(**kwargs)

    monkeypatch.setattr(
        llama_cpp, "llama_perf_context", lambda ctx: type("Perf", (), dict(counters))()
    )
    model = LlamaCppChatModel(llama=CountingLlama())
    response = await model.call(_request())
    timings = model.last_timings
    assert timings is not None
    assert (timings.prompt_tokens, timings.prompt_tokens_evaluated, timings.reused_tokens) == (
        12,
        3,
        9,
    )
    assert timings.generated_tokens == 5
    assert timings.floor_seconds == pytest.approx(0.13)
    assert response.usage.cached_tokens == 9
    async for event in model.stream(_request()):
        if isinstance(event, ResponseCompleted):
            assert model.last_timings is not None
            assert model.last_timings.prompt_tokens_evaluated == 3
            reused = model.last_timings.reused_tokens
            assert event.response.usage.cached_tokens == reused


def test_missing_extra_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "llama_cpp", None)
    model = LlamaCppChatModel("/nonexistent.gguf")
    with pytest.raises(ImportError, match=r"'local' extra"):
        anyio.run(model.load)


# -- the real model ------------------------------------------------------------------------


class _AnswerAfterToolResults(Advisor):
    """After the first tool round, the model must answer in text (keeps the test short)."""

    async def call_model(self, request: ChatRequest, next: CallNext) -> ChatResponse:
        return await next(self._adjusted(request))

    async def stream_model(self, request: ChatRequest, next: StreamNext) -> Any:
        async for event in next(self._adjusted(request)):
            yield event

    def _adjusted(self, request: ChatRequest) -> ChatRequest:
        if any(isinstance(m, ToolMessage) for m in request.messages):
            return request.with_options(tool_choice="none")
        return request


@pytest.fixture(scope="module")
def local_model(local_model_path: Path) -> LlamaCppChatModel:
    return LlamaCppChatModel(local_model_path, n_ctx=2048)


@pytest.mark.anyio
async def test_real_model_tool_turn_through_the_text_parser(
    local_model: LlamaCppChatModel,
) -> None:
    chain = Chain(
        [ToolCallingAdvisor(), _AnswerAfterToolResults()],
        model=local_model,
        tools=[get_order_status],
    )
    events: list[StreamEvent] = []
    async for event in chain.stream(
        "Where is my order A-1001?", tool_choice="auto", temperature=0, max_tokens=48
    ):
        events.append(event)
    started = [e.call for e in events if isinstance(e, ToolCallStarted)]
    first_round = events[: next(i for i, e in enumerate(events) if isinstance(e, ToolCallStarted))]
    shown = "".join(e.text for e in first_round if isinstance(e, TextDelta))
    assert "<tool_call>" not in shown and '"arguments"' not in shown
    assert [c.name for c in started] == ["get_order_status"]
    get_order_status.validate_arguments(json.loads(started[0].arguments))
    final = events[-1]
    assert isinstance(final, ResponseCompleted)
    kinds = [type(m).__name__ for m in final.response.messages]
    assert kinds == ["AssistantMessage", "ToolMessage", "AssistantMessage"]
    assert final.response.text.strip()
    assert final.response.usage.requests == 2
    assert final.response.usage.output_tokens > 0


@pytest.mark.anyio
async def test_real_model_reuses_the_cached_prompt_prefix(local_model: LlamaCppChatModel) -> None:
    """A prompt that shares its start with the previous one is evaluated only where new."""
    system = SystemMessage(content="You are a terse assistant. " * 12)
    first = ChatRequest(
        messages=(system, UserMessage(content="Say hi.")),
        options=ChatOptions(temperature=0, max_tokens=4),
    )
    await local_model.call(first)
    # A question no earlier test asked: the kept prompt states hold only the shared start.
    novel = UserMessage(content=f"Bye {uuid.uuid4().hex[:6]}?")
    response = await local_model.call(first.with_messages((system, novel)))
    timings = local_model.last_timings
    assert timings is not None and timings.prompt_tokens > 60
    assert 0 < timings.prompt_tokens_evaluated < timings.prompt_tokens - 50
    assert response.usage.cached_tokens == timings.reused_tokens > 50
    async for event in local_model.stream(first):
        if isinstance(event, ResponseCompleted):
            streamed = local_model.last_timings
            assert streamed is not None and streamed.reused_tokens > 50
            assert event.response.usage.cached_tokens == streamed.reused_tokens
    assert timings.floor_seconds > 0


@pytest.mark.anyio
@pytest.mark.parametrize("path", ["call", "stream"])
async def test_real_model_keeps_the_prefix_across_a_side_call(
    local_model_path: Path, path: str
) -> None:
    """A retry without tools or a side call used to evict the conversation's prefix: the
    next question evaluated its whole prompt again. The kept states restore it."""
    system = SystemMessage(content="You are the order assistant of a shop. " * 12)
    options = ChatOptions(temperature=0, max_tokens=3)
    conversation = ChatRequest(messages=(system, UserMessage(content="Hi.")), options=options)
    side = ChatRequest(messages=(UserMessage(content="Summarize: ok."),), options=options)
    later = conversation.with_messages(
        (
            system,
            UserMessage(content="Hi."),
            AssistantMessage(content="Hello."),
            UserMessage(content="Bye."),
        )
    )
    evaluated: dict[int, int] = {}
    for cache in (256 << 20, 0):
        model = LlamaCppChatModel(local_model_path, n_ctx=1024, prompt_cache_bytes=cache)
        for request in (conversation, side, later):
            if path == "call":
                await model.call(request)
            else:
                async for _ in model.stream(request):
                    pass
        timings = model.last_timings
        assert timings is not None and timings.prompt_tokens > 100
        evaluated[cache] = timings.prompt_tokens_evaluated
    assert evaluated[256 << 20] < 30  # only the new turn
    assert evaluated[0] > 100  # without kept states: everything again


def test_prompt_cache_bytes_is_checked() -> None:
    with pytest.raises(ValueError, match="prompt_cache_bytes"):
        LlamaCppChatModel("x.gguf", prompt_cache_bytes=-1)
