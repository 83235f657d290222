"""The examples of docs/tool-search.md run and print what the page shows."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

import advisorchain

PAGE = Path(advisorchain.__file__).resolve().parent / "docs" / "tool-search.md"
EXAMPLE = re.compile(
    r"<!-- tested -->\n```python\n(?P<code>.*?)```\n(?:\nprints\n\n```\n(?P<output>.*?)```)?",
    flags=re.S,
)
FOUND = [(m["code"], m["output"]) for m in EXAMPLE.finditer(PAGE.read_text())]


def test_the_page_has_its_examples() -> None:
    assert len(FOUND) == 3 and all(output for _, output in FOUND)


@pytest.mark.parametrize("index", range(len(FOUND)))
def test_example_prints_what_the_page_shows(index: int) -> None:
    code, expected = FOUND[index]
    output = io.StringIO()
    with contextlib.redirect_stdout(output):
        exec(compile(code, f"docs/tool-search.md#{index}", "exec"), {"__name__": "docs"})
    assert output.getvalue() == expected
