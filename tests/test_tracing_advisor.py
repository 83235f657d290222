from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import anyio
import pytest
from opentelemetry import trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import HistogramDataPoint, InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF
from opentelemetry.trace import SpanKind, StatusCode

from advisorchain import (
    Advisor,
    Chain,
    ChatRequest,
    ChatResponse,
    ResponseCompleted,
    TextDelta,
    ToolCall,
    ToolCallingAdvisor,
    ToolContext,
    ToolInvocation,
    ToolMessage,
    ToolNext,
    ToolResult,
    TracingAdvisor,
    tool,
)
from advisorchain.core.streams import closing_stream
from advisorchain.providers import ScriptedChatModel
from advisorchain.providers.scripted import Reply

SECRET = "sk-planted-secret-4242"


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@tool
def whoami(context: ToolContext) -> str:
    """Say which tenant is calling (reads the context, never returns its secret)."""
    return f"tenant {context['tenant']} (key of {len(context['api_key'])} chars)"


@tool
def broken(x: int) -> int:
    """Always fails."""
    raise ValueError(f"cannot handle {x}")


@tool(timeout=0.01)
async def slow() -> str:
    """Takes too long."""
    await anyio.sleep(10)
    return "late"


@dataclass
class Telemetry:
    spans: InMemorySpanExporter
    metrics: InMemoryMetricReader
    tracer_provider: TracerProvider
    meter_provider: MeterProvider

    def advisor(self, **kwargs: Any) -> TracingAdvisor:
        return TracingAdvisor(self.tracer_provider, self.meter_provider, **kwargs)

    def finished(self) -> list[ReadableSpan]:
        return list(self.spans.get_finished_spans())

    def named(self, prefix: str) -> list[ReadableSpan]:
        return [s for s in self.finished() if s.name.startswith(prefix)]

    def points(self, name: str) -> list[HistogramDataPoint]:
        data = self.metrics.get_metrics_data()
        found: list[HistogramDataPoint] = []
        if data is None:
            return found
        for resource in data.resource_metrics:
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    if metric.name == name:
                        found.extend(p for p in metric.data.data_points)  # type: ignore[misc]
        return found


@pytest.fixture
def otel() -> Iterator[Telemetry]:
    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    reader = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[reader])
    yield Telemetry(exporter, reader, tracer_provider, meter_provider)
    tracer_provider.shutdown()
    meter_provider.shutdown()


def attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def parent_id(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent else None


def span_id(span: ReadableSpan) -> int:
    context = span.context
    assert context is not None
    span_id: int = context.span_id
    return span_id


def everything(spans: Sequence[ReadableSpan]) -> str:
    """All names, attribute values, event attributes and status texts, as one string."""
    parts: list[str] = []
    for s in spans:
        parts.append(s.name)
        parts.extend(f"{k}={v}" for k, v in attrs(s).items())
        for event in s.events:
            parts.extend(f"{k}={v}" for k, v in dict(event.attributes or {}).items())
        parts.append(str(s.status.description))
    return "\n".join(parts)


def add_call(a: int = 2, b: int = 3, id: str = "call_add") -> ToolCall:
    return ToolCall.from_arguments("add", {"a": a, "b": b}, id=id)


@pytest.mark.anyio
async def test_call_spans_nest_model_and_tool_spans_under_the_turn(otel: Telemetry) -> None:
    model = ScriptedChatModel([add_call(), "5"], model_name="m-1")
    chain = Chain([otel.advisor(), ToolCallingAdvisor()], model=model, tools=[add])

    response = await chain.call("2+3?", temperature=0.2, max_tokens=50)

    assert response.text == "5"
    (turn,) = otel.named("invoke_agent")
    chats = otel.named("chat")
    (tool_span,) = otel.named("execute_tool")
    assert turn.name == "invoke_agent"
    assert turn.kind is SpanKind.INTERNAL
    assert turn.parent is None
    assert [c.name for c in chats] == ["chat m-1", "chat m-1"]
    assert tool_span.name == "execute_tool add"
    for child in (*chats, tool_span):
        assert parent_id(child) == span_id(turn)
        assert child.context is not None and turn.context is not None
        assert child.context.trace_id == turn.context.trace_id
    # The rounds of the tool loop are visible: model call, tool, model call, in order.
    first, second = sorted(chats, key=lambda s: s.start_time or 0)
    assert (first.start_time or 0) < (tool_span.start_time or 0) < (second.start_time or 0)
    assert (attrs(first)["advisorchain.round"], attrs(second)["advisorchain.round"]) == (1, 2)
    assert attrs(tool_span)["advisorchain.round"] == 1

    chat = attrs(first)
    assert first.kind is SpanKind.CLIENT
    assert chat["gen_ai.operation.name"] == "chat"
    assert chat["gen_ai.provider.name"] == "scripted"
    assert chat["gen_ai.request.model"] == "m-1"
    assert chat["gen_ai.request.temperature"] == 0.2
    assert chat["gen_ai.request.max_tokens"] == 50
    assert chat["gen_ai.response.model"] == "m-1"
    assert chat["gen_ai.response.finish_reasons"] == ("tool_calls",)
    assert chat["gen_ai.usage.input_tokens"] >= 1
    assert chat["gen_ai.usage.output_tokens"] >= 1
    assert "gen_ai.request.stream" not in chat
    assert attrs(second)["gen_ai.response.finish_reasons"] == ("stop",)

    tool_attrs = attrs(tool_span)
    assert tool_span.kind is SpanKind.INTERNAL
    assert tool_attrs["gen_ai.operation.name"] == "execute_tool"
    assert tool_attrs["gen_ai.tool.name"] == "add"
    assert tool_attrs["gen_ai.tool.call.id"] == "call_add"
    assert tool_attrs["gen_ai.tool.type"] == "function"
    assert tool_attrs["gen_ai.tool.description"] == "Add two numbers."
    assert tool_attrs["advisorchain.tool.outcome"] == "ok"
    assert tool_span.status.status_code is StatusCode.UNSET

    turn_attrs = attrs(turn)
    assert turn_attrs["gen_ai.operation.name"] == "invoke_agent"
    assert turn_attrs["gen_ai.provider.name"] == "scripted"
    assert turn_attrs["gen_ai.usage.input_tokens"] == response.usage.input_tokens
    assert turn_attrs["gen_ai.usage.output_tokens"] == response.usage.output_tokens
    assert turn_attrs["advisorchain.model_calls"] == 2
    assert turn_attrs["advisorchain.tool_calls"] == 1
    assert turn_attrs["gen_ai.response.finish_reasons"] == ("stop",)


@pytest.mark.anyio
async def test_parallel_tool_calls_run_in_tasks_and_still_nest_under_the_turn(
    otel: Telemetry,
) -> None:
    model = ScriptedChatModel([[add_call(1, 2, "c1"), add_call(3, 4, "c2")], "done"])
    chain = Chain([otel.advisor(), ToolCallingAdvisor()], model=model, tools=[add])

    await chain.call("two sums", conversation_id="conv-7")

    (turn,) = otel.named("invoke_agent")
    tools = otel.named("execute_tool")
    assert sorted(attrs(s)["gen_ai.tool.call.id"] for s in tools) == ["c1", "c2"]
    assert all(parent_id(s) == span_id(turn) for s in tools)
    assert attrs(turn)["gen_ai.conversation.id"] == "conv-7"
    assert {attrs(s)["gen_ai.conversation.id"] for s in otel.named("chat")} == {"conv-7"}
    for point in otel.points("gen_ai.client.operation.duration"):
        assert "gen_ai.conversation.id" not in dict(point.attributes or {})


@pytest.mark.anyio
async def test_turn_nests_under_the_callers_span(otel: Telemetry) -> None:
    chain = Chain([otel.advisor(agent_name="Math Tutor")], model=ScriptedChatModel(["hi"]))
    tracer = otel.tracer_provider.get_tracer("app")

    with tracer.start_as_current_span("request") as outer:
        await chain.call("hello")
        assert trace.get_current_span() is outer

    (turn,) = otel.named("invoke_agent")
    assert turn.name == "invoke_agent Math Tutor"
    assert attrs(turn)["gen_ai.agent.name"] == "Math Tutor"
    assert parent_id(turn) == outer.get_span_context().span_id


@pytest.mark.anyio
async def test_stream_spans_nest_and_record_time_to_first_chunk(otel: Telemetry) -> None:
    model = ScriptedChatModel([add_call(), "the answer is five"])
    chain = Chain([otel.advisor(), ToolCallingAdvisor()], model=model, tools=[add])
    tracer = otel.tracer_provider.get_tracer("app")

    with tracer.start_as_current_span("consumer") as consumer:
        events = [e async for e in chain.stream("2+3?")]
        # While the caller holds events, the turn span is never its current span.
        assert trace.get_current_span() is consumer

    assert isinstance(events[-1], ResponseCompleted)
    (turn,) = otel.named("invoke_agent")
    chats = otel.named("chat")
    (tool_span,) = otel.named("execute_tool")
    assert len(chats) == 2
    assert all(parent_id(s) == span_id(turn) for s in (*chats, tool_span))
    assert parent_id(turn) == consumer.get_span_context().span_id
    for chat in chats:
        assert attrs(chat)["gen_ai.request.stream"] is True
        assert isinstance(attrs(chat)["gen_ai.response.time_to_first_chunk"], float)
        assert "advisorchain.stream.closed_early" not in attrs(chat)
    assert isinstance(attrs(turn)["gen_ai.response.time_to_first_chunk"], float)
    assert attrs(turn)["advisorchain.model_calls"] == 2
    (first_chunk,) = otel.points("gen_ai.client.operation.time_to_first_chunk")
    assert first_chunk.count == 2


@pytest.mark.anyio
async def test_consumer_code_between_events_does_not_run_under_the_turn_span(
    otel: Telemetry,
) -> None:
    chain = Chain([otel.advisor()], model=ScriptedChatModel(["a long enough answer"]))
    seen: list[trace.Span] = []
    async for _ in chain.stream("hi"):
        seen.append(trace.get_current_span())
    assert seen and all(not s.get_span_context().is_valid for s in seen)


@pytest.mark.anyio
async def test_abandoned_stream_still_ends_its_spans(otel: Telemetry) -> None:
    model = ScriptedChatModel(["a long answer, streamed in many small chunks"], chunk_size=3)
    chain = Chain([otel.advisor(), ToolCallingAdvisor()], model=model)

    stream = chain.stream("talk")
    first = await stream.__anext__()
    assert isinstance(first, TextDelta)
    assert otel.finished() == []  # both spans are still open
    await stream.aclose()  # type: ignore[attr-defined]

    (turn,) = otel.named("invoke_agent")
    (chat,) = otel.named("chat")
    for span in (turn, chat):
        assert span.end_time is not None
        assert attrs(span)["advisorchain.stream.closed_early"] is True
        assert span.status.status_code is StatusCode.UNSET
        assert "error.type" not in attrs(span)
    assert parent_id(chat) == span_id(turn)


@pytest.mark.anyio
async def test_stream_closed_after_its_last_event_is_not_closed_early(otel: Telemetry) -> None:
    chain = Chain([otel.advisor()], model=ScriptedChatModel(["done"]))
    async with closing_stream(chain.stream("hi")) as events:
        async for event in events:
            if isinstance(event, ResponseCompleted):
                break
    for span in otel.finished():
        assert "advisorchain.stream.closed_early" not in attrs(span)


@pytest.mark.anyio
async def test_model_error_marks_chat_and_turn_spans_without_the_message(
    otel: Telemetry,
) -> None:
    model = ScriptedChatModel([RuntimeError(f"upstream said {SECRET}")])
    chain = Chain([otel.advisor(), ToolCallingAdvisor()], model=model)

    with pytest.raises(RuntimeError):
        await chain.call("hi")

    (turn,) = otel.named("invoke_agent")
    (chat,) = otel.named("chat")
    for span in (turn, chat):
        assert attrs(span)["error.type"] == "RuntimeError"
        assert span.status.status_code is StatusCode.ERROR
        assert not span.events  # no exception event: its message is content
    assert SECRET not in everything(otel.finished())
    (duration,) = otel.points("gen_ai.client.operation.duration")
    assert dict(duration.attributes or {})["error.type"] == "RuntimeError"


@pytest.mark.anyio
async def test_model_error_message_is_recorded_only_with_capture_content(
    otel: Telemetry,
) -> None:
    model = ScriptedChatModel([RuntimeError("upstream overloaded")])
    chain = Chain([otel.advisor(capture_content=True)], model=model)

    with pytest.raises(RuntimeError):
        async for _ in chain.stream("hi"):
            pass

    (chat,) = otel.named("chat")
    assert chat.status.description == "RuntimeError: upstream overloaded"
    assert [e.name for e in chat.events] == ["exception"]


@pytest.mark.anyio
async def test_tool_failures_set_error_type(otel: Telemetry) -> None:
    calls = [
        ToolCall.from_arguments("broken", {"x": 1}, id="b"),
        ToolCall.from_arguments("slow", {}, id="s"),
    ]
    model = ScriptedChatModel([calls, "sorry"])
    chain = Chain([otel.advisor(), ToolCallingAdvisor()], model=model, tools=[broken, slow])

    await chain.call("try")

    by_id = {attrs(s)["gen_ai.tool.call.id"]: s for s in otel.named("execute_tool")}
    assert attrs(by_id["b"])["error.type"] == "ValueError"
    assert attrs(by_id["b"])["advisorchain.tool.outcome"] == "error"
    assert attrs(by_id["s"])["error.type"] == "timeout"
    for span in by_id.values():
        assert span.status.status_code is StatusCode.ERROR
    assert "cannot handle" not in everything(otel.finished())


class Rejecting(Advisor):
    """Stands in for a human who rejects every call."""

    async def call_tool(self, invocation: ToolInvocation, next: ToolNext) -> ToolResult:
        return ToolResult(content="Rejected by the user.", outcome="rejected")


@pytest.mark.anyio
async def test_rejected_tool_call_is_reported(otel: Telemetry) -> None:
    model = ScriptedChatModel([add_call(), "ok then"])
    chain = Chain([otel.advisor(), ToolCallingAdvisor(), Rejecting()], model=model, tools=[add])

    await chain.call("add")

    (span,) = otel.named("execute_tool")
    assert attrs(span)["error.type"] == "rejected"
    assert attrs(span)["advisorchain.tool.outcome"] == "rejected"


@pytest.mark.anyio
async def test_tool_exception_that_stops_the_turn_ends_the_tool_span(otel: Telemetry) -> None:
    model = ScriptedChatModel([ToolCall.from_arguments("broken", {"x": 1})])
    chain = Chain(
        [otel.advisor(), ToolCallingAdvisor(on_tool_error="raise")], model=model, tools=[broken]
    )

    with pytest.raises(Exception, match="broken"):
        await chain.call("try")

    (span,) = otel.named("execute_tool")
    assert attrs(span)["error.type"] == "ToolExecutionError"
    assert attrs(otel.named("invoke_agent")[0])["error.type"] == "ToolExecutionError"


@pytest.mark.anyio
async def test_metrics_duration_and_token_usage(otel: Telemetry) -> None:
    model = ScriptedChatModel([add_call(), "5"], model_name="m-2")
    chain = Chain([otel.advisor(), ToolCallingAdvisor()], model=model, tools=[add])

    response = await chain.call("2+3?")

    (duration,) = otel.points("gen_ai.client.operation.duration")
    assert duration.count == 2
    assert dict(duration.attributes or {}) == {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "scripted",
        "gen_ai.request.model": "m-2",
        "gen_ai.response.model": "m-2",
    }
    tokens = {
        dict(p.attributes or {})["gen_ai.token.type"]: p
        for p in otel.points("gen_ai.client.token.usage")
    }
    assert set(tokens) == {"input", "output"}
    assert tokens["input"].sum == response.usage.input_tokens
    assert tokens["output"].sum == response.usage.output_tokens
    assert tokens["input"].count == 2
    assert otel.points("gen_ai.client.operation.time_to_first_chunk") == []


@pytest.mark.anyio
async def test_content_is_off_by_default(otel: Telemetry) -> None:
    model = ScriptedChatModel([add_call(), "the sum is five"])
    chain = Chain([otel.advisor(), ToolCallingAdvisor()], model=model, tools=[add])

    await chain.call("what is two plus three?")

    text = everything(otel.finished())
    assert "two plus three" not in text
    assert "the sum is five" not in text
    assert '"a"' not in text
    for span in otel.finished():
        for key in attrs(span):
            assert key not in (
                "gen_ai.input.messages",
                "gen_ai.output.messages",
                "gen_ai.tool.call.arguments",
                "gen_ai.tool.call.result",
            )


@pytest.mark.anyio
async def test_capture_content_records_messages_arguments_and_results_truncated(
    otel: Telemetry,
) -> None:
    long_answer = "five " * 50
    model = ScriptedChatModel([add_call(), long_answer])
    chain = Chain(
        [otel.advisor(capture_content=True, max_content_chars=40), ToolCallingAdvisor()],
        model=model,
        tools=[add],
    )

    await chain.call("what is two plus three?")

    first, second = sorted(otel.named("chat"), key=lambda s: s.start_time or 0)
    assert "two plus three" in attrs(first)["gen_ai.input.messages"]
    assert '"tool_call"' in attrs(first)["gen_ai.output.messages"]
    assert '"tool_call_response"' in attrs(second)["gen_ai.input.messages"]
    output = attrs(second)["gen_ai.output.messages"]
    assert "five five" in output and "more chars]" in output
    assert long_answer.strip() not in output
    (tool_span,) = otel.named("execute_tool")
    assert attrs(tool_span)["gen_ai.tool.call.arguments"] == '{"a": 2, "b": 3}'
    assert attrs(tool_span)["gen_ai.tool.call.result"] == "5"


@pytest.mark.anyio
async def test_tool_context_values_never_reach_spans(otel: Telemetry) -> None:
    def script(request: ChatRequest) -> Reply:
        if isinstance(request.messages[-1], ToolMessage):
            return "you are acme"
        return ToolCall.from_arguments("whoami", {})

    chain = Chain(
        [otel.advisor(capture_content=True), ToolCallingAdvisor()],
        model=ScriptedChatModel(script),
        tools=[whoami],
        tool_context={"tenant": "acme", "api_key": SECRET},
    )

    async for _ in chain.stream("who am I?"):
        pass
    await chain.call("who am I?", tool_context={"api_key": SECRET})

    text = everything(otel.finished())
    assert "tenant acme" in text  # content is captured ...
    assert SECRET not in text  # ... but never the context's values
    assert "api_key" not in text


@pytest.mark.anyio
async def test_inside_the_loop_no_turn_span_is_opened(otel: Telemetry) -> None:
    model = ScriptedChatModel([add_call(), "5"])
    chain = Chain([ToolCallingAdvisor(), otel.advisor()], model=model, tools=[add])
    tracer = otel.tracer_provider.get_tracer("app")

    with tracer.start_as_current_span("app") as outer:
        await chain.call("2+3?")

    assert otel.named("invoke_agent") == []
    spans = otel.named("chat") + otel.named("execute_tool")
    assert len(spans) == 3
    assert all(parent_id(s) == outer.get_span_context().span_id for s in spans)


@pytest.mark.anyio
async def test_model_and_provider_names(otel: Telemetry) -> None:
    advisor = otel.advisor(provider_name="openai")
    chain = Chain([advisor], model=ScriptedChatModel(["a", "b"], model_name="default-model"))

    await chain.call("hi", model="gpt-x")
    await chain.call("hi")

    names = sorted(s.name for s in otel.named("chat"))
    assert names == ["chat default-model", "chat gpt-x"]
    assert {attrs(s)["gen_ai.provider.name"] for s in otel.named("chat")} == {"openai"}


@pytest.mark.anyio
async def test_an_advisor_in_two_chains_reports_each_chains_names(
    otel: Telemetry,
) -> None:
    class Other(ScriptedChatModel):
        provider_name = "other"

    advisor = otel.advisor()
    first = Chain([advisor], model=ScriptedChatModel(["a"], model_name="one"))
    second = Chain([advisor], model=Other(["b"], model_name="two"))

    await second.call("hi")
    await first.call("hi")

    chats = otel.named("chat")
    assert [s.name for s in chats] == ["chat two", "chat one"]
    assert [attrs(s)["gen_ai.provider.name"] for s in chats] == ["other", "scripted"]
    assert [attrs(s)["gen_ai.request.model"] for s in chats] == ["two", "one"]


@pytest.mark.anyio
async def test_without_an_sdk_the_advisor_is_transparent() -> None:
    model = ScriptedChatModel([add_call(), "5"])
    chain = Chain([TracingAdvisor(), ToolCallingAdvisor()], model=model, tools=[add])

    response = await chain.call("2+3?")
    events = [e async for e in Chain([TracingAdvisor()], model=ScriptedChatModel(["x"])).stream("")]

    assert response.text == "5"
    assert isinstance(events[-1], ResponseCompleted)
    assert isinstance(events[-1].response, ChatResponse)


def test_invalid_max_content_chars() -> None:
    with pytest.raises(ValueError, match="max_content_chars"):
        TracingAdvisor(max_content_chars=0)


@pytest.mark.anyio
async def test_sampled_out_spans_still_propagate_their_context() -> None:
    seen: list[trace.SpanContext] = []

    @tool
    async def probe() -> str:
        """Record the span context the tool runs under."""
        seen.append(trace.get_current_span().get_span_context())
        return "ok"

    def script(request: ChatRequest) -> Reply:
        if isinstance(request.messages[-1], ToolMessage):
            return "done"
        return ToolCall.from_arguments("probe", {})

    provider = TracerProvider(sampler=ALWAYS_OFF)
    chain = Chain(
        [TracingAdvisor(provider, MeterProvider()), ToolCallingAdvisor()],
        model=ScriptedChatModel(script),
        tools=[probe],
    )

    await chain.call("go")
    async for _ in chain.stream("go"):
        pass

    assert len(seen) == 2
    for context in seen:
        assert context.is_valid and not context.trace_flags.sampled


@pytest.mark.anyio
async def test_cancelled_turn_ends_every_span(otel: Telemetry) -> None:
    with anyio.CancelScope() as scope:

        @tool
        async def stop() -> str:
            """Cancels the caller's scope, then waits to be cancelled."""
            scope.cancel()
            await anyio.sleep(5)
            return "never"

        model = ScriptedChatModel([ToolCall.from_arguments("stop", {})])
        chain = Chain([otel.advisor(), ToolCallingAdvisor()], model=model, tools=[stop])
        await chain.call("go")

    assert scope.cancelled_caught
    (turn,) = otel.named("invoke_agent")
    (tool_span,) = otel.named("execute_tool")
    for span in (turn, tool_span):
        assert span.end_time is not None
        assert span.status.status_code is StatusCode.ERROR
        assert attrs(span)["error.type"] in ("CancelledError", "Cancelled")


def test_only_the_apis_own_no_op_tracer_and_histograms_count_as_no_op(
    otel: Telemetry, monkeypatch: pytest.MonkeyPatch
) -> None:
    from opentelemetry import metrics
    from opentelemetry.metrics import NoOpHistogram
    from opentelemetry.trace import NoOpTracer, ProxyTracer

    from advisorchain.advisors.tracing import _no_op

    if not _no_global_sdk():
        pytest.skip("a global tracer provider is set in this process")

    class Mine(NoOpTracer):
        pass

    assert _no_op(NoOpTracer())
    assert not _no_op(Mine())
    assert not _no_op(otel.tracer_provider.get_tracer("x"))
    proxy = ProxyTracer("x")
    assert _no_op(proxy)  # no global provider set: the proxy's spans are the no-op's

    assert _no_op(NoOpHistogram("h"))
    assert not _no_op(otel.meter_provider.get_meter("x").create_histogram("h"))
    histogram = metrics.get_meter("x").create_histogram("h")  # the global proxy's
    assert _no_op(histogram)

    # A global provider is set (once per process, so seen through the public getters).
    monkeypatch.setattr(trace, "get_tracer_provider", lambda: otel.tracer_provider)
    monkeypatch.setattr(metrics, "get_meter_provider", lambda: otel.meter_provider)
    assert not _no_op(proxy)
    assert not _no_op(histogram)
    assert _no_op(NoOpTracer()) and _no_op(NoOpHistogram("h"))


def _no_global_sdk() -> bool:
    return type(trace.get_tracer_provider()) is trace.ProxyTracerProvider


@pytest.mark.anyio
@pytest.mark.parametrize("path", ["call", "stream"])
async def test_without_an_sdk_no_attributes_are_built(
    path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from advisorchain.advisors import tracing

    if not _no_global_sdk():
        pytest.skip("a global tracer provider is set in this process")
    rounds: list[int] = []

    def counted(request: ChatRequest) -> int:
        rounds.append(1)
        return 1

    monkeypatch.setattr(tracing, "round_of", counted)
    chain = Chain(
        [TracingAdvisor(), ToolCallingAdvisor()],
        model=ScriptedChatModel([add_call(), "5"]),
        tools=[add],
    )
    if path == "call":
        assert (await chain.call("2+3?")).text == "5"
    else:
        last = [e async for e in chain.stream("2+3?")][-1]
        assert isinstance(last, ResponseCompleted) and last.response.text == "5"
    assert rounds == []


@pytest.mark.anyio
@pytest.mark.parametrize("path", ["call", "stream"])
async def test_without_an_sdk_the_global_provider_is_asked_once_per_turn(
    path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whether the global tracer is a no-op is asked once per turn (every hook of the turn,
    two model calls and a tool call, reads the answer), and again on the next turn."""
    if not _no_global_sdk():
        pytest.skip("a global tracer provider is set in this process")
    asked: list[int] = []
    real = trace.get_tracer_provider

    def counted() -> trace.TracerProvider:
        asked.append(1)
        return real()

    chain = Chain(
        [TracingAdvisor(), ToolCallingAdvisor()],
        model=ScriptedChatModel([add_call(), "5", add_call(), "5"]),
        tools=[add],
    )
    monkeypatch.setattr(trace, "get_tracer_provider", counted)
    for turn in (1, 2):
        if path == "call":
            assert (await chain.call("2+3?")).text == "5"
        else:
            last = [e async for e in chain.stream("2+3?")][-1]
            assert isinstance(last, ResponseCompleted) and last.response.text == "5"
        assert len(asked) == turn


@pytest.mark.anyio
@pytest.mark.parametrize("path", ["call", "stream"])
async def test_without_an_sdk_a_remote_parent_still_reaches_the_tool(path: str) -> None:
    if not _no_global_sdk():
        pytest.skip("a global tracer provider is set in this process")
    parent = trace.SpanContext(
        trace_id=0x1234, span_id=0x5678, is_remote=True, trace_flags=trace.TraceFlags(1)
    )
    seen: list[trace.SpanContext] = []

    @tool
    async def probe() -> str:
        """Record the span context the tool runs under."""
        seen.append(trace.get_current_span().get_span_context())
        return "ok"

    chain = Chain(
        [TracingAdvisor(), ToolCallingAdvisor()],
        model=ScriptedChatModel([ToolCall.from_arguments("probe", {}), "done"]),
        tools=[probe],
    )
    with trace.use_span(trace.NonRecordingSpan(parent)):
        if path == "call":
            await chain.call("go")
        else:
            async for _ in chain.stream("go"):
                pass
    assert seen == [parent]


@pytest.mark.anyio
@pytest.mark.parametrize("path", ["call", "stream"])
async def test_with_an_sdk_the_sampler_sees_every_attribute_at_start(path: str) -> None:
    from opentelemetry.sdk.trace.sampling import Decision, Sampler, SamplingResult

    class Noting(Sampler):
        def __init__(self) -> None:
            self.seen: dict[str, dict[str, Any]] = {}

        def should_sample(self, *args: Any, **kwargs: Any) -> SamplingResult:
            name = args[2] if len(args) > 2 else kwargs["name"]
            attributes = args[4] if len(args) > 4 else kwargs.get("attributes")
            self.seen[name] = dict(attributes or {})
            return SamplingResult(Decision.DROP)

        def get_description(self) -> str:
            return "noting"

    sampler = Noting()
    chain = Chain(
        [TracingAdvisor(TracerProvider(sampler=sampler), MeterProvider()), ToolCallingAdvisor()],
        model=ScriptedChatModel([add_call(), "5"], model_name="m-1"),
        tools=[add],
    )
    if path == "call":
        await chain.call("2+3?")
    else:
        async for _ in chain.stream("2+3?"):
            pass
    assert sampler.seen["invoke_agent"]["gen_ai.operation.name"] == "invoke_agent"
    chat = sampler.seen["chat m-1"]
    assert chat["gen_ai.request.model"] == "m-1" and chat["advisorchain.round"] == 2
    assert chat["gen_ai.provider.name"] == "scripted"
    tool_span = sampler.seen["execute_tool add"]
    assert tool_span["gen_ai.tool.name"] == "add" and tool_span["advisorchain.round"] == 1
    assert tool_span["gen_ai.tool.call.id"] == add_call().id


@pytest.mark.anyio
@pytest.mark.parametrize("path", ["call", "stream"])
async def test_without_an_sdk_or_a_current_span_no_span_is_started(
    path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not _no_global_sdk():
        pytest.skip("a global tracer provider is set in this process")
    started: list[str] = []
    real = trace.NoOpTracer.start_span

    def counted(self: trace.NoOpTracer, name: str, *args: Any, **kwargs: Any) -> trace.Span:
        started.append(name)
        return real(self, name, *args, **kwargs)

    monkeypatch.setattr(trace.NoOpTracer, "start_span", counted)

    async def run() -> None:
        chain = Chain(
            [TracingAdvisor(), ToolCallingAdvisor()],
            model=ScriptedChatModel([add_call(), "5"]),
            tools=[add],
        )
        if path == "call":
            assert (await chain.call("2+3?")).text == "5"
        else:
            last = [e async for e in chain.stream("2+3?")][-1]
            assert isinstance(last, ResponseCompleted) and last.response.text == "5"

    await run()
    assert started == []
    parent = trace.SpanContext(trace_id=1, span_id=2, is_remote=True)
    with trace.use_span(trace.NonRecordingSpan(parent)):
        await run()
    assert started == ["invoke_agent", "chat scripted", "execute_tool add", "chat scripted"]
