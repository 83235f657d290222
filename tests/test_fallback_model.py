"""FallbackModel: the next model on fallback errors, never after streamed output."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from advisorchain import (
    Chain,
    ChatRequest,
    ChatResponse,
    ResponseCompleted,
    StreamEvent,
    TextDelta,
    ToolCall,
    ToolCallingAdvisor,
    TracingAdvisor,
    tool,
)
from advisorchain.core.errors import ChainConfigurationError, StreamInterruptedError
from advisorchain.providers import (
    BadRequestError,
    FallbackModel,
    ProviderTimeoutError,
    ProviderUnavailableError,
    RateLimitError,
    ScriptedChatModel,
)
from advisorchain.providers.fallback import FALLBACK_RECORDS, FallbackRecord


class Failing:
    """A stand-in model that fails: at once, or (streaming) after `after` events."""

    provider_name = "down"

    def __init__(self, error: Exception, *, name: str = "primary", after: int = 0) -> None:
        self.error = error
        self.model_name = name
        self.after = after
        self.calls = 0

    async def call(self, request: ChatRequest) -> ChatResponse:
        self.calls += 1
        raise self.error

    async def stream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        self.calls += 1
        for i in range(self.after):
            yield TextDelta(f"part{i} ")
        raise self.error


def unavailable() -> ProviderUnavailableError:
    return ProviderUnavailableError("down", status_code=503)


async def collect(events: AsyncIterator[StreamEvent]) -> tuple[str, ChatResponse]:
    text = ""
    response = None
    async for event in events:
        if isinstance(event, TextDelta):
            text += event.text
        elif isinstance(event, ResponseCompleted):
            response = event.response
    assert response is not None
    return text, response


@pytest.mark.anyio
@pytest.mark.parametrize(
    "error",
    [
        unavailable(),
        ProviderTimeoutError("slow"),
        RateLimitError("busy", status_code=429),
        ProviderUnavailableError("bad gateway", status_code=502),
    ],
)
async def test_call_falls_back_on_the_default_errors(
    error: Exception, caplog: pytest.LogCaptureFixture
) -> None:
    primary = Failing(error)
    secondary = ScriptedChatModel(["from the secondary"], model_name="secondary")
    model = FallbackModel([primary, secondary])
    request = ChatRequest(messages=())
    with caplog.at_level(logging.INFO, logger="advisorchain.fallback"):
        response = await model.call(request)
    assert response.text == "from the secondary"
    assert response.model == "secondary"
    assert request.context[FALLBACK_RECORDS] == [
        FallbackRecord(1, "secondary", "scripted", (type(error).__qualname__,))
    ]
    events = [
        (r.levelname, getattr(r, "event", None), getattr(r, "model", None)) for r in caplog.records
    ]
    assert events == [
        ("WARNING", "fallback", "primary"),
        ("INFO", "fallback_answer", "secondary"),
    ]


@pytest.mark.anyio
async def test_the_primary_answers_when_it_can_and_is_named() -> None:
    primary = ScriptedChatModel(["hi"], model_name="primary")
    secondary = ScriptedChatModel([], model_name="secondary")
    model = FallbackModel([primary, secondary])
    assert (model.model_name, model.provider_name) == ("primary", "scripted")
    request = ChatRequest(messages=())
    response = await model.call(request)
    assert response.model == "primary"
    assert request.context[FALLBACK_RECORDS] == [FallbackRecord(0, "primary", "scripted")]
    assert secondary.requests == []


@pytest.mark.anyio
async def test_other_errors_are_raised_without_trying_the_next_model() -> None:
    primary = Failing(BadRequestError("bad", status_code=400))
    secondary = ScriptedChatModel(["never"])
    with pytest.raises(BadRequestError):
        await FallbackModel([primary, secondary]).call(ChatRequest(messages=()))
    assert secondary.requests == []


@pytest.mark.anyio
async def test_when_every_model_fails_the_last_error_is_raised_with_a_note() -> None:
    first, second = Failing(unavailable(), name="a"), Failing(ProviderTimeoutError("t"), name="b")
    with pytest.raises(ProviderTimeoutError) as caught:
        await FallbackModel([first, second]).call(ChatRequest(messages=()))
    assert caught.value.__notes__ == ["FallbackModel: failed before: a (ProviderUnavailableError)"]
    assert (first.calls, second.calls) == (1, 1)


@pytest.mark.anyio
async def test_on_takes_types_or_a_predicate() -> None:
    secondary = ScriptedChatModel(["ok", "ok"])
    by_type = FallbackModel([Failing(KeyError("x")), secondary], on=KeyError)
    assert (await by_type.call(ChatRequest(messages=()))).text == "ok"

    def only_503(exc: BaseException) -> bool:
        return getattr(exc, "status_code", None) == 503

    by_predicate = FallbackModel([Failing(unavailable()), secondary], on=only_503)
    assert (await by_predicate.call(ChatRequest(messages=()))).text == "ok"
    with pytest.raises(RateLimitError):
        await FallbackModel([Failing(RateLimitError("r")), secondary], on=only_503).call(
            ChatRequest(messages=())
        )


def test_bad_configurations_are_refused() -> None:
    with pytest.raises(ChainConfigurationError):
        FallbackModel([])
    with pytest.raises(ChainConfigurationError):
        FallbackModel([object()])  # type: ignore[list-item]
    with pytest.raises(ChainConfigurationError):
        FallbackModel([ScriptedChatModel([])], on=(ValueError, "x"))  # type: ignore[arg-type]


@pytest.mark.anyio
async def test_stream_falls_back_before_the_first_event() -> None:
    primary = Failing(unavailable())
    secondary = ScriptedChatModel(["streamed answer"], model_name="secondary")
    request = ChatRequest(messages=())
    text, response = await collect(FallbackModel([primary, secondary]).stream(request))
    assert text == "streamed answer"
    assert response.model == "secondary"
    assert request.context[FALLBACK_RECORDS][0].position == 1


@pytest.mark.anyio
async def test_stream_never_falls_back_after_output_reached_the_caller() -> None:
    primary = Failing(unavailable(), after=1)
    secondary = ScriptedChatModel(["never"])
    received: list[StreamEvent] = []
    with pytest.raises(ProviderUnavailableError):
        async for event in FallbackModel([primary, secondary]).stream(ChatRequest(messages=())):
            received.append(event)
    assert received == [TextDelta("part0 ")]
    assert secondary.requests == []


@pytest.mark.anyio
async def test_a_stream_interrupted_after_output_is_raised_even_if_on_matches() -> None:
    primary = Failing(StreamInterruptedError("cut"), after=2)
    secondary = ScriptedChatModel(["never"])
    model = FallbackModel([primary, secondary], on=StreamInterruptedError)
    with pytest.raises(StreamInterruptedError):
        await collect(model.stream(ChatRequest(messages=())))
    assert secondary.requests == []


@tool
def add(a: int, b: int) -> int:
    """Add."""
    return a + b


def _add_call() -> ToolCall:
    return ToolCall.from_arguments("add", {"a": 1, "b": 2}, id="c1")


@pytest.mark.anyio
@pytest.mark.parametrize("path", ["call", "stream"])
async def test_in_a_traced_tool_loop_the_span_names_the_answering_model(path: str) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    primary = Failing(unavailable())
    secondary = ScriptedChatModel([_add_call(), "3"], model_name="secondary")
    chain = Chain(
        [TracingAdvisor(tracer_provider=provider), ToolCallingAdvisor()],
        model=FallbackModel([primary, secondary]),
        tools=[add],
    )
    if path == "call":
        response = await chain.call("add")
    else:
        _, response = await collect(chain.stream("add"))
    assert response.text == "3"
    assert response.model == "secondary"
    chats = [s for s in exporter.get_finished_spans() if s.name.startswith("chat")]
    assert len(chats) == 2
    for span in chats:
        attributes: dict[str, Any] = dict(span.attributes or {})
        assert attributes["advisorchain.fallback.model"] == "secondary"
        assert attributes["advisorchain.fallback.index"] == 1
        assert attributes["gen_ai.response.model"] == "secondary"
        [event] = span.events
        assert event.name == "advisorchain.fallback"
        assert dict(event.attributes or {})["error.type"] == "ProviderUnavailableError"
    assert primary.calls == 2


@pytest.mark.anyio
async def test_a_caller_reads_the_records_of_its_turn_from_the_request_it_passed() -> None:
    secondary = ScriptedChatModel([_add_call(), "3"], model_name="secondary")
    chain = Chain(
        [ToolCallingAdvisor()],
        model=FallbackModel([Failing(unavailable()), secondary]),
        tools=[add],
    )
    request = chain.request("add")
    response = await chain.call(request)
    assert response.text == "3"
    records = request.context[FALLBACK_RECORDS]
    assert [(r.position, r.model, r.failures) for r in records] == [
        (1, "secondary", ("ProviderUnavailableError",)),
        (1, "secondary", ("ProviderUnavailableError",)),
    ]
