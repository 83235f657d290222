from __future__ import annotations

import logging
import threading
from typing import Any

import anyio
import pytest
from opentelemetry import trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from advisorchain import (
    Advisor,
    Chain,
    ChatRequest,
    LoggingAdvisor,
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
from advisorchain.providers import ScriptedChatModel
from advisorchain.providers.scripted import Reply

SECRET = "sk-planted-secret-9191"
LOGGER = "advisorchain"


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
    raise ValueError(f"cannot handle {x} with {SECRET}")


@tool(timeout=0.01)
async def slow() -> str:
    """Takes too long."""
    await anyio.sleep(10)
    return "late"


def add_call(a: int = 2, b: int = 3, id: str = "call_add") -> ToolCall:
    return ToolCall.from_arguments("add", {"a": a, "b": b}, id=id)


def records(caplog: pytest.LogCaptureFixture, event: str | None = None) -> list[logging.LogRecord]:
    found = [r for r in caplog.records if r.name == LOGGER]
    if event is not None:
        found = [r for r in found if getattr(r, "event", None) == event]
    return found


def field(record: logging.LogRecord, name: str) -> Any:
    return record.__dict__[name]


def everything(caplog: pytest.LogCaptureFixture) -> str:
    """Every message and every field of every record, as one string."""
    return "\n".join(f"{r.getMessage()} {r.__dict__!r}" for r in records(caplog))


@pytest.fixture
def logs(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.INFO, logger=LOGGER)
    return caplog


@pytest.mark.anyio
async def test_outside_the_loop_logs_the_turn_each_model_call_and_each_tool_call(
    logs: pytest.LogCaptureFixture,
) -> None:
    model = ScriptedChatModel([add_call(), "5"], model_name="m-1")
    chain = Chain([LoggingAdvisor(), ToolCallingAdvisor()], model=model, tools=[add])

    response = await chain.call("2+3?", conversation_id="conv-1")

    kinds = [field(r, "event") for r in records(logs)]
    assert kinds == ["model_call", "tool_call", "model_call", "turn"]
    first, second = records(logs, "model_call")
    assert (field(first, "round"), field(second, "round")) == (1, 2)
    assert field(first, "model") == "m-1"
    assert field(first, "provider") == "scripted"
    assert field(first, "finish_reason") == "tool_calls"
    assert field(first, "tool_calls") == 1
    assert field(second, "tool_calls") == 0
    assert field(first, "input_tokens") >= 1 and field(first, "output_tokens") >= 1
    assert field(first, "stream") is False
    assert "time_to_first_chunk" not in first.__dict__
    assert field(first, "duration") >= 0
    assert first.levelno == logging.INFO
    assert first.getMessage().startswith("model call m-1 (round 1) ok in ")

    (tool_record,) = records(logs, "tool_call")
    assert field(tool_record, "tool") == "add"
    assert field(tool_record, "call_id") == "call_add"
    assert field(tool_record, "outcome") == "ok"
    assert field(tool_record, "round") == 1
    assert tool_record.getMessage().startswith("tool call add (call_add, round 1) ok in ")

    (turn,) = records(logs, "turn")
    assert field(turn, "model_calls") == 2
    assert field(turn, "tool_calls") == 1
    assert field(turn, "input_tokens") == response.usage.input_tokens
    assert field(turn, "output_tokens") == response.usage.output_tokens
    assert field(turn, "finish_reason") == "stop"
    assert field(turn, "conversation_id") == "conv-1"
    assert "2 model calls, 1 tool calls" in turn.getMessage()


@pytest.mark.anyio
async def test_inside_the_loop_logs_every_round(logs: pytest.LogCaptureFixture) -> None:
    model = ScriptedChatModel([add_call(), "5"])
    chain = Chain([ToolCallingAdvisor(), LoggingAdvisor()], model=model, tools=[add])

    await chain.call("2+3?")

    kinds = [field(r, "event") for r in records(logs)]
    assert kinds == ["model_call", "round", "tool_call", "model_call", "round"]
    assert [field(r, "model_calls") for r in records(logs, "round")] == [1, 1]
    assert [field(r, "finish_reason") for r in records(logs, "round")] == ["tool_calls", "stop"]
    assert records(logs, "turn") == []

    logs.clear()
    model = ScriptedChatModel([add_call(), "5"])
    chain = Chain([ToolCallingAdvisor(), LoggingAdvisor()], model=model, tools=[add])
    async for _ in chain.stream("2+3?"):
        pass
    kinds = [field(r, "event") for r in records(logs)]
    assert kinds == ["model_call", "round", "tool_call", "model_call", "round"]


@pytest.mark.anyio
async def test_stream_records_time_to_first_chunk(logs: pytest.LogCaptureFixture) -> None:
    model = ScriptedChatModel([add_call(), "the answer is five"])
    chain = Chain([LoggingAdvisor(), ToolCallingAdvisor()], model=model, tools=[add])

    events = [e async for e in chain.stream("2+3?")]

    assert isinstance(events[-1], ResponseCompleted)
    kinds = [field(r, "event") for r in records(logs)]
    assert kinds == ["model_call", "tool_call", "model_call", "turn"]
    for record in records(logs, "model_call") + records(logs, "turn"):
        assert isinstance(field(record, "time_to_first_chunk"), float)
        assert "first chunk after" in record.getMessage()
    assert all(field(r, "stream") is True for r in records(logs, "model_call"))
    (turn,) = records(logs, "turn")
    assert field(turn, "model_calls") == 2 and field(turn, "outcome") == "ok"


@pytest.mark.anyio
async def test_abandoned_stream_is_logged_as_closed_early(logs: pytest.LogCaptureFixture) -> None:
    model = ScriptedChatModel(["a long answer in many chunks"], chunk_size=3)
    chain = Chain([LoggingAdvisor(), ToolCallingAdvisor()], model=model)

    stream = chain.stream("talk")
    assert isinstance(await stream.__anext__(), TextDelta)
    assert records(logs) == []
    await stream.aclose()  # type: ignore[attr-defined]

    assert [field(r, "event") for r in records(logs)] == ["model_call", "turn"]
    for record in records(logs):
        assert field(record, "outcome") == "closed_early"
        assert record.levelno == logging.INFO


@pytest.mark.anyio
async def test_model_failure_is_logged_at_warning_without_its_message(
    logs: pytest.LogCaptureFixture,
) -> None:
    model = ScriptedChatModel([RuntimeError(f"upstream said {SECRET}")])
    chain = Chain([LoggingAdvisor(), ToolCallingAdvisor()], model=model)

    with pytest.raises(RuntimeError):
        await chain.call("hi")

    model_record, turn = records(logs)
    for record in (model_record, turn):
        assert record.levelno == logging.WARNING
        assert field(record, "outcome") == "error"
        assert field(record, "error_type") == "RuntimeError"
        assert record.exc_info is None
    assert SECRET not in everything(logs)


@pytest.mark.anyio
async def test_tool_outcomes(logs: pytest.LogCaptureFixture) -> None:
    calls = [
        ToolCall.from_arguments("broken", {"x": 1}, id="b"),
        ToolCall.from_arguments("slow", {}, id="s"),
        add_call(id="a"),
    ]
    model = ScriptedChatModel([calls, "sorry"])
    chain = Chain([LoggingAdvisor(), ToolCallingAdvisor()], model=model, tools=[broken, slow, add])

    await chain.call("try")

    by_id = {field(r, "call_id"): r for r in records(logs, "tool_call")}
    assert field(by_id["b"], "outcome") == "error"
    assert field(by_id["b"], "error_type") == "ValueError"
    assert field(by_id["s"], "outcome") == "timeout"
    assert field(by_id["a"], "outcome") == "ok"
    assert by_id["b"].levelno == by_id["s"].levelno == logging.WARNING
    assert by_id["a"].levelno == logging.INFO
    assert "timeout" in by_id["s"].getMessage()
    assert SECRET not in everything(logs)


class Rejecting(Advisor):
    """Stands in for a human who rejects every call."""

    async def call_tool(self, invocation: ToolInvocation, next: ToolNext) -> ToolResult:
        return ToolResult(content="Rejected by the user.", outcome="rejected")


@pytest.mark.anyio
async def test_rejected_tool_call(logs: pytest.LogCaptureFixture) -> None:
    model = ScriptedChatModel([add_call(), "ok then"])
    chain = Chain([LoggingAdvisor(), ToolCallingAdvisor(), Rejecting()], model=model, tools=[add])

    await chain.call("add")

    (record,) = records(logs, "tool_call")
    assert field(record, "outcome") == "rejected"


@pytest.mark.anyio
async def test_content_is_off_by_default(logs: pytest.LogCaptureFixture) -> None:
    model = ScriptedChatModel([add_call(40, 2), "the sum is forty-two"])
    chain = Chain([LoggingAdvisor(), ToolCallingAdvisor()], model=model, tools=[add])

    await chain.call("what is forty plus two?")

    text = everything(logs)
    assert "forty plus two" not in text
    assert "the sum is forty-two" not in text
    assert '"a": 40' not in text and '"a":40' not in text
    for record in records(logs):
        for key in ("messages", "output", "arguments", "result"):
            assert key not in record.__dict__


@pytest.mark.anyio
async def test_include_content_logs_messages_arguments_and_results_truncated(
    logs: pytest.LogCaptureFixture,
) -> None:
    long_answer = "forty-two " * 40
    model = ScriptedChatModel([add_call(40, 2), long_answer])
    chain = Chain(
        [LoggingAdvisor(include_content=True, max_content_chars=30), ToolCallingAdvisor()],
        model=model,
        tools=[add],
    )

    await chain.call("what is forty plus two?")

    first, second = records(logs, "model_call")
    assert "forty plus two" in field(first, "messages")
    assert '"tool_call"' in field(first, "output")
    assert "more chars]" in field(second, "output")
    assert long_answer.strip() not in field(second, "output")
    (tool_record,) = records(logs, "tool_call")
    assert field(tool_record, "arguments") == '{"a": 40, "b": 2}'
    assert field(tool_record, "result") == "42"
    assert "| arguments=" in tool_record.getMessage()
    (turn,) = records(logs, "turn")
    assert "forty plus two" in field(turn, "messages")


@pytest.mark.anyio
async def test_tool_context_values_are_never_logged(logs: pytest.LogCaptureFixture) -> None:
    def script(request: ChatRequest) -> Reply:
        if isinstance(request.messages[-1], ToolMessage):
            return "you are acme"
        return ToolCall.from_arguments("whoami", {})

    chain = Chain(
        [LoggingAdvisor(include_content=True), ToolCallingAdvisor()],
        model=ScriptedChatModel(script),
        tools=[whoami],
        tool_context={"tenant": "acme", "api_key": SECRET},
    )

    await chain.call("who am I?")
    async for _ in chain.stream("who am I?"):
        pass

    text = everything(logs)
    assert "tenant acme" in text  # content is logged ...
    assert SECRET not in text  # ... but never the context's values
    assert "api_key" not in text


@pytest.mark.anyio
async def test_custom_logger_and_level(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="app.llm")
    logger = logging.getLogger("app.llm")
    chain = Chain([LoggingAdvisor(logger, level=logging.DEBUG)], model=ScriptedChatModel(["hi"]))

    await chain.call("hello")

    found = [r for r in caplog.records if r.name == "app.llm"]
    assert [field(r, "event") for r in found] == ["model_call", "turn"]
    assert all(r.levelno == logging.DEBUG for r in found)


@pytest.mark.anyio
async def test_disabled_logger_logs_nothing(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.ERROR, logger=LOGGER)
    model = ScriptedChatModel([ToolCall.from_arguments("broken", {"x": 1}), "5"])
    chain = Chain([LoggingAdvisor(), ToolCallingAdvisor()], model=model, tools=[broken])

    await chain.call("2+3?")
    async for _ in Chain([LoggingAdvisor()], model=ScriptedChatModel(["x"])).stream("hi"):
        pass

    assert records(caplog) == []


@pytest.mark.anyio
async def test_failures_are_logged_when_only_warnings_are_enabled(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger=LOGGER)
    model = ScriptedChatModel([ToolCall.from_arguments("broken", {"x": 1}), "5"])
    chain = Chain([LoggingAdvisor(), ToolCallingAdvisor()], model=model, tools=[broken])

    await chain.call("2+3?")

    assert [field(r, "event") for r in records(caplog)] == ["tool_call"]


def test_repr_and_validation() -> None:
    advisor = LoggingAdvisor(include_content=True)
    assert (
        repr(advisor) == "LoggingAdvisor(logger='advisorchain', level=INFO, include_content=True)"
    )
    with pytest.raises(ValueError, match="max_content_chars"):
        LoggingAdvisor(max_content_chars=0)


@pytest.mark.anyio
async def test_behind_tracing_records_are_emitted_under_the_matching_spans(
    logs: pytest.LogCaptureFixture,
) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    under: dict[str, list[str]] = {}

    class SpanNames(logging.Filter):
        def filter(self, record: logging.LogRecord) -> bool:
            span = trace.get_current_span()
            under.setdefault(record.__dict__["event"], []).append(getattr(span, "name", "?"))
            return True

    spy = SpanNames()
    logging.getLogger(LOGGER).addFilter(spy)
    try:
        model = ScriptedChatModel([add_call(), "5", add_call(), "5"], model_name="m")
        chain = Chain(
            [TracingAdvisor(provider, MeterProvider()), LoggingAdvisor(), ToolCallingAdvisor()],
            model=model,
            tools=[add],
        )
        await chain.call("2+3?")
        async for _ in chain.stream("2+3?"):
            pass
    finally:
        logging.getLogger(LOGGER).removeFilter(spy)
        provider.shutdown()

    assert under["model_call"] == ["chat m"] * 4
    assert under["tool_call"] == ["execute_tool add"] * 2
    assert under["turn"] == ["invoke_agent"] * 2


def test_the_docs_example_prints_and_logs_what_the_page_shows(
    logs: pytest.LogCaptureFixture,
) -> None:
    import contextlib
    import io
    import re
    from pathlib import Path

    import advisorchain

    page = Path(advisorchain.__file__).resolve().parent / "docs" / "observability.md"
    section = page.read_text()
    code = re.search(r"<!-- tested: observability -->\n```python\n(.*?)```", section, re.S)
    shown = re.search(
        r"\nprints\n\n```\n(.*?)```\n\nand logs[^\n]*\n\n```\n(.*?)```", section, re.S
    )
    assert code is not None and shown is not None
    output = io.StringIO()
    with contextlib.redirect_stdout(output):
        exec(compile(code.group(1), "docs/observability.md", "exec"), {"__name__": "readme"})
    assert output.getvalue() == shown.group(1)

    def normalized(text: str) -> str:
        return re.sub(r"call_\w+|\d+\.\d{3} s", "#", text)

    logged = [r.getMessage() for r in records(logs)]
    assert [normalized(m) for m in logged] == normalized(shown.group(2)).splitlines()


# -- records are built without logger.log, and are the records logger.log builds ---------

_RECORD_ATTRIBUTES = (
    "name",
    "msg",
    "levelname",
    "levelno",
    "pathname",
    "filename",
    "module",
    "exc_info",
    "exc_text",
    "stack_info",
    "funcName",
    "thread",
    "threadName",
    "processName",
    "process",
)


class _Keep(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def _kept_logger(
    name: str, logger_class: type[logging.Logger] = logging.Logger
) -> tuple[logging.Logger, _Keep]:
    logger = logger_class(name)  # not registered with the manager: a fresh, isolated logger
    logger.setLevel(logging.INFO)
    keep = _Keep()
    logger.addHandler(keep)
    return logger, keep


async def _run(chain: Chain, path: str) -> None:
    if path == "call":
        await chain.call("2+3?")
    else:
        async for _ in chain.stream("2+3?"):
            pass


@pytest.mark.anyio
@pytest.mark.parametrize("path", ["call", "stream"])
async def test_records_are_those_logger_log_makes(path: str) -> None:
    # A subclass that only inherits runs logger.log's own code: the reference records.
    class Reference(logging.Logger):
        pass

    fast, fast_kept = _kept_logger("app.fast")
    slow, slow_kept = _kept_logger("app.fast", Reference)
    for logger in (fast, slow):
        model = ScriptedChatModel([add_call(), "5"], model_name="m-1")
        chain = Chain([LoggingAdvisor(logger), ToolCallingAdvisor()], model=model, tools=[add])
        await _run(chain, path)

    assert len(fast_kept.records) == len(slow_kept.records) == 4
    for got, expected in zip(fast_kept.records, slow_kept.records, strict=True):
        for name in _RECORD_ATTRIBUTES:
            assert getattr(got, name) == getattr(expected, name), name
        assert isinstance(got.args, tuple) and isinstance(expected.args, tuple)
        untimed = [a for a in expected.args if not isinstance(a, float)]  # durations differ
        assert [a for a in got.args if not isinstance(a, float)] == untimed
        assert got.funcName == "_emit" and got.module == "logging"
        assert got.pathname.endswith(("advisors/logging.py", "advisors\\logging.py"))
        mine = set(got.__dict__) - set(logging.LogRecord("", 0, "", 0, "", (), None).__dict__)
        timings = {"duration", "time_to_first_chunk"}
        assert {k: got.__dict__[k] for k in mine - timings} == {
            k: expected.__dict__[k] for k in mine - timings
        }
        assert got.getMessage().split(" in ")[0] == expected.getMessage().split(" in ")[0]


@pytest.mark.anyio
async def test_record_factory_and_logger_subclass_are_honoured() -> None:
    made: list[logging.LogRecord] = []
    factory = logging.getLogRecordFactory()

    def tagging(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = factory(*args, **kwargs)
        record.tag = "mine"
        made.append(record)
        return record

    logging.setLogRecordFactory(tagging)
    try:
        logger, kept = _kept_logger("app.factory")
        await Chain([LoggingAdvisor(logger)], model=ScriptedChatModel(["hi"])).call("hello")
    finally:
        logging.setLogRecordFactory(factory)
    assert [r.tag for r in kept.records] == ["mine", "mine"]  # type: ignore[attr-defined]
    assert kept.records == made

    class Stamping(logging.Logger):
        def makeRecord(self, *args: Any, **kwargs: Any) -> logging.LogRecord:
            record = super().makeRecord(*args, **kwargs)
            record.stamped = True
            return record

    logger, kept = _kept_logger("app.stamping", Stamping)
    await Chain([LoggingAdvisor(logger)], model=ScriptedChatModel(["hi"])).call("hello")
    assert [getattr(r, "stamped", False) for r in kept.records] == [True, True]


@pytest.mark.anyio
async def test_a_field_clashing_with_a_record_attribute_raises_as_logger_log_does() -> None:
    factory = logging.getLogRecordFactory()

    def with_event(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = factory(*args, **kwargs)
        record.event = "theirs"
        return record

    logging.setLogRecordFactory(with_event)
    try:
        logger, kept = _kept_logger("app.clash")
        with pytest.raises(KeyError, match="Attempt to overwrite 'event' in LogRecord"):
            await Chain([LoggingAdvisor(logger)], model=ScriptedChatModel(["hi"])).call("hello")
    finally:
        logging.setLogRecordFactory(factory)
    assert kept.records == []


@pytest.mark.anyio
async def test_without_caller_information_records_say_unknown(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(logging, "_srcfile", None)
    logger, kept = _kept_logger("app.nocaller")
    await Chain([LoggingAdvisor(logger)], model=ScriptedChatModel(["hi"])).call("hello")
    assert [(r.funcName, r.lineno) for r in kept.records] == [("(unknown function)", 0)] * 2


class _Quiet(logging.NullHandler):
    """A NullHandler subclass that does keep what it is handed."""

    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def handle(self, record: logging.LogRecord) -> bool:
        self.records.append(record)
        return True


def test_a_record_has_no_effect_only_when_every_handler_it_reaches_is_a_null_handler() -> None:
    from advisorchain.advisors.logging import _no_effect

    def logger(*handlers: logging.Handler, propagate: bool = False) -> logging.Logger:
        made = logging.Logger("app.effect")
        made.setLevel(logging.INFO)
        made.propagate = propagate
        for handler in handlers:
            made.addHandler(handler)
        return made

    assert _no_effect(logger(logging.NullHandler()), logging.INFO)
    assert not _no_effect(logger(), logging.INFO)  # no handler: logging.lastResort writes it
    assert not _no_effect(logger(logging.NullHandler(), _Keep()), logging.INFO)
    assert not _no_effect(logger(_Quiet()), logging.INFO)  # a subclass may do anything
    above = _Keep()
    above.setLevel(logging.ERROR)
    assert _no_effect(logger(logging.NullHandler(), above), logging.INFO)
    assert not _no_effect(logger(logging.NullHandler(), above), logging.ERROR)
    assert _no_effect(logger(logging.NullHandler()), logging.DEBUG)  # not enabled
    filtered = logger(logging.NullHandler())
    filtered.addFilter(lambda record: True)
    assert not _no_effect(filtered, logging.INFO)

    class Sub(logging.Logger):
        pass

    sub = Sub("app.sub")
    sub.addHandler(logging.NullHandler())
    sub.setLevel(logging.INFO)
    assert not _no_effect(sub, logging.INFO)

    parent = logger(_Keep())
    child = logger(logging.NullHandler(), propagate=True)
    child.parent = parent
    assert not _no_effect(child, logging.INFO)
    child.propagate = False
    assert _no_effect(child, logging.INFO)

    factory = logging.getLogRecordFactory()
    logging.setLogRecordFactory(lambda *a, **k: factory(*a, **k))
    try:
        assert not _no_effect(logger(logging.NullHandler()), logging.INFO)
    finally:
        logging.setLogRecordFactory(factory)


@pytest.mark.anyio
@pytest.mark.parametrize("path", ["call", "stream"])
async def test_records_nobody_would_see_are_not_made(
    path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from advisorchain.advisors import logging as logging_advisor

    made: list[int] = []
    real = logging_advisor._handle

    def counted(*args: Any) -> None:
        made.append(1)
        real(*args)

    monkeypatch.setattr(logging_advisor, "_handle", counted)
    quiet = logging.Logger("app.quiet")
    quiet.setLevel(logging.INFO)
    quiet.addHandler(logging.NullHandler())

    def chain() -> Chain:
        model = ScriptedChatModel([add_call(), "5"], model_name="m-1")
        return Chain([LoggingAdvisor(quiet), ToolCallingAdvisor()], model=model, tools=[add])

    await _run(chain(), path)
    assert made == []

    # the same logger with a filter, or a NullHandler subclass, sees every record
    seen: list[str] = []

    def noting(record: logging.LogRecord) -> bool:
        seen.append(record.__dict__["event"])
        return True

    quiet.addFilter(noting)
    await _run(chain(), path)
    assert seen == ["model_call", "tool_call", "model_call", "turn"]
    quiet.filters.clear()
    keeping = _Quiet()
    quiet.addHandler(keeping)
    await _run(chain(), path)
    assert [r.__dict__["event"] for r in keeping.records] == seen
    assert len(made) == 8


_TIMED = {"created", "msecs", "relativeCreated"}


def _same_record(got: logging.LogRecord, expected: logging.LogRecord) -> None:
    assert list(got.__dict__) == list(expected.__dict__)  # the same attributes, in order
    assert {k: v for k, v in got.__dict__.items() if k not in _TIMED} == {
        k: v for k, v in expected.__dict__.items() if k not in _TIMED
    }
    assert got.msecs == int((got.created - int(got.created)) * 1000) + 0.0
    start = logging._startTime  # type: ignore[attr-defined]
    assert got.relativeCreated == (got.created - start) * 1000
    assert got.getMessage() == expected.getMessage()


@pytest.mark.parametrize(
    "switched_off", [(), ("logThreads",), ("logMultiprocessing",), ("logProcesses",)]
)
@pytest.mark.parametrize("args", [("a", 1, 2.5), ({"x": 1},), ()])
def test_a_plain_record_is_the_record_logrecord_makes(
    switched_off: tuple[str, ...], args: tuple[Any, ...], monkeypatch: pytest.MonkeyPatch
) -> None:
    from advisorchain.advisors.logging import _PLAIN_RECORDS, _plain_record

    if not _PLAIN_RECORDS:
        pytest.skip("plain records are made on Python 3.11 only")
    for name in switched_off:
        monkeypatch.setattr(logging, name, False)
    text = "x %s %d %.1f" if len(args) == 3 else ("x %(x)s" if args else "x")
    call = ("app.plain", logging.WARNING, "/src/pkg/mod.py", 12, text, args)
    _same_record(_plain_record(*call, "fn"), logging.LogRecord(*call, None, "fn", None))
    odd = ("app.plain", 5, "weird", 0, text, args)  # no directory, no suffix, a custom level
    _same_record(_plain_record(*odd, "g"), logging.LogRecord(*odd, None, "g", None))

    seen: list[tuple[logging.LogRecord, logging.LogRecord]] = []
    thread = threading.Thread(
        target=lambda: seen.append(
            (_plain_record(*call, "fn"), logging.LogRecord(*call, None, "fn", None))
        ),
        name="a-worker",
    )
    thread.start()
    thread.join()
    _same_record(*seen[0])
    if not switched_off:
        assert seen[0][0].threadName == "a-worker"
