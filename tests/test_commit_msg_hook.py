"""The commit-msg hook refuses a subject past 72 characters and lets a short one through."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

HOOK = Path(__file__).resolve().parents[1] / ".githooks" / "commit-msg"


@pytest.mark.parametrize(("subject", "accepted"), [("x" * 72, True), ("x" * 73, False)])
def test_the_hook_checks_the_subject_length(tmp_path: Path, subject: str, accepted: bool) -> None:
    message = tmp_path / "COMMIT_EDITMSG"
    message.write_text(f"{subject}\n\nA body line may be longer than the subject limit, " * 3)
    done = subprocess.run(["bash", str(HOOK), str(message)], capture_output=True, text=True)
    assert (done.returncode == 0) is accepted
    if not accepted:
        assert "at most 72" in done.stderr
