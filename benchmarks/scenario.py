"""The one scenario every framework runs: same prompt, same script, same tools.

A turn has three rounds: the model asks for two tools in parallel (weather and time in
Paris), then for one (weather in Lyon), then answers with text. The scripted model of
each framework picks its reply from how many tool results the transcript already holds
(0, 2, 3), so every framework's model does the same small amount of work per call.

`mark()` is called by every scripted model at each call: the timestamps split a turn
into rounds. `TOOL_CALLS` counts tool executions so the runner can check that every
framework really ran three tools per turn.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any, Literal, TypeAlias

PROMPT = "What's the weather and the time in Paris? Then check the weather in Lyon."
ANSWER = "Paris: sunny, 21 C, 14:05. Lyon: sunny, 21 C."

Call: TypeAlias = tuple[str, str, dict[str, Any]]
"""(call id, tool name, arguments)."""

ROUNDS: tuple[tuple[Call, ...], ...] = (
    (
        ("call_1", "get_weather", {"city": "Paris"}),
        ("call_2", "get_time", {"city": "Paris"}),
    ),
    (("call_3", "get_weather", {"city": "Lyon"}),),
)
"""The tool calls of rounds 1 and 2; round 3 answers `ANSWER`."""

WEATHER_DOC = "Current weather in a city."
TIME_DOC = "Local time in a city."

ToolKind: TypeAlias = Literal["async", "sync", "inline"]
"""Async tools; sync tools in worker threads; sync tools run inline (advisorchain's
`run_inline=True`, a direct call in the hand-written loop; the peers have no such option)."""
Turn: TypeAlias = Callable[[], Awaitable[str]]

MARKS: list[float] = []
TOOL_CALLS = [0]


def mark() -> None:
    """Record that a model call starts now."""
    MARKS.append(time.perf_counter())


def script(tool_results: int) -> tuple[Call, ...] | str:
    """What the model answers once the transcript holds `tool_results` tool results."""
    if tool_results == 0:
        return ROUNDS[0]
    if tool_results == 2:
        return ROUNDS[1]
    if tool_results == 3:
        return ANSWER
    raise AssertionError(f"unexpected transcript: {tool_results} tool results")


def weather(city: str) -> str:
    """The trivial body of `get_weather`."""
    TOOL_CALLS[0] += 1
    return f"Sunny in {city}, 21 C"


def local_time(city: str) -> str:
    """The trivial body of `get_time`."""
    TOOL_CALLS[0] += 1
    return f"14:05 in {city}"
