"""Read a tool's description and its parameters' descriptions from a docstring.

Google style (`Args:` / `Arguments:` / `Parameters:` sections) and reST
(`:param name: text`) are understood; everything before the first section is the
tool's description.
"""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass, field

_SECTION = re.compile(
    r"^(Args|Arguments|Parameters|Params|Returns?|Yields?|Raises|Examples?|Notes?|Attributes)\s*:\s*$"
)
_ARG_SECTIONS = {"Args", "Arguments", "Parameters", "Params"}
_ARG_LINE = re.compile(r"^\*{0,2}(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")
_REST_PARAM = re.compile(r"^:param\s+(?:[^:]*\s)?(\w+)\s*:\s*(.*)$")


@dataclass(slots=True)
class ParsedDocstring:
    """The summary text and the per-parameter descriptions of a docstring."""

    description: str = ""
    params: dict[str, str] = field(default_factory=dict)


def parse_docstring(doc: str | None) -> ParsedDocstring:
    """Split `doc` into a description and parameter descriptions."""
    if not doc:
        return ParsedDocstring()
    lines = inspect.cleandoc(doc).splitlines()
    description: list[str] = []
    params: dict[str, str] = {}
    section: str | None = None
    current: str | None = None
    arg_indent: int | None = None
    for line in lines:
        stripped = line.strip()
        header = _SECTION.match(stripped)
        if header and not line.startswith((" ", "\t")):
            section, current, arg_indent = header.group(1), None, None
            continue
        rest = _REST_PARAM.match(stripped)
        if rest:
            section, current = ":param", rest.group(1)
            params[current] = rest.group(2).strip()
            continue
        if stripped.startswith(":") and section == ":param":
            current = None
            continue
        if section is None:
            description.append(line)
        elif section in _ARG_SECTIONS:
            if not stripped:
                continue
            indent = len(line) - len(line.lstrip())
            match = _ARG_LINE.match(stripped)
            if match and (arg_indent is None or indent <= arg_indent):
                arg_indent = indent
                current = match.group(1)
                params[current] = match.group(2).strip()
            elif current is not None:
                params[current] = f"{params[current]} {stripped}".strip()
        elif section == ":param" and current is not None and stripped:
            params[current] = f"{params[current]} {stripped}".strip()
    return ParsedDocstring("\n".join(description).strip(), params)


__all__ = ["ParsedDocstring", "parse_docstring"]
