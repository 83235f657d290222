"""`advisorchain` / `python -m advisorchain`: the command line."""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `advisorchain` command."""
    from .cli import run

    return run(sys.argv[1:] if argv is None else argv)


__all__ = ["main"]


if __name__ == "__main__":
    raise SystemExit(main())
