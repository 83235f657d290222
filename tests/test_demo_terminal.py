"""The demo on a terminal (issue 38, item 8): a status line while the model works that
never mixes with the answer, the question shown once, `--log` records on lines of their
own. Checked on captured streams and on a real pseudo-terminal."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
import time
from collections.abc import AsyncIterator

import pytest

from advisorchain import AssistantMessage, ChatResponse, ToolCall, ToolMessage
from advisorchain.core.events import (
    ResponseCompleted,
    StreamEvent,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
)
from advisorchain.demo.app import DemoOptions, run_demo
from advisorchain.demo.render import STATUS_CLEAR, TerminalRenderer
from advisorchain.demo.scripted import scripted_order_model


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def screen(raw: str) -> list[str]:
    """What a terminal shows: each line after its last carriage return, escapes removed."""
    return [ANSI.sub("", line.split("\r")[-1]) for line in raw.split("\n")]


async def _events() -> AsyncIterator[StreamEvent]:
    call = ToolCall.from_arguments("get_order_status", {"order_id": "A-1"})
    yield ToolCallStarted(call)
    result = ToolMessage(tool_call_id=call.id, name=call.name, content="shipped")
    yield ToolCallFinished(call, result, "ok", 0.001)
    yield TextDelta("It ")
    yield TextDelta("shipped.")
    yield ResponseCompleted(ChatResponse(message=AssistantMessage(content="It shipped.")))


@pytest.mark.anyio
async def test_the_status_line_shows_what_happens_and_is_erased_before_the_answer() -> None:
    out = FakeTerminal()
    renderer = TerminalRenderer(out)
    await renderer.turn("Where is A-1?", _events())
    raw = out.getvalue()
    for status in ("reading your question", "calling get_order_status", "reading the results"):
        assert f"... {status}" in raw
    shown = screen(raw)
    assert "assistant> It shipped." in shown
    assert not any("..." in line for line in shown)  # every status was erased
    # the answer's line starts clean: the erase comes before "assistant> "
    before_answer = raw.split("assistant> ", 1)[0]
    assert before_answer.endswith(STATUS_CLEAR)


@pytest.mark.anyio
async def test_no_status_line_off_a_terminal() -> None:
    out = io.StringIO()
    await TerminalRenderer(out).turn("Where is A-1?", _events())
    assert "..." not in out.getvalue() and "\x1b" not in out.getvalue()


@pytest.mark.anyio
async def test_log_records_never_share_a_line_with_the_answer() -> None:
    out, err = io.StringIO(), io.StringIO()
    renderer = TerminalRenderer(out, err=err)

    async def events() -> AsyncIterator[StreamEvent]:
        yield TextDelta("It ")
        renderer.log_line("  [log] model call")  # a record while the answer streams
        yield TextDelta("shipped.")
        yield ResponseCompleted(ChatResponse(message=AssistantMessage(content="It shipped.")))

    await renderer.turn("Where?", events())
    assert out.getvalue().splitlines()[1] == "assistant> It "
    assert err.getvalue() == "  [log] model call\n"


@pytest.mark.anyio
async def test_demo_log_records_go_to_err_on_lines_of_their_own() -> None:
    out, err = io.StringIO(), io.StringIO()
    options = DemoOptions(questions=("Where is A-1001?",), log=True, approval="no")
    await run_demo(options, out=out, err=err, model=scripted_order_model())
    records = err.getvalue().splitlines()
    assert records and all(line.startswith("  [log] ") for line in records)
    assert "[log]" not in out.getvalue()
    # without --log, nothing is logged anywhere, and the handler was removed
    out, err = io.StringIO(), io.StringIO()
    options = DemoOptions(questions=("Where is A-1001?",), approval="no")
    await run_demo(options, out=out, err=err, model=scripted_order_model())
    assert err.getvalue() == "" and "[log]" not in out.getvalue()


@pytest.mark.anyio
async def test_interactive_questions_are_not_echoed_again() -> None:
    lines = iter(["Where is A-1001?", ""])
    out = io.StringIO()
    options = DemoOptions(interactive=True, approval="no")
    await run_demo(options, out=out, read=lambda prompt: next(lines), model=scripted_order_model())
    assert "you> Where is A-1001?" not in out.getvalue()  # input() showed it as typed
    out = io.StringIO()
    options = DemoOptions(questions=("Where is A-1001?",), approval="no")
    await run_demo(options, out=out, model=scripted_order_model())
    assert out.getvalue().count("you> Where is A-1001?") == 1


def _run_on_a_pty(args: list[str], typed: bytes) -> str:
    """Run the CLI with a pseudo-terminal as stdin/stdout/stderr; returns what it shows."""
    pty = pytest.importorskip("pty")
    primary, secondary = pty.openpty()
    process = subprocess.Popen(
        [sys.executable, "-m", "advisorchain", *args],
        stdin=secondary,
        stdout=secondary,
        stderr=secondary,
        close_fds=True,
    )
    os.close(secondary)
    os.write(primary, typed)
    chunks: list[bytes] = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            chunk = os.read(primary, 4096)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    process.wait(timeout=30)
    os.close(primary)
    return b"".join(chunks).decode(errors="replace")


@pytest.mark.skipif(sys.platform == "win32", reason="pseudo-terminals are POSIX")
def test_on_a_real_terminal_the_question_shows_once_and_logs_keep_their_lines() -> None:
    raw = _run_on_a_pty(
        ["demo", "--model", "scripted", "-i", "--yes", "--log"],
        b"Where is order A-1001?\n\n",
    )
    shown = screen(raw.replace("\r\n", "\n"))
    table = re.compile(r"^\s+\d+\s")  # the totals at the end name the question too
    echoed = [line for line in shown if "Where is order A-1001?" in line and not table.match(line)]
    assert len(echoed) == 1, shown
    answer = [line for line in shown if line.startswith("assistant> ")]
    assert len(answer) == 1 and "DHL" in answer[0] and "[log]" not in answer[0]
    logs = [line for line in shown if "[log]" in line]
    assert logs and all(line.startswith("  [log] ") for line in logs)
    assert not any(line.startswith("... ") for line in shown)  # statuses erased
