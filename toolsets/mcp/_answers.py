"""Checking a user's answer to an MCP server's question (elicitation) against its schema."""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import date, datetime
from typing import Any

from ...core.schema import check_json_schema

_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
_URI = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:\S+$")


def check_answer(content: Mapping[str, Any], schema: Mapping[str, Any]) -> list[str]:
    """Errors of an accepted answer's `content` against an elicitation's (flat) schema:
    types, required fields, enums, bounds, lengths, item counts and the `email`, `uri`,
    `date` and `date-time` formats. Empty when it fits."""
    errors = check_json_schema(dict(content), schema, "content")
    properties: Mapping[str, Any] = schema.get("properties") or {}
    for name, value in content.items():
        field = properties.get(name)
        if isinstance(field, Mapping):
            errors += _field_errors(f"content.{name}", value, field)
    return errors


def _field_errors(where: str, value: Any, field: Mapping[str, Any]) -> list[str]:
    errors: list[str] = []
    if isinstance(value, str):
        if "minLength" in field and len(value) < field["minLength"]:
            errors.append(f"{where}: at least {field['minLength']} characters")
        if "maxLength" in field and len(value) > field["maxLength"]:
            errors.append(f"{where}: at most {field['maxLength']} characters")
        problem = _format_problem(value, field.get("format"))
        if problem:
            errors.append(f"{where}: {problem}")
    elif isinstance(value, list):
        if "minItems" in field and len(value) < field["minItems"]:
            errors.append(f"{where}: at least {field['minItems']} choices")
        if "maxItems" in field and len(value) > field["maxItems"]:
            errors.append(f"{where}: at most {field['maxItems']} choices")
        allowed = choices_of(field.get("items") or {})
        if allowed is not None and any(item not in allowed for item in value):
            errors.append(f"{where}: each choice must be one of {allowed!r}")
    return errors


def _format_problem(value: str, kind: object) -> str | None:
    try:
        if kind == "email" and not _EMAIL.match(value):
            return "not an e-mail address"
        if kind == "uri" and not _URI.match(value):
            return "not a URI"
        if kind == "date":
            date.fromisoformat(value)
        if kind == "date-time":
            datetime.fromisoformat(value)
    except ValueError:
        return f"not a {kind} (ISO 8601)"
    return None


def choices_of(field: Mapping[str, Any]) -> list[Any] | None:
    """The values a field allows: its `enum`, or the `const`s of its `oneOf`/`anyOf`."""
    if isinstance(field.get("enum"), list):
        return list(field["enum"])
    for key in ("oneOf", "anyOf"):
        options = field.get(key)
        if (
            isinstance(options, list)
            and options
            and all(isinstance(o, Mapping) and "const" in o for o in options)
        ):
            return [o["const"] for o in options]
    return None


__all__ = ["check_answer", "choices_of"]
