"""run_evals: cases judged by facts, tool calls, forbidden strings and checks, run in
parallel within a bound; the report's table."""

from __future__ import annotations

import re

import anyio
import pytest

from advisorchain import (
    Chain,
    ChatRequest,
    ChatResponse,
    ToolCall,
    ToolCallingAdvisor,
    ToolMessage,
    tool,
)
from advisorchain.evals import EvalCase, ExpectedCall, run_evals
from advisorchain.providers import ScriptedChatModel


@tool
def order_status(order_id: str) -> str:
    """The status of an order."""
    return {"7": "shipped", "8": "processing"}.get(order_id, "unknown")


def reply(request: ChatRequest) -> str | ToolCall:
    last = request.messages[-1]
    if isinstance(last, ToolMessage):
        return f"Your order is {last.text}."
    if "order" in last.text:
        order_id = "".join(c for c in last.text if c.isdigit())
        return ToolCall.from_arguments("order_status", {"order_id": order_id})
    if "boom" in last.text:
        raise RuntimeError("the provider is down")
    return "Our password is hunter2."


def make_chain(model: ScriptedChatModel | None = None) -> Chain:
    return Chain(
        [ToolCallingAdvisor()], model=model or ScriptedChatModel(reply), tools=[order_status]
    )


CASES = [
    EvalCase(
        "shipped",
        "Where is order 7?",
        expected_facts=["  ORDER is shipped "],
        expected_tool_calls=[ExpectedCall("order_status", {"order_id": "7"})],
    ),
    EvalCase(
        "wrong-arguments",
        "Where is order 8?",
        expected_facts=[re.compile(r"shipped|delivered")],
        expected_tool_calls=[ExpectedCall("order_status", {"order_id": "7"})],
    ),
    EvalCase("leak", "hello", forbidden=["hunter2"], expected_tool_calls=["order_status"]),
    EvalCase("error", "boom", expected_facts=["anything"]),
]


@pytest.mark.anyio
async def test_each_case_is_judged_and_failures_say_what_is_wrong() -> None:
    report = await run_evals(make_chain(), CASES)
    by_name = {r.case.name: r for r in report.results}
    assert [r.case.name for r in report.results] == ["shipped", "wrong-arguments", "leak", "error"]
    assert by_name["shipped"].passed and by_name["shipped"].tool_calls == ("order_status",)
    assert by_name["wrong-arguments"].failures == (
        "missing fact /shipped|delivered/",
        'no call order_status(order_id="7")',
    )
    assert by_name["leak"].failures == ("no call order_status", "forbidden 'hunter2'")
    assert by_name["error"].failures == ("error: RuntimeError: the provider is down",)
    assert (report.passed, report.pass_rate) == (1, 0.25)
    assert report.input_tokens > 0 and by_name["shipped"].input_tokens > 0


@pytest.mark.anyio
async def test_the_table_lists_each_case_and_the_totals() -> None:
    report = await run_evals(make_chain(), CASES[:3])
    lines = report.table().splitlines()
    assert lines[0].split() == ["case", "result", "tokens", "time", "failures"]
    assert lines[1].startswith("shipped          pass")
    assert "FAIL" in lines[2] and 'no call order_status(order_id="7")' in lines[2]
    assert lines[-1].startswith("3 cases, 1 passed (33%), ")


@pytest.mark.anyio
async def test_forbidden_strings_are_found_in_tool_arguments_too() -> None:
    model = ScriptedChatModel(
        [ToolCall.from_arguments("order_status", {"order_id": "sk-secret"}), "Done."]
    )
    report = await run_evals(
        make_chain(model), [EvalCase("args", "status?", forbidden=["SK-SECRET"])]
    )
    assert report.results[0].failures == ("forbidden 'SK-SECRET'",)


@pytest.mark.anyio
async def test_a_case_check_may_be_async_and_its_errors_are_failures() -> None:
    async def short(response: ChatResponse) -> str | None:
        return None if len(response.text) < 10 else "too long"

    def broken(response: ChatResponse) -> str | None:
        raise KeyError("x")

    report = await run_evals(
        make_chain(),
        [EvalCase("short", "hello", check=short), EvalCase("broken", "hello", check=broken)],
    )
    assert report.results[0].failures == ("too long",)
    assert report.results[1].failures == ("check raised KeyError: 'x'",)


@pytest.mark.anyio
async def test_cases_run_in_parallel_within_the_bound() -> None:
    running = 0
    most = 0

    async def slow(request: ChatRequest) -> str:
        nonlocal running, most
        running += 1
        most = max(most, running)
        await anyio.sleep(0.01)
        running -= 1
        return "ok"

    class Slow(ScriptedChatModel):
        async def call(self, request: ChatRequest) -> ChatResponse:
            text = await slow(request)
            return await ScriptedChatModel([text]).call(request)

    cases = [EvalCase(f"case-{i}", "hello", expected_facts=["ok"]) for i in range(8)]
    report = await run_evals(Chain(model=Slow([])), cases, concurrency=3)
    assert report.passed == 8
    assert most == 3


@pytest.mark.anyio
async def test_a_timeout_fails_only_its_case() -> None:
    class Stuck(ScriptedChatModel):
        async def call(self, request: ChatRequest) -> ChatResponse:
            if request.messages[-1].text == "stuck":
                await anyio.sleep(10)
            return await ScriptedChatModel(["fine"]).call(request)

    report = await run_evals(
        Chain(model=Stuck([])),
        [EvalCase("stuck", "stuck"), EvalCase("fine", "hello", expected_facts=["fine"])],
        case_timeout=0.05,
    )
    assert report.results[0].failures == ("error: TimeoutError: over 0.05s",)
    assert report.results[1].passed


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(TypeError, match="must be a list, not a string"):
        EvalCase("x", "hi", forbidden="secret")
    with pytest.raises(ValueError, match="unique"):
        anyio.run(run_evals, make_chain(), [EvalCase("a", "hi"), EvalCase("a", "hi")])
    with pytest.raises(ValueError, match="at least 1"):
        anyio.run(lambda: run_evals(make_chain(), [], concurrency=0))
