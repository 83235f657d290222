"""ToolRetryAdvisor: retries failing idempotent/read-only calls; the model sees one result."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from advisorchain import (
    Chain,
    ChatResponse,
    Tool,
    ToolCall,
    ToolCallingAdvisor,
    ToolExecutionError,
    ToolInvocation,
    ToolMessage,
    ToolResult,
    TracingAdvisor,
    tool,
)
from advisorchain.advisors import ExponentialBackoff, ToolRetryAdvisor
from advisorchain.core.context import ToolContext
from advisorchain.providers import ScriptedChatModel

from path_support import answer


def call(tool_name: str, id: str = "c1", **arguments: Any) -> ToolCall:
    return ToolCall.from_arguments(tool_name, arguments, id=id)


class Flaky:
    """Tools that fail `failures` times with `error`, then answer."""

    def __init__(self, failures: int, error: Exception | None = None) -> None:
        self.failures = failures
        self.error = error or ConnectionError("reset by peer")
        self.attempts = 0

    def make(self, *, read_only: bool = False, idempotent: bool = False) -> Tool:
        flaky = self

        @tool(name="fetch", read_only=read_only, idempotent=idempotent)
        def fetch(key: str) -> str:
            """Fetch a value."""
            flaky.attempts += 1
            if flaky.attempts <= flaky.failures:
                raise flaky.error
            return f"value of {key}"

        return fetch


class Sleeps:
    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, delay: float) -> None:
        self.delays.append(delay)


def tool_messages(response: ChatResponse) -> list[ToolMessage]:
    return [m for m in response.messages if isinstance(m, ToolMessage)]


def retry(**options: Any) -> tuple[ToolRetryAdvisor, Sleeps]:
    sleeps = Sleeps()
    backoff = ExponentialBackoff(initial=0.1, factor=2, jitter=0)
    return ToolRetryAdvisor(backoff=backoff, sleep=sleeps, **options), sleeps


@pytest.mark.anyio
@pytest.mark.parametrize("path", ["call", "stream"])
@pytest.mark.parametrize("effect", ["idempotent", "read_only"])
async def test_a_flaky_idempotent_tool_is_retried_and_the_model_sees_one_result(
    path: str, effect: str, caplog: pytest.LogCaptureFixture
) -> None:
    flaky = Flaky(failures=2)
    advisor, sleeps = retry(max_attempts=3)
    model = ScriptedChatModel([call("fetch", key="k"), "done"])
    chain = Chain(
        [ToolCallingAdvisor(), advisor], model=model, tools=[flaky.make(**{effect: True})]
    )
    with caplog.at_level(logging.INFO, logger="advisorchain.retry"):
        response = await answer(path, chain, "go")
    assert flaky.attempts == 3
    [message] = tool_messages(response)
    assert message.content == "value of k" and not message.is_error
    assert sleeps.delays == [0.1, 0.2]
    records = [
        (r.levelname, getattr(r, "event", None), getattr(r, "attempt", None))
        for r in caplog.records
    ]
    assert records == [
        ("WARNING", "tool_retry", 1),
        ("WARNING", "tool_retry", 2),
        ("INFO", "tool_retry_succeeded", 3),
    ]
    assert "reset by peer" not in caplog.text  # error types only, never messages


@pytest.mark.anyio
@pytest.mark.parametrize("path", ["call", "stream"])
async def test_other_tools_are_never_retried(path: str) -> None:
    flaky = Flaky(failures=1)
    advisor, sleeps = retry()
    model = ScriptedChatModel([call("fetch", key="k"), "done"])
    chain = Chain([ToolCallingAdvisor(), advisor], model=model, tools=[flaky.make()])
    response = await answer(path, chain, "go")
    assert flaky.attempts == 1
    [message] = tool_messages(response)
    assert message.is_error
    assert sleeps.delays == []


@pytest.mark.anyio
async def test_retry_on_selects_the_exceptions() -> None:
    flaky = Flaky(failures=1, error=ValueError("bad input"))
    advisor, sleeps = retry(retry_on=(ConnectionError, TimeoutError))
    model = ScriptedChatModel([call("fetch", key="k"), "done"])
    chain = Chain([ToolCallingAdvisor(), advisor], model=model, tools=[flaky.make(idempotent=True)])
    response = await chain.call("go")
    assert flaky.attempts == 1
    assert tool_messages(response)[0].is_error


@pytest.mark.anyio
@pytest.mark.parametrize("path", ["call", "stream"])
async def test_after_max_attempts_the_last_error_is_the_one_result(
    path: str, caplog: pytest.LogCaptureFixture
) -> None:
    flaky = Flaky(failures=10)
    advisor, sleeps = retry(max_attempts=4)
    model = ScriptedChatModel([call("fetch", key="k"), "sorry"])
    chain = Chain([ToolCallingAdvisor(), advisor], model=model, tools=[flaky.make(read_only=True)])
    with caplog.at_level(logging.INFO, logger="advisorchain.retry"):
        response = await answer(path, chain, "go")
    assert flaky.attempts == 4
    [message] = tool_messages(response)
    assert message.is_error and "ConnectionError" in message.content
    assert sleeps.delays == [0.1, 0.2, 0.4]
    assert [getattr(r, "event", None) for r in caplog.records][-1] == "tool_retry_exhausted"


@pytest.mark.anyio
async def test_with_on_tool_error_raise_it_retries_then_raises() -> None:
    flaky = Flaky(failures=10)
    advisor, _ = retry(max_attempts=2)
    model = ScriptedChatModel([call("fetch", key="k")])
    chain = Chain(
        [ToolCallingAdvisor(on_tool_error="raise"), advisor],
        model=model,
        tools=[flaky.make(idempotent=True)],
    )
    with pytest.raises(ToolExecutionError):
        await chain.call("go")
    assert flaky.attempts == 2

    recovering = Flaky(failures=1)
    model = ScriptedChatModel([call("fetch", key="k"), "done"])
    chain = Chain(
        [ToolCallingAdvisor(on_tool_error="raise"), retry()[0]],
        model=model,
        tools=[recovering.make(idempotent=True)],
    )
    response = await chain.call("go")
    assert tool_messages(response)[0].content == "value of k"


@pytest.mark.anyio
async def test_timeouts_are_retried_and_the_result_counts_attempts() -> None:
    results = [
        ToolResult(content="timed out", outcome="timeout", error=TimeoutError()),
        ToolResult(content="fine"),
    ]

    async def next_step(invocation: ToolInvocation) -> ToolResult:
        return results.pop(0)

    fetch = Flaky(0).make(idempotent=True)
    invocation = ToolInvocation(
        tool=fetch,
        call=call("fetch", key="k"),
        arguments={"key": "k"},
        context=ToolContext(),
        request=Chain(model=ScriptedChatModel([])).request("x"),
    )
    advisor, sleeps = retry()
    result = await advisor.call_tool(invocation, next_step)
    assert result.content == "fine"
    assert result.metadata == {"attempts": 2}
    assert sleeps.delays == [0.1]


@pytest.mark.anyio
async def test_rejected_or_invalid_results_are_not_retried() -> None:
    seen = 0

    async def next_step(invocation: ToolInvocation) -> ToolResult:
        nonlocal seen
        seen += 1
        return ToolResult(content="no", outcome="rejected", error=ConnectionError())

    fetch = Flaky(0).make(idempotent=True)
    invocation = ToolInvocation(
        tool=fetch,
        call=call("fetch", key="k"),
        arguments={"key": "k"},
        context=ToolContext(),
        request=Chain(model=ScriptedChatModel([])).request("x"),
    )
    result = await retry()[0].call_tool(invocation, next_step)
    assert result.outcome == "rejected" and seen == 1


@pytest.mark.anyio
async def test_a_traced_call_carries_one_event_per_failed_attempt() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    flaky = Flaky(failures=2)
    advisor, _ = retry()
    model = ScriptedChatModel([call("fetch", key="k"), "done"])
    chain = Chain(
        [TracingAdvisor(tracer_provider=provider), ToolCallingAdvisor(), advisor],
        model=model,
        tools=[flaky.make(idempotent=True)],
    )
    await chain.call("go")
    [span] = [s for s in exporter.get_finished_spans() if s.name == "execute_tool fetch"]
    assert [e.name for e in span.events] == ["advisorchain.tool.retry"] * 2
    assert dict(span.attributes or {})["advisorchain.tool.attempts"] == 3
    assert dict(span.attributes or {})["advisorchain.tool.outcome"] == "ok"


def test_exponential_backoff_grows_caps_and_jitters() -> None:
    plain = ExponentialBackoff(initial=0.5, factor=2, maximum=3, jitter=0)
    assert [plain(n) for n in range(1, 6)] == [0.5, 1.0, 2.0, 3.0, 3.0]
    jittered = ExponentialBackoff(initial=1, factor=1, jitter=0.5)
    delays = {jittered(1) for _ in range(50)}
    assert all(0.5 <= d <= 1 for d in delays) and len(delays) > 1
    with pytest.raises(ValueError):
        ExponentialBackoff(jitter=2)
    with pytest.raises(ValueError):
        ToolRetryAdvisor(max_attempts=0)
