"""`LoggingAdvisor`: one log record per turn (or round), per model call and per tool call."""

from __future__ import annotations

import copy
import logging
import os
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable, Mapping
from types import FrameType
from typing import Any, TypeAlias

from ..core.advisor import CallNext, Placement, StreamNext, ToolNext
from ..core.checks import require_number
from ..core.events import ResponseCompleted, StreamEvent
from ..core.invocation import ToolInvocation, ToolResult
from ..core.request import ChatRequest
from ..core.response import ChatResponse
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

LOGGER_NAME = "advisorchain"
"""The logger `LoggingAdvisor` writes to unless given another."""


_StreamLog: TypeAlias = Callable[
    [ChatRequest, float, ChatResponse | None, float | None, BaseException | None], None
]


class LoggingAdvisor(TurnAdvisor):
    """Logs each turn (or round), each model call and each tool call as one record.

    Control flow: never short-circuits, loops or changes a request or a response; every
    hook times `next`, logs one record, and returns (or re-raises) what `next` gave.

    Records (`record.event` names the kind; the other fields are `extra` attributes):

    - `call`/`stream` log what this advisor wraps, so where it sits decides what it
      sees. Before (outside) the `ToolCallingAdvisor` it logs the whole turn once
      (`event="turn"`: duration, model calls, tool calls, tokens summed over rounds,
      finish reason); after (inside) it, it logs every round (`event="round"`).
    - `call_model`/`stream_model` log every model call of every round wherever the
      advisor sits (`event="model_call"`: model, provider, round, duration, input and
      output tokens, finish reason, number of tool calls, time to first chunk when
      streaming).
    - `call_tool` logs every tool execution (`event="tool_call"`: tool, call id, round,
      duration, outcome such as `ok`, `error`, `rejected`, `timeout`).

    Records go to `logger` (default: the `advisorchain` logger) at `level`; failures
    (an exception, a tool outcome other than `ok`) at `error_level` if that is higher.
    With `include_content=True` records also carry messages, answers, arguments and
    results, each truncated to `max_content_chars` (a failed tool's result is then the
    sanitized text the model read). `ToolContext` values, API keys and raw exception
    messages are never logged. When the logger is disabled even for
    `error_level`, every hook only checks `isEnabledFor` and passes through.
    """

    def __init__(
        self,
        logger: logging.Logger | None = None,
        level: int = logging.INFO,
        include_content: bool = False,
        *,
        error_level: int = logging.WARNING,
        max_content_chars: int = 2000,
        provider_name: str | None = None,
    ) -> None:
        require_number(max_content_chars, "max_content_chars", minimum=1, integer=True)
        if logger is not None and not isinstance(logger, logging.Logger):
            raise TypeError(
                f"logger must be a logging.Logger (logging.getLogger(name)), not {logger!r:.80}"
            )
        for name, value in (("level", level), ("error_level", error_level)):
            require_number(value, name, integer=True)
        self.logger = logger if logger is not None else logging.getLogger(LOGGER_NAME)
        self.level = level
        self.error_level = max(level, error_level)
        self.include_content = include_content
        self.max_content_chars = max_content_chars
        self._names = ModelNames(provider_name)
        self._scope = "turn"

    def __repr__(self) -> str:
        level = logging.getLevelName(self.level)
        return (
            f"LoggingAdvisor(logger={self.logger.name!r}, level={level}, "
            f"include_content={self.include_content})"
        )

    def bind(self, placement: Placement) -> LoggingAdvisor:
        """The link one chain runs: a copy that logs a turn, or a round when it sits inside
        the tool loop, with the names of that chain's model."""
        link = copy.copy(self)
        link._scope = "round" if placement.inside_tool_loop else "turn"
        link._names = self._names.bound(placement.chain)
        return link

    # -- the turn (or the round) ------------------------------------------------------

    async def around(self, request: ChatRequest, proceed: Proceed) -> ChatResponse:
        """Time the turn (or round) on both paths and log it once it ends."""
        if not self.logger.isEnabledFor(self.error_level):
            return await proceed(request)
        start = time.perf_counter()
        try:
            response = await proceed(request)
        except BaseException as exc:
            self._log_turn(request, start, None, _first_chunk(proceed, start), exc)
            raise
        self._log_turn(request, start, response, _first_chunk(proceed, start), None)
        return response

    def _log_turn(
        self,
        request: ChatRequest,
        start: float,
        response: ChatResponse | None,
        first: float | None,
        exc: BaseException | None,
    ) -> None:
        if self._unheard(response is None and not isinstance(exc, GeneratorExit)):
            return
        fields: dict[str, Any] = {
            "event": self._scope,
            "duration": time.perf_counter() - start,
            "conversation_id": request.conversation_id,
        }
        if first is not None:
            fields["time_to_first_chunk"] = first
        text = f"{self._scope} %s in %.3f s"
        if response is None:
            outcome = _failure(exc, fields)
            args: list[Any] = [outcome, fields["duration"]]
        else:
            usage = response.usage
            tool_calls = tool_messages(response.messages)
            fields.update(
                outcome="ok",
                model=response.model,
                model_calls=usage.requests,
                tool_calls=tool_calls,
                input_tokens=usage.input_tokens,
                output_tokens=usage.output_tokens,
                finish_reason=response.finish_reason,
            )
            text += ": %d model calls, %d tool calls, %d in / %d out tokens, finish %s"
            args = ["ok", fields["duration"], usage.requests, tool_calls]
            args += [usage.input_tokens, usage.output_tokens, response.finish_reason]
            text = self._add_first_chunk_and_content(fields, text, args, request, response, first)
        self._emit(fields, text, args, ("messages", "output"))

    def _add_first_chunk_and_content(
        self,
        fields: dict[str, Any],
        text: str,
        args: list[Any],
        request: ChatRequest,
        response: ChatResponse,
        first: float | None,
    ) -> str:
        """Add time to first chunk (streams) and, with `include_content`, the turn's
        messages and the answer; returns the extended message text."""
        if first is not None:
            text += ", first chunk after %.3f s"
            args.append(first)
        if self.include_content:
            fields["messages"] = messages_json(
                request.messages[request.last_user_index :], self.max_content_chars
            )
            fields["output"] = output_json(
                response.message, response.finish_reason, self.max_content_chars
            )
        return text

    # -- each model call --------------------------------------------------------------

    async def call_model(self, request: ChatRequest, next: CallNext) -> ChatResponse:
        if not self.logger.isEnabledFor(self.error_level):
            return await next(request)
        start = time.perf_counter()
        try:
            response = await next(request)
        except BaseException as exc:
            self._log_model(request, start, None, None, exc)
            raise
        self._log_model(request, start, response, None, None)
        return response

    def stream_model(self, request: ChatRequest, next: StreamNext) -> AsyncIterator[StreamEvent]:
        return self._observe(request, next, self._log_model)

    async def _observe(
        self, request: ChatRequest, next: StreamNext, log: _StreamLog
    ) -> AsyncIterator[StreamEvent]:
        """Pass a stream on, timing it and its first chunk; `log` it when it ends."""
        if not self.logger.isEnabledFor(self.error_level):
            async with closing_stream(next(request)) as events:
                async for event in events:
                    yield event
            return
        start = time.perf_counter()
        first: float | None = None
        response: ChatResponse | None = None
        try:
            async with closing_stream(next(request)) as events:
                async for event in events:
                    if first is None:
                        first = time.perf_counter() - start
                    if isinstance(event, ResponseCompleted):
                        response = event.response
                    yield event
        except BaseException as exc:
            if response is None:
                log(request, start, None, first, exc)
            else:
                log(request, start, response, first, None)
            raise
        log(request, start, response, first, None)

    def _log_model(
        self,
        request: ChatRequest,
        start: float,
        response: ChatResponse | None,
        first: float | None,
        exc: BaseException | None,
    ) -> None:
        if self._unheard(response is None and not isinstance(exc, GeneratorExit)):
            return
        model = (response.model if response else None) or request.options.model
        model = model or self._names.model_name
        fields: dict[str, Any] = {
            "event": "model_call",
            "model": model,
            "provider": self._names.provider_name,
            "round": round_of(request),
            "duration": time.perf_counter() - start,
            "stream": first is not None,
        }
        if first is not None:
            fields["time_to_first_chunk"] = first
        text = "model call %s (round %d) %s in %.3f s"
        if response is None:
            outcome = _failure(exc, fields)
            args: list[Any] = [model or "?", fields["round"], outcome, fields["duration"]]
        else:
            usage = response.usage
            fields.update(
                outcome="ok",
                response_id=response.id,
                input_tokens=usage.input_tokens,
                output_tokens=usage.output_tokens,
                finish_reason=response.finish_reason,
                tool_calls=len(response.tool_calls),
            )
            text += ": %d in / %d out tokens, finish %s, %d tool calls"
            args = [model or "?", fields["round"], "ok", fields["duration"]]
            args += [usage.input_tokens, usage.output_tokens, response.finish_reason]
            args.append(len(response.tool_calls))
            text = self._add_first_chunk_and_content(fields, text, args, request, response, first)
        self._emit(fields, text, args, ("messages", "output"))

    # -- each tool call ---------------------------------------------------------------

    async def call_tool(self, invocation: ToolInvocation, next: ToolNext) -> ToolResult:
        if not self.logger.isEnabledFor(self.error_level):
            return await next(invocation)
        start = time.perf_counter()
        try:
            result = await next(invocation)
        except BaseException as exc:
            self._log_tool(invocation, start, None, exc)
            raise
        self._log_tool(invocation, start, result, None)
        return result

    def _log_tool(
        self,
        invocation: ToolInvocation,
        start: float,
        result: ToolResult | None,
        exc: BaseException | None,
    ) -> None:
        if result is None:
            failed = not isinstance(exc, GeneratorExit)
        else:
            failed = result.outcome not in ("ok", "closed_early")
        if self._unheard(failed):
            return
        fields: dict[str, Any] = {
            "event": "tool_call",
            "tool": invocation.name,
            "call_id": invocation.call.id,
            "round": round_of(invocation.request),
            "duration": time.perf_counter() - start,
        }
        if result is None:
            outcome = _failure(exc, fields)
        else:
            outcome = result.outcome
            fields["outcome"] = outcome
            if result.error is not None:
                fields["error_type"] = error_type(result.error)
            if self.include_content:
                fields["result"] = truncate(result.text, self.max_content_chars)
        if self.include_content:
            fields["arguments"] = arguments_json(invocation.arguments, self.max_content_chars)
        text = "tool call %s (%s, round %d) %s in %.3f s"
        args = [invocation.name, invocation.call.id, fields["round"], outcome, fields["duration"]]
        self._emit(fields, text, args, ("arguments", "result"))

    # -- shared -----------------------------------------------------------------------

    def _unheard(self, failed: bool) -> bool:
        """Whether the record of a call that `failed` (or not) would have no effect at all,
        so that neither its fields nor the record need to be made (`_no_effect`)."""
        return _no_effect(self.logger, self.error_level if failed else self.level)

    def _emit(
        self, fields: dict[str, Any], text: str, args: list[Any], content: tuple[str, ...]
    ) -> None:
        for key in content:
            if key in fields:
                text += f" | {key}=%s"
                args.append(fields[key])
        failed = fields["outcome"] not in ("ok", "closed_early")
        level = self.error_level if failed else self.level
        logger = self.logger
        if type(logger) is not logging.Logger or not logging._srcfile or type(level) is not int:
            logger.log(level, text, *args, extra=fields)
        elif logger.isEnabledFor(level):
            _handle(logger, level, text, tuple(args), fields, sys._getframe())


def _no_effect(logger: logging.Logger, level: int) -> bool:
    """Whether `logger.log(level, ...)` would do nothing anyone can see: a plain
    `logging.Logger` without filters, the stdlib's record factory, and the logger either
    not enabled for `level` or every handler the record would reach a plain
    `logging.NullHandler` (whose `handle` does nothing). Not when no handler is found at
    all (`logging.lastResort` would write it), nor for a logger subclass, a filter, a
    custom record factory or any other handler: those see every record."""
    if (
        type(logger) is not logging.Logger
        or type(level) is not int
        or logger.filters
        or logging.getLogRecordFactory() is not logging.LogRecord
    ):
        return False
    if not logger.isEnabledFor(level):
        return True
    found = False
    current: logging.Logger | None = logger
    while current is not None:  # what Logger.callHandlers walks
        for handler in current.handlers:
            found = True
            if level >= handler.level and type(handler) is not logging.NullHandler:
                return False
        current = current.parent if current.propagate else None
    return found


def _handle(
    logger: logging.Logger,
    level: int,
    text: str,
    args: tuple[Any, ...],
    fields: dict[str, Any],
    caller: FrameType,
) -> None:
    """What `logger.log(level, text, *args, extra=fields)` called in `caller` does, for a
    plain `logging.Logger` (none of its methods overridden) while caller information is
    on (`logging._srcfile`): the same record, by the same record factory, with the same
    attributes and the caller's file, line and function, handed to `logger.handle`. It
    skips what costs most of a record and never changes: the walk up the stack for the
    caller (`findCaller`) and `makeRecord`'s check of each extra field one by one."""
    code = caller.f_code
    factory = logging.getLogRecordFactory()
    if factory is logging.LogRecord and _PLAIN_RECORDS:
        record = _plain_record(
            logger.name, level, code.co_filename, caller.f_lineno, text, args, code.co_name
        )
    else:
        record = factory(
            logger.name,
            level,
            code.co_filename,
            caller.f_lineno,
            text,
            args,
            None,
            code.co_name,
            None,
        )
    values = record.__dict__
    if "message" in fields or "asctime" in fields or not values.keys().isdisjoint(fields):
        # a field would overwrite the record's own: makeRecord raises for it, as log() would
        logger.makeRecord(
            logger.name,
            level,
            code.co_filename,
            caller.f_lineno,
            text,
            args,
            None,
            code.co_name,
            fields,
            None,
        )
    values.update(fields)
    logger.handle(record)


_PLAIN_RECORDS = sys.version_info[:2] == (3, 11)
"""Whether `_plain_record` knows this Python's `LogRecord.__init__` (3.12 added a field)."""

_FILE_PARTS: dict[str, tuple[str, str]] = {}
"""`(filename, module)` of each `pathname` a record was made for (a few source files)."""


def _plain_record(
    name: str, level: int, pathname: str, lineno: int, msg: str, args: Any, func: str
) -> logging.LogRecord:
    """`logging.LogRecord(name, level, pathname, lineno, msg, args, None, func, None)` as
    Python 3.11 builds it: the same attributes, in the same order, with the same values
    (the module-level `logging.logThreads`, `logMultiprocessing` and `logProcesses` read
    each time), written in one update, with the file name and module of `pathname` kept
    from the first record (they never change for a path)."""
    created = time.time()
    if args and len(args) == 1 and isinstance(args[0], Mapping) and args[0]:
        args = args[0]
    parts = _FILE_PARTS.get(pathname)
    if parts is None:
        filename = os.path.basename(pathname)
        parts = _FILE_PARTS[pathname] = (filename, os.path.splitext(filename)[0])
    if logging.logThreads:
        thread: int | None = threading.get_ident()
        thread_name: str | None = threading.current_thread().name
    else:
        thread = thread_name = None
    process_name: str | None = None
    if logging.logMultiprocessing:
        process_name = "MainProcess"
        mp = sys.modules.get("multiprocessing")
        if mp is not None:
            try:
                process_name = mp.current_process().name
            except Exception:  # as LogRecord: multiprocessing may not have finished loading
                pass
    record: logging.LogRecord = object.__new__(logging.LogRecord)
    record.__dict__.update(
        name=name,
        msg=msg,
        args=args,
        levelname=logging.getLevelName(level),
        levelno=level,
        pathname=pathname,
        filename=parts[0],
        module=parts[1],
        exc_info=None,
        exc_text=None,
        stack_info=None,
        lineno=lineno,
        funcName=func,
        created=created,
        msecs=int((created - int(created)) * 1000) + 0.0,
        relativeCreated=(created - logging._startTime) * 1000,  # type: ignore[attr-defined]
        thread=thread,
        threadName=thread_name,
        processName=process_name,
        process=os.getpid() if logging.logProcesses else None,
    )
    return record


def _failure(exc: BaseException | None, fields: dict[str, Any]) -> str:
    """Record why a hook's `next` did not return; the outcome word for the message."""
    if isinstance(exc, GeneratorExit):
        fields["outcome"] = "closed_early"
    else:
        fields["outcome"] = "error"
        if exc is not None:
            fields["error_type"] = error_type(exc)
    return str(fields["outcome"])


def _first_chunk(proceed: Proceed, start: float) -> float | None:
    """Seconds from `start` to the first event of a streamed turn; `None` for a call."""
    if isinstance(proceed, StreamProceed) and proceed.first_event_at is not None:
        return proceed.first_event_at - start
    return None


__all__ = ["LOGGER_NAME", "LoggingAdvisor"]
