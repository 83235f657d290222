"""Evals: run a data set of cases against a chain and report what held.

A case is an input and what the turn must show: facts the answer states, tools the
model calls (by name, optionally with some arguments), strings that must appear nowhere
the model wrote (answer, intermediate text, tool-call arguments), and an optional check
of the response. `run_evals` runs the cases in parallel (at most `concurrency` at once),
each as one `chain.call`, and returns an `EvalReport`: pass rate, each case's failures,
tokens and time, and `report.table()` to print.
"""

from __future__ import annotations

import inspect
import json
import re
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias

import anyio

from .core.chain import Chain
from .core.checks import require_number
from .core.messages import AssistantMessage
from .core.prompt import Prompt
from .core.response import ChatResponse

CaseCheck: TypeAlias = Callable[[ChatResponse], "str | None | Awaitable[str | None]"]
"""A case's own check: `None` if the response is right, else what is wrong."""


@dataclass(frozen=True)
class ExpectedCall:
    """A tool call a case expects: the tool's name and, optionally, arguments the call
    must have (each given key with an equal value; other keys may be there too)."""

    name: str
    arguments: Mapping[str, Any] | None = None

    def describe(self) -> str:
        """`name` or `name(key=value, ...)`."""
        if not self.arguments:
            return self.name
        pairs = ", ".join(f"{k}={json.dumps(v)}" for k, v in self.arguments.items())
        return f"{self.name}({pairs})"


@dataclass(frozen=True)
class EvalCase:
    """One input and what its turn must show.

    - `expected_facts`: each must appear in the answer's text: a string (case and runs of
      white space ignored) or a compiled regular expression.
    - `expected_tool_calls`: each must have been called during the turn: a tool name or
      an `ExpectedCall` with arguments.
    - `forbidden`: none may appear (case ignored) in anything the model wrote during the
      turn: its answer, text between tool calls, tool-call arguments.
    - `check`: a function of the response returning `None` or what is wrong (may be
      async).
    - `tool_context`: passed to the call.
    """

    name: str
    input: Prompt
    expected_facts: Sequence[str | re.Pattern[str]] = ()
    expected_tool_calls: Sequence[str | ExpectedCall] = ()
    forbidden: Sequence[str] = ()
    check: CaseCheck | None = None
    tool_context: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        for label in ("expected_facts", "expected_tool_calls", "forbidden"):
            value = getattr(self, label)
            if isinstance(value, str):  # one string would be read as its characters
                raise TypeError(f"case {self.name!r}: {label} must be a list, not a string")


@dataclass(frozen=True)
class CaseResult:
    """How one case went: `failures` is empty when it passed."""

    case: EvalCase
    failures: tuple[str, ...]
    response: ChatResponse | None
    seconds: float
    input_tokens: int = 0
    output_tokens: int = 0
    tool_calls: tuple[str, ...] = ()
    error: BaseException | None = field(default=None, repr=False)

    @property
    def passed(self) -> bool:
        """Whether every expectation held."""
        return not self.failures


@dataclass(frozen=True)
class EvalReport:
    """The results of `run_evals`, in the cases' order."""

    results: tuple[CaseResult, ...]
    seconds: float

    @property
    def passed(self) -> int:
        """How many cases passed."""
        return sum(r.passed for r in self.results)

    @property
    def pass_rate(self) -> float:
        """The share of cases that passed (0.0 for no cases)."""
        return self.passed / len(self.results) if self.results else 0.0

    @property
    def failed(self) -> tuple[CaseResult, ...]:
        """The cases that failed."""
        return tuple(r for r in self.results if not r.passed)

    @property
    def input_tokens(self) -> int:
        """Input tokens of every case."""
        return sum(r.input_tokens for r in self.results)

    @property
    def output_tokens(self) -> int:
        """Output tokens of every case."""
        return sum(r.output_tokens for r in self.results)

    def table(self) -> str:
        """A plain-text table: one row per case (result, tokens, time, failures), then
        the totals."""
        width = max([4, *(len(r.case.name) for r in self.results)])
        rows = [f"{'case':<{width}}  result  tokens    time  failures"]
        for r in self.results:
            tokens = r.input_tokens + r.output_tokens
            verdict = "pass" if r.passed else "FAIL"
            rows.append(
                f"{r.case.name:<{width}}  {verdict:<6}  {tokens:>6}  {r.seconds:>5.2f}s  "
                + "; ".join(r.failures)
            )
        rows.append(
            f"{len(self.results)} cases, {self.passed} passed ({self.pass_rate:.0%}), "
            f"{self.input_tokens} tokens in, {self.output_tokens} out, "
            f"{self.seconds:.2f}s"
        )
        return "\n".join(row.rstrip() for row in rows) + "\n"


async def run_evals(
    chain: Chain,
    cases: Iterable[EvalCase],
    *,
    concurrency: int = 4,
    case_timeout: float | None = None,
) -> EvalReport:
    """Run each case as one `chain.call`, at most `concurrency` at once, and judge it.

    A case whose turn raises (or takes over `case_timeout` seconds) fails with the error's type
    and message as its failure; the other cases go on. Results keep the cases' order.
    """
    require_number(concurrency, "concurrency", minimum=1, integer=True)
    require_number(case_timeout, "case_timeout", positive=True, optional=True)
    listed = tuple(cases)
    names = [c.name for c in listed]
    if len(set(names)) != len(names):
        raise ValueError("eval case names must be unique")
    results: list[CaseResult | None] = [None] * len(listed)
    limiter = anyio.CapacityLimiter(concurrency)
    started = time.perf_counter()

    async def one(index: int, case: EvalCase) -> None:
        async with limiter:
            results[index] = await _run_case(chain, case, case_timeout)

    async with anyio.create_task_group() as tasks:
        for index, case in enumerate(listed):
            tasks.start_soon(one, index, case)
    done = tuple(r for r in results if r is not None)
    return EvalReport(done, time.perf_counter() - started)


async def _run_case(chain: Chain, case: EvalCase, limit: float | None) -> CaseResult:
    started = time.perf_counter()
    try:
        with anyio.fail_after(limit):
            response = await chain.call(case.input, tool_context=case.tool_context)
    except Exception as exc:
        seconds = time.perf_counter() - started
        message = str(exc)[:200] if not isinstance(exc, TimeoutError) else f"over {limit}s"
        failure = f"error: {type(exc).__name__}: {message}"
        return CaseResult(case, (failure,), None, seconds, error=exc)
    seconds = time.perf_counter() - started
    failures, called = await judge(case, response)
    return CaseResult(
        case,
        tuple(failures),
        response,
        seconds,
        input_tokens=response.usage.input_tokens,
        output_tokens=response.usage.output_tokens,
        tool_calls=called,
    )


def _normal(text: str) -> str:
    return " ".join(text.casefold().split())


async def judge(case: EvalCase, response: ChatResponse) -> tuple[list[str], tuple[str, ...]]:
    """What is wrong with `response` for `case`, and the names of the tools it called."""
    failures: list[str] = []
    answer = _normal(response.text)
    for fact in case.expected_facts:
        if isinstance(fact, re.Pattern):
            if not fact.search(response.text):
                failures.append(f"missing fact /{fact.pattern}/")
        elif _normal(fact) not in answer:
            failures.append(f"missing fact {fact!r}")
    calls = [
        call
        for message in response.messages
        if isinstance(message, AssistantMessage)
        for call in message.tool_calls
    ]
    for expected in case.expected_tool_calls:
        wanted = ExpectedCall(expected) if isinstance(expected, str) else expected
        if not any(_matches(call.name, call.arguments, wanted) for call in calls):
            failures.append(f"no call {wanted.describe()}")
    written = _normal(
        " ".join(
            [m.text for m in response.messages if isinstance(m, AssistantMessage)]
            + [call.arguments for call in calls]
        )
    )
    for text in case.forbidden:
        if _normal(text) in written:
            failures.append(f"forbidden {text!r}")
    if case.check is not None:
        try:
            verdict = case.check(response)
            if inspect.isawaitable(verdict):
                verdict = await verdict
        except Exception as exc:
            verdict = f"check raised {type(exc).__name__}: {str(exc)[:200]}"
        if verdict is not None:
            failures.append(str(verdict))
    return failures, tuple(call.name for call in calls)


def _matches(name: str, arguments: str, wanted: ExpectedCall) -> bool:
    if name != wanted.name:
        return False
    if not wanted.arguments:
        return True
    try:
        given = json.loads(arguments)
    except ValueError:
        return False
    return isinstance(given, dict) and all(
        key in given and given[key] == value for key, value in wanted.arguments.items()
    )


__all__ = [
    "CaseCheck",
    "CaseResult",
    "EvalCase",
    "EvalReport",
    "ExpectedCall",
    "judge",
    "run_evals",
]
