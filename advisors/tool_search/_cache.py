"""Where tool search keeps its caches (embeddings, examples, converted models)."""

from __future__ import annotations

import os
from pathlib import Path


def default_cache_path() -> Path:
    """Where `minilm_index()` keeps definition embeddings: `$ADVISORCHAIN_CACHE_DIR`,
    else `$XDG_CACHE_HOME/advisorchain`, else `~/.cache/advisorchain`."""
    base = os.environ.get("ADVISORCHAIN_CACHE_DIR")
    if base:
        return Path(base) / "embeddings.sqlite3"
    xdg = os.environ.get("XDG_CACHE_HOME")
    root = Path(xdg) if xdg else Path.home() / ".cache"
    return root / "advisorchain" / "embeddings.sqlite3"


__all__ = ["default_cache_path"]
