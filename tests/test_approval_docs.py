"""docs/approvals.md: the second-process resume runs as two real processes sharing a SQLite
file (tests/test_docs.py runs every block of the page in one process)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import advisorchain

PAGE = Path(advisorchain.__file__).resolve().parent / "docs" / "approvals.md"
MARK = "<!-- tested -->\n```python\n"


def examples() -> list[tuple[str, str]]:
    """Each tested block's code and the output the page shows after it."""
    found = []
    for chunk in PAGE.read_text().split(MARK)[1:]:
        code, rest = chunk.split("```\n", 1)
        assert rest.startswith("\nprints\n\n```\n"), "every example shows what it prints"
        output = rest.removeprefix("\nprints\n\n```\n").split("```\n", 1)[0]
        found.append((code, output))
    return found


def test_a_second_process_resumes_what_the_first_deferred(tmp_path: Path) -> None:
    """Process A defers and keeps the transcript; process B lists, decides, resumes."""
    (suspend, suspended), (resume, resumed) = examples()[1:3]
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    for code, expected in ((suspend, suspended), (resume, resumed)):
        done = subprocess.run(
            [sys.executable, "-c", code],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout == expected
    assert (tmp_path / "approvals.db").exists()
