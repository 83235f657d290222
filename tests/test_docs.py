"""Every ```python block of README.md and docs/*.md runs, found automatically.

A page's blocks run in order in one namespace (a later block may use what an earlier one
defined), in a fresh temporary directory. A block may use top-level `await` (it then runs
in `asyncio.run`, as in `python -m asyncio`). A block followed by a line `prints` (or a
```text fence right after it) must print exactly the text of that next fence.

Markers, as HTML comments on the lines right above a block:

- `<!-- setup: code -->` (may span lines) runs `code` first in the page's namespace: for
  what the reader need not see, such as a scripted model standing in for a real one.
- `<!-- not-run: reason -->` skips the block. It is for blocks that cannot run offline
  (a real server, the local model); the reason is required and the marker is rare.
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import inspect
import io
import re
import sys
import types
from dataclasses import dataclass
from pathlib import Path

import pytest

import advisorchain

ROOT = Path(advisorchain.__file__).resolve().parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```(?P<lang>[\w-]*)\n(?P<body>.*?)^```[ \t]*$", flags=re.M | re.S)
MARKERS = re.compile(r"(?:<!--(?P<marker>.*?)-->\s*)+\Z", flags=re.S)
ONE_MARKER = re.compile(r"<!--(.*?)-->", flags=re.S)
PRINTS = re.compile(r"\s*(?:prints:?)?\s*", flags=re.I)
MAX_NOT_RUN = 8


@dataclass(frozen=True)
class Block:
    page: Path
    line: int
    code: str
    setup: tuple[str, ...]
    not_run: str | None
    expected: str | None

    @property
    def where(self) -> str:
        name = self.page.relative_to(ROOT) if self.page.is_relative_to(ROOT) else self.page
        return f"{name}:{self.line}"


def blocks(page: Path) -> list[Block]:
    """The python blocks of `page`, with their markers and expected output."""
    text = page.read_text(encoding="utf-8")
    fences = list(FENCE.finditer(text))
    found: list[Block] = []
    for index, fence in enumerate(fences):
        if fence["lang"] != "python":
            continue
        previous_end = fences[index - 1].end() if index else 0
        lead = text[previous_end : fence.start()]
        markers = MARKERS.search(lead)
        comments = ONE_MARKER.findall(markers.group(0)) if markers else []
        setup = tuple(
            c.strip()[len("setup:") :].strip() for c in comments if c.strip().startswith("setup:")
        )
        not_run = next(
            (c.strip()[len("not-run:") :].strip() for c in comments if "not-run:" in c), None
        )
        expected = None
        if index + 1 < len(fences):
            following = fences[index + 1]
            between = text[fence.end() : following.start()]
            shows_output = PRINTS.fullmatch(between) and (
                following["lang"] == "text" or "prints" in between
            )
            if shows_output and following["lang"] in ("", "text"):
                expected = following["body"]
        line = text.count("\n", 0, fence.start()) + 1
        found.append(Block(page, line, fence["body"], setup, not_run, expected))
    return found


def run(code: str, namespace: dict[str, object], where: str) -> None:
    # dont_inherit: the block runs without this file's `from __future__ import annotations`
    compiled = compile(code, where, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT, dont_inherit=True)
    if compiled.co_flags & inspect.CO_COROUTINE:
        asyncio.run(eval(compiled, namespace))
    else:
        exec(compiled, namespace)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_python_block_of_the_page_runs(
    page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    module = types.ModuleType("docs")
    monkeypatch.setitem(sys.modules, "docs", module)  # dataclasses look their module up
    namespace: dict[str, object] = module.__dict__
    for block in blocks(page):
        if block.not_run is not None:
            continue
        output = io.StringIO()
        with contextlib.redirect_stdout(output):
            for setup in block.setup:
                run(setup, namespace, f"{block.where} (setup)")
            run(block.code, namespace, block.where)
        if block.expected is not None:
            assert output.getvalue() == block.expected, f"{block.where} printed otherwise"


def test_pages_have_python_blocks_to_run() -> None:
    counted = {page.name: len(blocks(page)) for page in PAGES}
    assert counted["README.md"] >= 3
    assert sum(counted.values()) >= 35
    assert "testing.md" in counted and counted["testing.md"] >= 4


def test_not_run_markers_are_rare_and_give_a_reason() -> None:
    skipped = [block for page in PAGES for block in blocks(page) if block.not_run is not None]
    assert len(skipped) <= MAX_NOT_RUN, [b.where for b in skipped]
    for block in skipped:
        assert len(block.not_run or "") >= 15, f"{block.where}: say why it cannot run"


def test_the_parser_reads_markers_and_expected_output(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "Intro.\n\n<!-- setup: x = 2 -->\n```python\nprint(x)\n```\n\nprints\n\n```\n2\n```\n\n"
        "<!-- not-run: needs a server on the network -->\n```python\nconnect()\n```\n\n"
        "```python\nprint(3)\n```\n\n```text\n3\n```\n\n"
        "```python\npass\n```\n\n```\nnot output\n```\n"
    )
    first, skipped, third, fourth = blocks(page)
    assert (first.setup, first.expected, first.line) == (("x = 2",), "2\n", 4)
    assert skipped.not_run == "needs a server on the network" and skipped.expected is None
    assert third.expected == "3\n" and not third.setup
    assert fourth.expected is None


def slug(title: str) -> str:
    """GitHub's anchor for a heading."""
    title = re.sub(r"[^\w\- ]", "", title.strip().lower())
    return title.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    return {slug(m) for m in re.findall(r"^#+ (.*)$", text, flags=re.M)}


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(page: Path) -> None:
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        assert resolved.exists(), f"{page.name}: {target} does not exist"
        if anchor and resolved.suffix == ".md":
            assert anchor in anchors(resolved), f"{page.name}: no heading for {target}"
