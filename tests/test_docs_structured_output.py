"""Every example of docs/structured-output.md runs and prints what the page shows."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

import advisorchain

PAGE = Path(advisorchain.__file__).resolve().parent / "docs" / "structured-output.md"
EXAMPLE = re.compile(
    r"<!-- tested -->\n```python\n(?P<code>.*?)```\n\nprints\n\n```\n(?P<output>.*?)```", re.S
)


def examples() -> list[tuple[str, str]]:
    return [(m["code"], m["output"]) for m in EXAMPLE.finditer(PAGE.read_text())]


def test_every_python_block_is_a_tested_example() -> None:
    assert len(examples()) == PAGE.read_text().count("```python") == 5


@pytest.mark.parametrize("index", range(5))
def test_example_prints_what_the_page_shows(index: int) -> None:
    code, expected = examples()[index]
    output = io.StringIO()
    with contextlib.redirect_stdout(output):
        # dont_inherit: the example runs without this file's `from __future__ import annotations`
        # (with it, a dataclass defined in exec'd code looks for its module in sys.modules)
        compiled = compile(code, f"docs/structured-output.md#{index}", "exec", dont_inherit=True)
        exec(compiled, {"__name__": "docs"})
    assert output.getvalue() == expected
