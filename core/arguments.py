"""Reading a tool call's argument text, which the model wrote and which may be hostile.

`parse_arguments` is the one place argument text becomes a value: the tool loop, the
approval advisor, the providers' request builders and the text tool-call parser all use
it. It never raises anything but `ArgumentsError` (a `ValueError`) whose message says, in
a few words the model can act on, why the text cannot be read: not JSON (which includes
`NaN`, `Infinity` and numbers too large for a float, all of which Python's `json` would
read, but no provider can send back in the next request), longer than
`MAX_ARGUMENT_CHARS`, or nested deeper than `MAX_ARGUMENT_DEPTH` (10,000 nested brackets
would otherwise end the turn with a `RecursionError`, in the JSON reader or later in any
code that walks the value).
"""

from __future__ import annotations

import json
import math
from typing import Any

MAX_ARGUMENT_DEPTH = 100
"""The deepest nesting of arrays and objects accepted (the top-level object counts)."""

MAX_ARGUMENT_CHARS = 4_000_000
"""The longest argument text accepted, in characters."""


class ArgumentsError(ValueError):
    """A call's argument text cannot be read; the message says why, for the model."""


def parse_arguments(
    text: str, *, max_depth: int = MAX_ARGUMENT_DEPTH, max_chars: int = MAX_ARGUMENT_CHARS
) -> Any:
    """The JSON value of `text` (blank text is `{}`); any JSON value, the caller checks
    that it is an object. Raises `ArgumentsError` if it is not JSON, too long, or too
    deeply nested."""
    if len(text) > max_chars:
        raise ArgumentsError(f"too long ({len(text)} characters; at most {max_chars})")
    text = text.strip()
    if not text:
        return {}
    try:
        value = json.loads(text, parse_constant=_not_json, parse_float=_finite)
    except RecursionError:
        raise ArgumentsError(f"too deeply nested (at most {max_depth} levels)") from None
    except ValueError as exc:
        raise ArgumentsError(f"not valid JSON ({exc})") from None
    # Nesting needs an opening bracket per level: text with few of them cannot be too deep
    # (and text no longer than the limit has few: the usual arguments are not counted).
    if (
        len(text) > max_depth
        and text.count("[") + text.count("{") > max_depth
        and _deeper_than(value, max_depth)
    ):
        raise ArgumentsError(f"too deeply nested (at most {max_depth} levels)")
    return value


def _not_json(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _finite(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise ValueError(f"{text[:40]} is too large for a number")
    return value


def parse_argument_object(text: str) -> dict[str, Any] | None:
    """The JSON object `text` holds, or `None` if it holds anything else or cannot be read."""
    try:
        value = parse_arguments(text)
    except ArgumentsError:
        return None
    return value if isinstance(value, dict) else None


def _deeper_than(value: Any, limit: int) -> bool:
    """Whether arrays and objects nest more than `limit` levels in `value` (no recursion)."""
    if not isinstance(value, (dict, list)):
        return False
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            return True
        children = item.values() if isinstance(item, dict) else item
        for child in children:
            if isinstance(child, (dict, list)):
                stack.append((child, depth + 1))
    return False


__all__ = [
    "MAX_ARGUMENT_CHARS",
    "MAX_ARGUMENT_DEPTH",
    "ArgumentsError",
    "parse_argument_object",
    "parse_arguments",
]
