"""The examples of docs/providers.md marked `<!-- tested -->` run and print what the page shows."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

import advisorchain

PAGE = Path(advisorchain.__file__).resolve().parent / "docs" / "providers.md"
EXAMPLE = re.compile(
    r"<!-- tested -->\n```python\n(?P<code>.*?)```\n(?:\nprints\n\n```\n(?P<output>.*?)```)?",
    flags=re.S,
)
EXAMPLES = [(m["code"], m["output"]) for m in EXAMPLE.finditer(PAGE.read_text())]


def test_the_page_has_its_examples() -> None:
    assert len(EXAMPLES) >= 1
    assert all(output for _, output in EXAMPLES)


@pytest.mark.parametrize("index", range(len(EXAMPLES)))
def test_examples_print_what_the_page_shows(index: int) -> None:
    code, expected = EXAMPLES[index]
    output = io.StringIO()
    with contextlib.redirect_stdout(output):
        exec(compile(code, f"docs/providers.md#{index}", "exec"), {"__name__": "docs"})
    assert output.getvalue() == expected
