"""`TracingAdvisor`: OpenTelemetry spans and metrics after the GenAI semantic conventions."""

from __future__ import annotations

import copy
import time
from collections.abc import AsyncIterator, Callable
from contextvars import Token
from functools import partial
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import metrics, trace
from opentelemetry.metrics import Histogram, MeterProvider, NoOpHistogram
from opentelemetry.trace import (
    INVALID_SPAN,
    NoOpTracer,
    NoOpTracerProvider,
    ProxyTracer,
    ProxyTracerProvider,
    Span,
    SpanKind,
    Status,
    StatusCode,
    Tracer,
    TracerProvider,
)

from ..core.advisor import CallNext, Placement, StreamNext, ToolNext
from ..core.events import ResponseCompleted, StreamEvent
from ..core.invocation import ToolInvocation, ToolResult
from ..core.request import ChatRequest
from ..core.response import ChatResponse
from ..core.scrub import describe_exception
from ..core.streams import closing_stream
from ..core.turn import Proceed, StreamProceed, TurnAdvisor
from ._observe import (
    ModelNames,
    arguments_json,
    error_type,
    messages_json,
    output_json,
    round_of,
    tool_messages,
    truncate,
)

SCOPE = "advisorchain"
"""The instrumentation scope name of every span and instrument."""

# Bucket boundaries the GenAI conventions advise for these two histograms.
_SECONDS_BUCKETS = tuple(0.01 * 2**i for i in range(14))  # 0.01 s .. 81.92 s
_TOKEN_BUCKETS = tuple(float(4**i) for i in range(14))  # 1 .. 67108864

# Attribute names not (or not yet) in the GenAI conventions carry this library's prefix.
ROUND = "advisorchain.round"
CLOSED_EARLY = "advisorchain.stream.closed_early"
TOOL_OUTCOME = "advisorchain.tool.outcome"
TOOL_CALLS = "advisorchain.tool_calls"
MODEL_CALLS = "advisorchain.model_calls"
_TTFC = "gen_ai.response.time_to_first_chunk"


class TracingAdvisor(TurnAdvisor):
    """Spans and metrics of each turn, model call and tool call (OpenTelemetry GenAI conventions).

    Control flow: never short-circuits, loops or changes a request or a response; every
    hook opens a span, calls `next` once under it, and ends the span, also on errors,
    cancellation, and streams closed early.

    - the turn (`around`, a `TurnAdvisor`): an `invoke_agent` span (kind INTERNAL), so the
      model-call and tool spans of one turn share a parent. Place the advisor before
      (outside) the `ToolCallingAdvisor`: inside the loop these hooks would see single
      rounds, so there it opens no turn span and model and tool spans take the caller's
      current span as parent.
    - `call_model`/`stream_model`: a `chat {model}` span (kind CLIENT) for every model
      call of every round, with request parameters, response id, model, finish reasons,
      token usage; streams also record `gen_ai.response.time_to_first_chunk`. Metrics
      `gen_ai.client.operation.duration`, `gen_ai.client.token.usage` (by
      `gen_ai.token.type`) and, when streaming, `gen_ai.client.operation.time_to_first_chunk`.
    - `call_tool`: an `execute_tool {name}` span for each tool execution.

    Failures set `error.type` (the exception's class name, or the tool call's outcome such
    as `timeout` or `rejected`) and an ERROR status. Messages, arguments, results and
    exception messages are recorded only with `capture_content=True`, each truncated to
    `max_content_chars`; `ToolContext` values are never read. `provider_name` and the
    default model name come from the chain's model unless given. Without an OpenTelemetry
    SDK the API's no-op tracer and meter make all of this nearly free.
    """

    def __init__(
        self,
        tracer_provider: TracerProvider | None = None,
        meter_provider: MeterProvider | None = None,
        capture_content: bool = False,
        *,
        provider_name: str | None = None,
        agent_name: str | None = None,
        max_content_chars: int = 4000,
    ) -> None:
        if max_content_chars < 1:
            raise ValueError("max_content_chars must be at least 1")
        self.capture_content = capture_content
        self.agent_name = agent_name
        self.max_content_chars = max_content_chars
        self._names = ModelNames(provider_name)
        self._turn_spans = True
        self._silent_key = f"advisorchain.tracing.silent.{id(self)}"
        self._tracer = trace.get_tracer(SCOPE, tracer_provider=tracer_provider)
        meter = metrics.get_meter(SCOPE, meter_provider=meter_provider)
        self._duration = meter.create_histogram(
            "gen_ai.client.operation.duration",
            unit="s",
            description="GenAI operation duration.",
            explicit_bucket_boundaries_advisory=_SECONDS_BUCKETS,
        )
        self._tokens = meter.create_histogram(
            "gen_ai.client.token.usage",
            unit="{token}",
            description="Number of input and output tokens used.",
            explicit_bucket_boundaries_advisory=_TOKEN_BUCKETS,
        )
        self._first_chunk = meter.create_histogram(
            "gen_ai.client.operation.time_to_first_chunk",
            unit="s",
            description="Time to receive the first chunk of a streamed response.",
            explicit_bucket_boundaries_advisory=_SECONDS_BUCKETS,
        )

    def __repr__(self) -> str:
        return f"TracingAdvisor(capture_content={self.capture_content})"

    def bind(self, placement: Placement) -> TracingAdvisor:
        """The link one chain runs: a copy that opens turn spans unless it sits inside the
        tool loop, with the names of that chain's model."""
        link = copy.copy(self)
        link._turn_spans = not placement.inside_tool_loop
        link._names = self._names.bound(placement.chain)
        return link

    # -- the turn ---------------------------------------------------------------------

    def applies(self, request: ChatRequest) -> bool:
        """Whether the turn gets a span: the link sits outside the tool loop and an SDK
        or a current span could see it (else the turn passes through, nothing paid)."""
        return self._turn_spans and not self._unseen(request)

    def scoped(self, request: ChatRequest) -> bool:
        """The turn's span is current while the rest of the chain runs, never while the
        caller holds an event: the stream runs in a context of its own."""
        return True

    async def around(self, request: ChatRequest, proceed: Proceed) -> ChatResponse:
        """The turn's span around the rest of the chain (current while it runs; on the
        stream path never while the caller holds an event: `scoped`)."""
        streamed = proceed if isinstance(proceed, StreamProceed) else None
        span = self._start_turn(request, stream=streamed is not None)
        start = time.perf_counter()
        token = _enter(span)
        try:
            response = await proceed(request)
        except BaseException as exc:
            self._failed(span, exc)
            raise
        else:
            self._end_turn(span, response)
            return response
        finally:
            _exit(token)
            if streamed is not None and streamed.first_event_at is not None:
                span.set_attribute(_TTFC, streamed.first_event_at - start)
            span.end()

    def _start_turn(self, request: ChatRequest, *, stream: bool = False) -> Span:
        name = f"invoke_agent {self.agent_name}" if self.agent_name else "invoke_agent"
        if _no_op(self._tracer):
            return self._tracer.start_span(name, kind=SpanKind.INTERNAL)
        attributes: dict[str, Any] = {"gen_ai.operation.name": "invoke_agent"}
        self._common(attributes, request)
        if request.conversation_id:
            attributes["gen_ai.conversation.id"] = request.conversation_id
        if self.agent_name:
            attributes["gen_ai.agent.name"] = self.agent_name
        if stream:
            attributes["gen_ai.request.stream"] = True
        if self.capture_content:
            attributes["gen_ai.input.messages"] = messages_json(
                request.messages, self.max_content_chars
            )
        return self._tracer.start_span(name, kind=SpanKind.INTERNAL, attributes=attributes)

    def _end_turn(self, span: Span, response: ChatResponse) -> None:
        if not span.is_recording():
            return
        self._response_attributes(span, response)
        span.set_attribute(MODEL_CALLS, response.usage.requests)
        span.set_attribute(TOOL_CALLS, tool_messages(response.messages))

    # -- each model call --------------------------------------------------------------

    async def call_model(self, request: ChatRequest, next: CallNext) -> ChatResponse:
        if self._unseen(request, metrics=True):
            return await next(request)
        span, metric = self._start_chat(request)
        start = time.perf_counter()
        token = _enter(span)
        try:
            response = await next(request)
        except BaseException as exc:
            self._chat_failed(span, metric, start, exc)
            raise
        else:
            self._end_chat(span, metric, start, response)
            return response
        finally:
            _exit(token)
            span.end()

    async def stream_model(
        self, request: ChatRequest, next: StreamNext
    ) -> AsyncIterator[StreamEvent]:
        if self._unseen(request, metrics=True):
            async with closing_stream(next(request)) as events:
                async for event in events:
                    yield event
            return
        span, metric = self._start_chat(request, stream=True)
        start = time.perf_counter()

        def first_chunk(elapsed: float) -> None:
            span.set_attribute(_TTFC, elapsed)
            self._first_chunk.record(elapsed, metric)

        events = _traced_stream(
            next(request),
            span,
            start,
            first_chunk=first_chunk,
            done=partial(self._end_chat, span, metric, start),
            failed=partial(self._chat_failed, span, metric, start),
        )
        async with closing_stream(events) as traced:
            async for event in traced:
                yield event

    def _start_chat(
        self, request: ChatRequest, *, stream: bool = False
    ) -> tuple[Span, dict[str, Any]]:
        metric: dict[str, Any] = {"gen_ai.operation.name": "chat"}
        self._common(metric, request)
        if _no_op(self._tracer):
            model = metric.get("gen_ai.request.model")
            name = f"chat {model}" if model else "chat"
            return self._tracer.start_span(name, kind=SpanKind.CLIENT), metric
        attributes = dict(metric)  # metrics get only the low-cardinality attributes
        if request.conversation_id:
            attributes["gen_ai.conversation.id"] = request.conversation_id
        options = request.options
        if options.temperature is not None:
            attributes["gen_ai.request.temperature"] = options.temperature
        if options.top_p is not None:
            attributes["gen_ai.request.top_p"] = options.top_p
        if options.max_tokens is not None:
            attributes["gen_ai.request.max_tokens"] = options.max_tokens
        if options.stop:
            attributes["gen_ai.request.stop_sequences"] = list(options.stop)
        if stream:
            attributes["gen_ai.request.stream"] = True
        attributes[ROUND] = round_of(request)
        if self.capture_content:
            attributes["gen_ai.input.messages"] = messages_json(
                request.messages, self.max_content_chars
            )
        model = attributes.get("gen_ai.request.model")
        name = f"chat {model}" if model else "chat"
        span = self._tracer.start_span(name, kind=SpanKind.CLIENT, attributes=attributes)
        return span, metric

    def _end_chat(
        self, span: Span, metric: dict[str, Any], start: float, response: ChatResponse
    ) -> None:
        if response.model:
            metric["gen_ai.response.model"] = response.model
        if not _no_op(self._duration):
            self._duration.record(time.perf_counter() - start, metric)
        usage = response.usage
        if (usage.input_tokens or usage.output_tokens) and not _no_op(self._tokens):
            self._tokens.record(usage.input_tokens, {**metric, "gen_ai.token.type": "input"})
            self._tokens.record(usage.output_tokens, {**metric, "gen_ai.token.type": "output"})
        if span.is_recording():
            self._response_attributes(span, response)

    def _chat_failed(
        self, span: Span, metric: dict[str, Any], start: float, exc: BaseException
    ) -> None:
        if not isinstance(exc, GeneratorExit):
            metric["error.type"] = error_type(exc)
            self._duration.record(time.perf_counter() - start, metric)
        self._failed(span, exc)

    # -- each tool call ---------------------------------------------------------------

    async def call_tool(self, invocation: ToolInvocation, next: ToolNext) -> ToolResult:
        if self._unseen(invocation.request):
            return await next(invocation)
        name = invocation.name
        if _no_op(self._tracer):
            span = self._tracer.start_span(f"execute_tool {name}", kind=SpanKind.INTERNAL)
        else:
            span = self._start_tool(invocation)
        token = _enter(span)
        try:
            result = await next(invocation)
        except BaseException as exc:
            self._failed(span, exc)
            raise
        else:
            if span.is_recording():
                self._tool_result(span, result)
            return result
        finally:
            _exit(token)
            span.end()

    def _start_tool(self, invocation: ToolInvocation) -> Span:
        name = invocation.name
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": name,
            "gen_ai.tool.call.id": invocation.call.id,
            "gen_ai.tool.type": "function",
            ROUND: round_of(invocation.request),
        }
        description = invocation.tool.description
        if description:
            attributes["gen_ai.tool.description"] = truncate(description, self.max_content_chars)
        if self.capture_content:
            attributes["gen_ai.tool.call.arguments"] = arguments_json(
                invocation.arguments, self.max_content_chars
            )
        return self._tracer.start_span(
            f"execute_tool {name}", kind=SpanKind.INTERNAL, attributes=attributes
        )

    def _tool_result(self, span: Span, result: ToolResult) -> None:
        span.set_attribute(TOOL_OUTCOME, result.outcome)
        if self.capture_content:
            span.set_attribute(
                "gen_ai.tool.call.result", truncate(result.text, self.max_content_chars)
            )
        if result.outcome == "ok":
            return
        if result.outcome == "error" and result.error is not None:
            kind = error_type(result.error)
        else:
            kind = result.outcome
        span.set_attribute("error.type", kind)
        span.set_status(Status(StatusCode.ERROR, kind))

    # -- shared -----------------------------------------------------------------------

    def _unseen(self, request: ChatRequest, *, metrics: bool = False) -> bool:
        """Whether nothing a hook does could be seen: OpenTelemetry's no-op tracer (no SDK)
        with no current span, whose span would be the invalid span (not made current,
        every call on it doing nothing), and with `metrics` the no-op histograms too.

        Whether the tracer and the histograms are no-ops is asked once per turn and kept
        in the turn's `request.context` (asking reads the global providers): a global
        provider set during a turn is used from the next turn on."""
        silent = request.context.get(self._silent_key)
        if silent is None:
            silent = request.context[self._silent_key] = (
                _no_op(self._tracer),
                _no_op(self._duration, self._tokens, self._first_chunk),
            )
        if not silent[0] or trace.get_current_span() is not INVALID_SPAN:
            return False
        return not metrics or silent[1]

    def _common(self, attributes: dict[str, Any], request: ChatRequest) -> None:
        provider = self._names.provider_name
        if provider:
            attributes["gen_ai.provider.name"] = provider
        model = request.options.model or self._names.model_name
        if model:
            attributes["gen_ai.request.model"] = model

    def _response_attributes(self, span: Span, response: ChatResponse) -> None:
        if response.id:
            span.set_attribute("gen_ai.response.id", response.id)
        if response.model:
            span.set_attribute("gen_ai.response.model", response.model)
        span.set_attribute("gen_ai.response.finish_reasons", [response.finish_reason])
        usage = response.usage
        if usage.input_tokens or usage.output_tokens:
            span.set_attribute("gen_ai.usage.input_tokens", usage.input_tokens)
            span.set_attribute("gen_ai.usage.output_tokens", usage.output_tokens)
        if usage.cached_tokens:
            span.set_attribute("gen_ai.usage.cache_read.input_tokens", usage.cached_tokens)
        if self.capture_content:
            span.set_attribute(
                "gen_ai.output.messages",
                output_json(response.message, response.finish_reason, self.max_content_chars),
            )

    def _failed(self, span: Span, exc: BaseException) -> None:
        if isinstance(exc, GeneratorExit):
            span.set_attribute(CLOSED_EARLY, True)
            return
        kind = error_type(exc)
        span.set_attribute("error.type", kind)
        if self.capture_content:
            # Exception messages can carry anything (arguments, paths): content, opt-in.
            span.set_status(Status(StatusCode.ERROR, describe_exception(exc)))
            span.record_exception(exc)
        else:
            span.set_status(Status(StatusCode.ERROR, kind))


def _no_op(*instruments: Tracer | Histogram) -> bool:
    """Whether each of `instruments` is OpenTelemetry's no-op tracer or histogram (no
    SDK): the API's own no-op classes, or its proxies before a global provider is set,
    whose spans ignore the attributes they start with and whose records go nowhere.
    Anything else (an SDK's, a subclass, a proxy once a provider is set) gets every
    attribute and every record."""
    proxies = False
    for instrument in instruments:
        kind = type(instrument)
        if kind is NoOpTracer or kind is NoOpHistogram:
            continue
        if kind is ProxyTracer:
            # the global provider's proxy: a no-op tracer while that provider is the API's
            if type(trace.get_tracer_provider()) not in _API_TRACER_PROVIDERS:
                return False
        elif kind.__module__.startswith(_API_METRICS):
            proxies = True  # the API's proxy histogram (the global meter provider's)
        else:
            return False
    # The proxies' records go nowhere while the global meter provider is the API's own (no
    # SDK set): asked once for all of them, through public names only.
    return not proxies or type(metrics.get_meter_provider()).__module__.startswith(_API_METRICS)


_API_TRACER_PROVIDERS = (ProxyTracerProvider, NoOpTracerProvider)
_API_METRICS = "opentelemetry.metrics"  # the API package's classes, not an SDK's


def _enter(span: Span) -> Token[otel_context.Context] | None:
    """Make `span` current; nothing to do for the no-op tracer's invalid spans."""
    if not span.get_span_context().is_valid:
        return None
    return otel_context.attach(trace.set_span_in_context(span))


def _exit(token: Token[otel_context.Context] | None) -> None:
    if token is not None:
        otel_context.detach(token)


def _steps(events: AsyncIterator[StreamEvent], span: Span) -> AsyncIterator[StreamEvent]:
    """`events`, pulled with `span` current (unless it is the no-op tracer's invalid span)."""
    if not span.get_span_context().is_valid:
        return events
    return _Steps(events, trace.set_span_in_context(span))


class _Steps:
    """Iterates `events` with `ctx` attached only while each next event is produced."""

    __slots__ = ("_ctx", "_events")

    def __init__(self, events: AsyncIterator[StreamEvent], ctx: otel_context.Context) -> None:
        self._events = events
        self._ctx = ctx

    def __aiter__(self) -> _Steps:
        return self

    async def __anext__(self) -> StreamEvent:
        token = otel_context.attach(self._ctx)
        try:
            return await self._events.__anext__()
        finally:
            otel_context.detach(token)


async def _traced_stream(
    upstream: AsyncIterator[StreamEvent],
    span: Span,
    start: float,
    *,
    first_chunk: Callable[[float], object],
    done: Callable[[ChatResponse], object],
    failed: Callable[[BaseException], object],
) -> AsyncIterator[StreamEvent]:
    """Pass a stream on with `span` current while the rest of the chain runs (never while
    the caller holds an event, so no context leaks out); report the first chunk's delay,
    the response, or the failure; end the span however the stream ends."""
    first = True
    completed = False
    try:
        async with closing_stream(upstream) as events:
            async for event in _steps(events, span):
                if first:
                    first = False
                    first_chunk(time.perf_counter() - start)
                if isinstance(event, ResponseCompleted):
                    completed = True
                    done(event.response)
                yield event
    except BaseException as exc:
        if not completed:
            failed(exc)
        raise
    finally:
        span.end()


__all__ = [
    "CLOSED_EARLY",
    "MODEL_CALLS",
    "ROUND",
    "SCOPE",
    "TOOL_CALLS",
    "TOOL_OUTCOME",
    "TracingAdvisor",
]
