"""The examples of docs/*.md marked `<!-- tested -->` run and print what the page shows."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

import advisorchain

DOCS = Path(advisorchain.__file__).resolve().parent / "docs"
EXAMPLE = re.compile(
    r"<!-- tested -->\n```python\n(?P<code>.*?)```\n(?:\nprints\n\n```\n(?P<output>.*?)```)?",
    flags=re.S,
)


def examples(page: str) -> list[tuple[str, str | None]]:
    text = (DOCS / page).read_text()
    return [(m["code"], m["output"]) for m in EXAMPLE.finditer(text)]


def test_redaction_page_has_its_examples() -> None:
    found = examples("redaction.md")
    assert len(found) == 2
    assert all(output for _, output in found)


@pytest.mark.parametrize("index", range(2))
def test_redaction_examples_print_what_the_page_shows(index: int) -> None:
    code, expected = examples("redaction.md")[index]
    output = io.StringIO()
    with contextlib.redirect_stdout(output):
        exec(compile(code, f"docs/redaction.md#{index}", "exec"), {"__name__": "docs"})
    assert output.getvalue() == expected
