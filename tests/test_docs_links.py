"""Every example of docs/links.md runs and prints what the page shows below it."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

import advisorchain

PAGE = Path(advisorchain.__file__).resolve().parent / "docs" / "links.md"


def examples() -> list[tuple[str, str, str]]:
    """(section title, code, expected output) for each example of the page."""
    found: list[tuple[str, str, str]] = []
    for section in re.split(r"\n## ", PAGE.read_text())[1:]:
        title = section.splitlines()[0]
        pairs = re.findall(r"```python\n(.*?)```\n\n```text\n(.*?)```", section, flags=re.S)
        found.extend((title, code, output) for code, output in pairs)
    return found


def test_every_section_has_an_example() -> None:
    titles = [title.split(":")[0] for title, _, _ in examples()]
    assert titles == [
        "FallbackModel",
        "Tool effects",
        "ToolRetryAdvisor",
        "ToolResultCacheAdvisor",
        "BudgetAdvisor",
    ]


@pytest.mark.parametrize(("title", "code", "expected"), examples(), ids=lambda v: str(v)[:20])
def test_example_prints_what_the_page_shows(title: str, code: str, expected: str) -> None:
    output = io.StringIO()
    with contextlib.redirect_stdout(output):
        exec(compile(code, f"docs/links.md: {title}", "exec"), {"__name__": "docs"})
    assert output.getvalue() == expected
