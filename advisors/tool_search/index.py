"""`ToolIndex`: how a tool catalog is searched, and the text every index reads.

An index is a value: `build(definitions)` returns a new index of the same kind over that
catalog (the configured instance is only a template), and `search(query, k)` returns up
to `k` tool names, best first. Both are async so that an index may call out (an
embedding service) or move heavy work to a worker thread.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Protocol, TypeGuard, runtime_checkable

from ...core.errors import AdvisorChainError
from ...core.tools import ToolDefinition

MAX_QUERY_CHARS = 2000
"""Queries are cut to this many characters before any index reads them."""

_MAX_VALUES = 64
_SEPARATORS = re.compile(r"[\W_]+")
ASCII_SEPARATORS = bytes(c if c < 128 and chr(c).isalnum() else 32 for c in range(256))
"""A `bytes.translate` table making every byte but ASCII letters and digits a space: the
separators of `_SEPARATORS` in ASCII text, so an ASCII identifier is split without a regex."""
# camelCase boundaries: `getHTTPResponse` -> get HTTP Response.
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")


class QueryRejected(AdvisorChainError, ValueError):
    """A search query an index refuses to run; the message is written for the model."""


@runtime_checkable
class ToolIndex(Protocol):
    """Searches a catalog of tool definitions.

    `build` returns a new, searchable index over `definitions` and leaves `self`
    unchanged; `search` returns at most `k` names of the built catalog, best first. The
    query is plain text written by a model: it is data, never syntax. An unusable query
    finds nothing; the only exception a query may cause is `QueryRejected`, for a query
    the index refuses to run (too costly), whose message tells the model what to send.
    """

    async def build(self, definitions: Sequence[ToolDefinition]) -> ToolIndex:
        """A new index over `definitions`."""
        ...

    async def search(self, query: str, k: int) -> list[str]:
        """Up to `k` tool names for `query`, best first."""
        ...


def split_identifier(identifier: str) -> list[str]:
    """Words of an identifier: split on `_`, `-`, `.`, spaces and camelCase, lowercased."""
    if identifier.isalnum() and identifier.islower():  # the common case: one word
        return [identifier]
    if identifier.isascii():
        pieces = identifier.encode().translate(ASCII_SEPARATORS).decode().split()
    else:
        pieces = [p for p in _SEPARATORS.split(identifier) if p]
    if identifier.lower() == identifier:  # no capitals, so no camelCase to split
        return pieces
    words: list[str] = []
    for piece in pieces:
        if piece.lower() == piece:  # no capitals: no camelCase boundary
            words.append(piece)
        else:
            words.extend(w.lower() for w in _CAMEL.split(piece) if w)
    return words


def words(text: str) -> list[str]:
    """The lowercased words of free text (identifiers in it are split too)."""
    return split_identifier(text[:MAX_QUERY_CHARS])


def parameter_texts(schema: Mapping[str, Any], depth: int = 0) -> Iterator[tuple[str, str]]:
    """`(name, text)` of every property of a JSON schema, nested ones included.

    The text is the property's description followed by its allowed values (`enum`, its
    own or its array items'): `unit` with `["celsius", "fahrenheit"]` is found by either
    word.
    """
    if depth > 5:
        return
    properties = schema.get("properties")
    if _is_mapping(properties):
        for name, prop in properties.items():
            if not _is_mapping(prop):
                continue
            description = prop.get("description")
            text = description if isinstance(description, str) else ""
            values = allowed_values(prop)
            yield str(name), f"{text} {values}".strip() if values else text
            if "properties" in prop or "items" in prop:  # else it has nothing nested
                yield from parameter_texts(prop, depth + 1)
    items = schema.get("items")
    if _is_mapping(items):
        yield from parameter_texts(items, depth + 1)


def _is_mapping(value: object) -> TypeGuard[Mapping[str, Any]]:
    """`isinstance(value, Mapping)`, told at once for a dict and for `None` (most values
    here: the ABC check of a value that is not one is slow)."""
    if type(value) is dict:
        return True
    return value is not None and isinstance(value, Mapping)


def allowed_values(prop: Mapping[str, Any]) -> str:
    """The `enum` values of a property or of its array items, space-separated (at most 64)."""
    if "enum" not in prop and "items" not in prop:
        return ""
    found: list[str] = []
    for holder in (prop, prop.get("items")):
        if _is_mapping(holder) and isinstance(holder.get("enum"), list):
            found.extend(str(v) for v in holder["enum"] if isinstance(v, str | int | float))
    return " ".join(found[:_MAX_VALUES])


def one_line(text: str, limit: int = 160) -> str:
    """The first sentence or line of `text`, on one line, at most `limit` characters."""
    flat = " ".join(text.split())
    for end in (". ", "? ", "! "):
        cut = flat.find(end)
        if 0 < cut < limit:
            flat = flat[: cut + 1]
            break
    if len(flat) > limit:
        flat = flat[: limit - 3].rstrip() + "..."
    return flat


def joined_words(identifier: str) -> str:
    """`split_identifier(identifier)` joined by spaces."""
    return " ".join(split_identifier(identifier))


def document(
    definition: ToolDefinition, parameter_words: Callable[[str], str] = joined_words
) -> tuple[str, str, str]:
    """The three searchable fields of a definition: name words, description, parameters.

    `parameter_words` gives a parameter name's words (`joined_words`, or the same
    remembered: a catalog's parameter names repeat, `limit` or `id` in many tools).
    """
    name, description, parts = document_parts(definition, parameter_words)
    return name, description, " ".join(parts)


def document_parts(
    definition: ToolDefinition, parameter_words: Callable[[str], str] = joined_words
) -> tuple[str, str, list[str]]:
    """`document(definition)` with the parameter field as its parts, one per parameter
    (its name's words and its text; the field is the parts joined by spaces)."""
    parts = [f"{parameter_words(n)} {d}" for n, d in parameter_texts(definition.parameters)]
    return joined_words(definition.name), definition.description, parts


def document_text(definition: ToolDefinition) -> str:
    """A definition as one text (for embeddings and regular expressions)."""
    name, description, params = document(definition)
    return f"{definition.name} ({name}): {description} Parameters: {params}".strip()


__all__ = [
    "ASCII_SEPARATORS",
    "MAX_QUERY_CHARS",
    "QueryRejected",
    "ToolIndex",
    "allowed_values",
    "document",
    "document_parts",
    "document_text",
    "joined_words",
    "one_line",
    "parameter_texts",
    "split_identifier",
    "words",
]
