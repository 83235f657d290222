"""docs/writing-advisors.md's custom approval advisor, executed: under 20 lines on the hooks."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from advisorchain import Chain, ToolCall, ToolCallingAdvisor, ToolMessage, tool
from advisorchain.providers import ScriptedChatModel

PAGE = Path(__file__).resolve().parent.parent / "docs" / "writing-advisors.md"


def page_example() -> str:
    text = PAGE.read_text(encoding="utf-8")
    match = re.search(r"<!-- custom-approval-advisor -->\n```python\n(.*?)```", text, re.DOTALL)
    assert match is not None, "docs/writing-advisors.md lost its custom approval advisor example"
    return match.group(1)


def test_the_example_is_under_20_lines() -> None:
    lines = [line for line in page_example().splitlines() if line.strip()]
    assert len(lines) < 20


@pytest.mark.anyio
async def test_the_example_asks_only_above_the_limit() -> None:
    namespace: dict[str, Any] = {}
    exec(compile(page_example(), str(PAGE), "exec"), namespace)
    asked: list[tuple[str, dict[str, Any]]] = []

    async def confirm(name: str, arguments: dict[str, Any]) -> bool:
        asked.append((name, arguments))
        return bool(arguments["to"] == "bob")

    sent: list[tuple[str, int]] = []

    @tool
    def transfer(to: str, amount: int) -> str:
        """Send money."""
        sent.append((to, amount))
        return "sent"

    model = ScriptedChatModel(
        [
            [
                ToolCall.from_arguments("transfer", {"to": "ann", "amount": 5}, id="c1"),
                ToolCall.from_arguments("transfer", {"to": "bob", "amount": 500}, id="c2"),
                ToolCall.from_arguments("transfer", {"to": "eve", "amount": 900}, id="c3"),
            ],
            "done",
        ]
    )
    advisor = namespace["AmountLimitAdvisor"](confirm, 100)
    chain = Chain([advisor, ToolCallingAdvisor()], model=model, tools=[transfer])
    await chain.call("pay")
    assert sorted(sent) == [("ann", 5), ("bob", 500)]
    assert [a[1]["to"] for a in sorted(asked, key=lambda a: a[1]["to"])] == ["bob", "eve"]
    results = [m for m in model.requests[1].messages if isinstance(m, ToolMessage)]
    assert [m.is_error for m in results] == [False, False, True]
    assert "900 is over 100" in results[2].content
