"""The `advisorchain` command line (the demo lands here)."""

from __future__ import annotations


def run(argv: list[str]) -> int:
    """Run the command line with `argv`; returns the exit status."""
    print("usage: advisorchain demo")
    return 2
