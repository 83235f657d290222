"""Which strings a database can hold: PostgreSQL text holds no NUL, and neither SQLite nor
PostgreSQL (nor UTF-8) holds a lone surrogate, which `os.listdir`, a URL or a model can
produce. An id with either can name nothing stored, so the stores answer "not found" for
it (or refuse to store it) instead of letting the driver's error escape untyped."""

from __future__ import annotations

import re

_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def storable(value: str | None) -> bool:
    """Whether `value` (an id) can be written to every store's database as it is."""
    return value is None or _UNSTORABLE.search(value) is None


_SURROGATE = re.compile("[\ud800-\udfff]")


def without_surrogates(value: object) -> object:
    """`value` (JSON-ready data) with every lone surrogate in its strings made U+FFFD."""
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value)
    if isinstance(value, list):
        return [without_surrogates(v) for v in value]
    if isinstance(value, dict):
        return {k: without_surrogates(v) for k, v in value.items()}
    return value


__all__ = ["storable", "without_surrogates"]
