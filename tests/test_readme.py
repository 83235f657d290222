"""The README's examples run and print what the README says they print."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path
from typing import Any

import anyio
import pytest

import advisorchain
from advisorchain import (
    AdvisorChainError,
    AssistantMessage,
    Chain,
    ChainConfigurationError,
    ChatResponse,
    ResponseCompleted,
    ToolCall,
    ToolCallingAdvisor,
)
from advisorchain.providers import Reply, ScriptedChatModel

README = Path(advisorchain.__file__).resolve().parent / "README.md"
WRITING_ADVISORS = README.parent / "docs" / "writing-advisors.md"


def readme_blocks() -> list[str]:
    text = README.read_text()
    return re.findall(r"<!-- tested -->\n```python\n(.*?)```", text, flags=re.S)


def test_quickstart_prints_what_the_readme_shows() -> None:
    quickstart = readme_blocks()[0]
    expected = re.search(r"\nprints\n\n```\n(.*?)```", README.read_text(), flags=re.S)
    assert expected is not None
    output = io.StringIO()
    with contextlib.redirect_stdout(output):
        exec(compile(quickstart, "README-quickstart", "exec"), {"__name__": "readme"})
    assert output.getvalue() == expected.group(1)


def test_custom_advisor_examples_work_on_both_paths() -> None:
    namespace: dict[str, Any] = {"__name__": "readme"}
    exec(compile(readme_blocks()[1], "README-advisors", "exec"), namespace)
    quickstart: dict[str, Any] = {"__name__": "readme"}
    with contextlib.redirect_stdout(io.StringIO()):
        exec(compile(readme_blocks()[0], "README-quickstart", "exec"), quickstart)
    script: list[Reply] = [
        ToolCall.from_arguments("get_delivery_date", {"order_id": "A1"}),
        "Soon.",
    ]
    model = ScriptedChatModel(script * 2)
    budget = namespace["TokenBudget"](10_000)
    chain = Chain(
        [namespace["house_style"], budget, ToolCallingAdvisor()],
        model=model,
        tools=[quickstart["get_delivery_date"]],
    )

    async def both() -> tuple[str, str]:
        called = await chain.call("When?", tool_context={"user_id": "u7"})
        streamed = [e async for e in chain.stream("When?", tool_context={"user_id": "u7"})]
        final = streamed[-1]
        assert isinstance(final, ResponseCompleted)
        return called.text, final.response.text

    assert anyio.run(both) == ("Soon.", "Soon.")
    assert [r.messages[0].content for r in model.requests] == ["One sentence."] * 4
    assert budget.used > 0
    spent = Chain([namespace["TokenBudget"](0)], model=ScriptedChatModel(["x"]))
    with pytest.raises(AdvisorChainError, match="budget of 0 spent"):
        anyio.run(lambda: spent.call("hi"))


def test_the_docs_show_the_refusal_the_chain_raises() -> None:
    page = (README.parent / "docs" / "writing-advisors.md").read_text()
    shown = re.search(
        r"except ChainConfigurationError.*?```\n\nprints\n\n```text\n(.*?)\n```", page, re.S
    )
    assert shown is not None

    async def call_only(request: Any, next: Any) -> Any:
        return await next(request)

    call_only.__name__ = "house_style"
    with pytest.raises(ChainConfigurationError) as raised:
        Chain([advisorchain.advisor(call_only)], model=ScriptedChatModel(["x"]))
    assert str(raised.value) == shown.group(1)


def test_the_sign_example_replaces_the_answer() -> None:
    text = WRITING_ADVISORS.read_text()
    section = text[text.index("## The answer is held once") : text.index("## Every model call")]
    namespace: dict[str, Any] = {"__name__": "readme"}
    blocks = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    sign = next(b for b in blocks if "def sign" in b)
    exec(compile(sign, "writing-advisors-sign", "exec"), namespace)
    signed = anyio.run(namespace["sign"], ChatResponse(message=AssistantMessage(content="Hi")))
    assert signed.text == "Hi\n-- the shop"
    assert signed.messages == (signed.message,)


def test_the_deferral_example_prints_what_the_page_shows() -> None:
    text = WRITING_ADVISORS.read_text()
    section = text[text.index("### Deferring a call") : text.index("## The answer is held once")]
    block = re.findall(r"<!-- tested -->\n```python\n(.*?)```", section, flags=re.S)[0]
    after = text[text.index(block) + len(block) :]
    expected = re.search(r"\nprints\n\n```\n(.*?)```", after, flags=re.S)
    assert expected is not None
    output = io.StringIO()
    with contextlib.redirect_stdout(output):
        exec(compile(block, "writing-advisors-deferral", "exec"), {"__name__": "readme"})
    assert output.getvalue() == expected.group(1)
