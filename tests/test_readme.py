"""The README's examples run and print what the README says they print."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path
from typing import Any

import advisorchain
from advisorchain import Chain, ToolCall, ToolCallingAdvisor
from advisorchain.providers import ScriptedChatModel

README = Path(advisorchain.__file__).resolve().parent / "README.md"


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


def test_custom_advisor_examples_work() -> None:
    namespace: dict[str, Any] = {"__name__": "readme"}
    exec(compile(readme_blocks()[1], "README-advisors", "exec"), namespace)
    quickstart: dict[str, Any] = {"__name__": "readme"}
    with contextlib.redirect_stdout(io.StringIO()):
        exec(compile(readme_blocks()[0], "README-quickstart", "exec"), quickstart)
    log: list[str] = []
    model = ScriptedChatModel(
        [ToolCall.from_arguments("get_delivery_date", {"order_id": "A1"}), "Soon."]
    )
    chain = Chain(
        [namespace["house_style"], ToolCallingAdvisor(), namespace["AuditTools"](log)],
        model=model,
        tools=[quickstart["get_delivery_date"]],
    )
    import anyio

    response = anyio.run(lambda: chain.call("When?", tool_context={"user_id": "u7"}))
    assert response.text == "Soon."
    assert log == ["u7 get_delivery_date: ok"]
    assert model.requests[0].messages[0].content == "One sentence."
