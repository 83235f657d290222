"""The examples of docs/mcp.md and docs/sub-agents.md run and print what the pages show."""

from __future__ import annotations

import contextlib
import io
import os
import re
from pathlib import Path

import pytest

import advisorchain

DOCS = Path(advisorchain.__file__).resolve().parent / "docs"
EXAMPLE = re.compile(
    r"<!-- tested -->\n```python\n(?P<code>.*?)```\n(?:\nprints\n\n```\n(?P<output>.*?)```)?",
    flags=re.S,
)
PAGES = {"mcp.md": 4, "sub-agents.md": 2}


def _examples(page: str) -> list[tuple[str, str | None]]:
    text = (DOCS / page).read_text()
    return [(m["code"], m["output"]) for m in EXAMPLE.finditer(text)]


@pytest.mark.parametrize(("page", "count"), sorted(PAGES.items()))
def test_every_python_block_is_a_tested_example(page: str, count: int) -> None:
    text = (DOCS / page).read_text()
    assert text.count("```python") == count == len(_examples(page))
    assert all(output for _, output in _examples(page))


@pytest.mark.parametrize(
    ("page", "index"), [(page, i) for page, count in sorted(PAGES.items()) for i in range(count)]
)
def test_the_examples_print_what_the_page_shows(page: str, index: int) -> None:
    if page == "mcp.md":
        try:
            import mcp  # noqa: F401
        except ImportError:  # pragma: no cover - only without the extra
            if os.environ.get("CI"):
                raise
            pytest.skip("needs the 'mcp' extra")
    code, expected = _examples(page)[index]
    output = io.StringIO()
    with contextlib.redirect_stdout(output):
        exec(compile(code, f"docs/{page}#{index}", "exec"), {"__name__": "docs"})
    assert output.getvalue() == expected
