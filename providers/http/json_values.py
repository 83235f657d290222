"""JSON on the wire: request bodies encoded once (lone surrogates sent as U+FFFD), the
fast paths streams need (`json_loads`, `plain`, `json_dumps`), and reading odd payloads
safely (`PARSE_ERRORS`, `token_count`, `json_excerpt`)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..errors import BODY_EXCERPT_CHARS

__all__ = [
    "PARSE_ERRORS",
    "json_body",
    "json_dumps",
    "json_excerpt",
    "json_loads",
    "plain",
    "plain_general",
    "token_count",
]


PARSE_ERRORS: tuple[type[Exception], ...] = (
    LookupError,
    TypeError,
    ValueError,
    AttributeError,
    ArithmeticError,
    RecursionError,
)
"""What reading an unexpected response shape can raise: all become typed errors."""


def token_count(value: Any) -> int:
    """A token count from the wire: a finite, non-negative number, else 0."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return 0
    if value != value or value in (float("inf"), float("-inf")) or value < 0:
        return 0
    return int(value)


def json_excerpt(payload: Any) -> str:
    """`payload` as JSON for an error's `body` (a repr if it cannot be written as JSON)."""
    try:
        return json.dumps(payload)[:BODY_EXCERPT_CHARS]
    except PARSE_ERRORS:
        return repr(payload)[:BODY_EXCERPT_CHARS]


_scan_once: Callable[[str, int], tuple[Any, int]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]
# (what `json.loads` runs, without its layers)


def json_loads(text: str) -> Any:
    """`json.loads(text)`, with a shortcut for what streams carry: one compact object.

    The same value, and the same error, as `json.loads` for every input (anything the
    shortcut does not read to its end goes to `json.loads`; tests compare the two)."""
    if text[:1] == "{" and text[-1:] == "}":
        try:
            value, end = _scan_once(text, 0)
        except StopIteration:  # pragma: no cover - cannot happen at a "{"
            return json.loads(text)
        if end == len(text):
            return value
    return json.loads(text)


_BODY_JSON = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)
"""What `json.dumps(..., ensure_ascii=False, separators=(",", ":"), allow_nan=False)` does,
built once."""
_COMPACT_JSON = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))

_SURROGATE = re.compile("[\ud800-\udfff]")


def json_body(body: Mapping[str, Any]) -> bytes:
    """`body` as UTF-8 JSON; lone surrogates (from `os.listdir`, a tool, a model), which
    UTF-8 cannot encode, are sent as U+FFFD instead of failing the request."""
    text = _BODY_JSON.encode(body)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return _SURROGATE.sub("\ufffd", text).encode("utf-8")


_SCALARS = frozenset({str, int, float, bool, type(None)})


def plain(value: Any) -> Any:
    """`value` with every mapping made a dict and every tuple a list, ready for JSON.

    Exact dicts, lists, tuples and JSON scalars (what schemas are made of) take a
    shortcut past the ABC checks; anything else goes through `plain_general`, and both
    give the same result (tests/test_provider_fast_paths.py compares them)."""
    kind = type(value)
    if kind in _SCALARS:
        return value
    if kind is dict:
        return {k if type(k) is str else str(k): plain(v) for k, v in value.items()}
    if kind is list or kind is tuple:
        return [plain(v) for v in value]
    return plain_general(value)


def plain_general(value: Any) -> Any:
    """`plain` by the ABCs alone: any mapping a dict, any sequence but text a list."""
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, Sequence) and not isinstance(value, (str, bytes)):
        return [plain(v) for v in value]
    return value


def json_dumps(value: Any) -> str:
    """Compact JSON text, non-ASCII kept: how tool-call arguments are written."""
    return _COMPACT_JSON.encode(value)
