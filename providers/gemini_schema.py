"""JSON Schema to Gemini: each tool's schema as the OpenAPI subset `functionDeclarations`
take (`gemini_schema`, which reports what it dropped), or as is with
`schema_mode="json_schema"` (`function_declaration`), and the output schema of a request
without tools (`response_format`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal, TypeAlias

from .http.json_values import plain

__all__ = [
    "MAX_SCHEMA_DEPTH",
    "SchemaMode",
    "function_declaration",
    "gemini_schema",
    "response_format",
]

SchemaMode: TypeAlias = Literal["openapi", "json_schema"]
"""How tool schemas are sent: translated into `parameters`, or as is in
`parametersJsonSchema` (`providers/gemini.py` notes)."""


_KEPT = frozenset(
    {
        "description",
        "title",
        "nullable",
        "minItems",
        "maxItems",
        "minLength",
        "maxLength",
        "pattern",
        "minimum",
        "maximum",
        "minProperties",
        "maxProperties",
        "default",
        "example",
        "propertyOrdering",
    }
)
_FORMATS = {
    "STRING": frozenset({"enum", "date-time"}),
    "NUMBER": frozenset({"float", "double"}),
    "INTEGER": frozenset({"int32", "int64"}),
}
_TYPES = frozenset({"STRING", "NUMBER", "INTEGER", "BOOLEAN", "ARRAY", "OBJECT"})

MAX_SCHEMA_DEPTH = 32
"""How deep `gemini_schema` walks a schema (tool schemas may come from MCP servers);
deeper subschemas are dropped and reported."""


def gemini_schema(schema: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """A JSON Schema as the OpenAPI subset Gemini's `parameters` accept, and the paths
    (`$.properties.x.format`) of what had to be dropped.

    Kept: `type` (upper-cased), `properties`, `required` (the names present), `items`,
    `anyOf`, `enum` of strings, `format` where Gemini knows it (`enum`, `date-time`;
    `float`, `double`; `int32`, `int64`), `nullable`, `description`, `title`, `default`,
    `example`, `propertyOrdering` and the bounds (`minimum`, `maximum`, `minItems`,
    `maxItems`, `minLength`, `maxLength`, `minProperties`, `maxProperties`, `pattern`).
    Translated: `$ref` to `$defs` / `definitions` is inlined (a recursive one becomes a
    bare `OBJECT`, reported); `"type": [T, "null"]` and an `anyOf` / `oneOf` with a `null`
    branch become `nullable`; `oneOf` becomes `anyOf`; `const` a one-value `enum`; an
    `allOf` is merged into its object; an empty `properties` is left out (Gemini rejects
    it). Dropped, and reported: everything else (`additionalProperties`, `$schema`,
    `exclusiveMinimum`, `multipleOf`, `uniqueItems`, `not`, `prefixItems`, non-string
    enums and consts, unknown formats, ...).
    """
    definitions: dict[str, Any] = {}
    for key in ("$defs", "definitions"):
        found = schema.get(key)
        if isinstance(found, Mapping):
            definitions.update({f"#/{key}/{name}": value for name, value in found.items()})
    translation = _Translation(definitions)
    translated = translation.node(schema, "$", ())
    return translated, translation.dropped


class _Translation:
    """One schema's translation: the `$defs` it may reference and the paths dropped."""

    def __init__(self, definitions: Mapping[str, Any]) -> None:
        self.definitions = definitions
        self.dropped: list[str] = []

    def node(self, schema: Any, path: str, expanding: tuple[str, ...]) -> dict[str, Any]:
        """The Gemini form of the subschema at `path` (`expanding`: the `$ref`s being
        inlined around it, so a recursive one is cut, not followed)."""
        if not isinstance(schema, Mapping) or path.count(".") + path.count("[") > MAX_SCHEMA_DEPTH:
            self.dropped.append(path)
            return {}
        ref = schema.get("$ref")
        if isinstance(ref, str):
            target = self.definitions.get(ref)
            if not isinstance(target, Mapping) or ref in expanding:
                self.dropped.append(f"{path}.$ref")
                return {"type": "OBJECT"}
            siblings = {k: v for k, v in schema.items() if k != "$ref"}
            return self.node({**target, **siblings}, path, (*expanding, ref))
        out: dict[str, Any] = {}
        nullable = False
        for key, value in schema.items():
            nullable = self._keyword(out, key, value, path, expanding) or nullable
        return self._finish(out, path, nullable)

    def _keyword(
        self, out: dict[str, Any], key: str, value: Any, path: str, expanding: tuple[str, ...]
    ) -> bool:
        """Translate one keyword of the schema at `path` into `out`; whether it makes the
        value nullable."""
        at = f"{path}.{key}"
        if key in _KEPT:
            out[key] = plain(value)
        elif key == "type":
            return self._type(out, value, at)
        elif key == "properties" and isinstance(value, Mapping):
            properties = {
                name: self.node(sub, f"{at}.{name}", expanding) for name, sub in value.items()
            }
            if properties:
                out["properties"] = properties
        elif key in ("anyOf", "oneOf") and isinstance(value, Sequence):
            return self._any_of(out, value, at, expanding)
        elif key == "allOf" and isinstance(value, Sequence):
            self._all_of(out, value, at, expanding)
        elif key == "items":
            out["items"] = self.node(value, at, expanding)
        elif key == "required" and isinstance(value, Sequence) and not isinstance(value, str):
            out["required"] = [name for name in value if isinstance(name, str)]
        elif key == "enum" and isinstance(value, Sequence) and not isinstance(value, str):
            return self._enum(out, value, at)
        elif key == "const" and isinstance(value, str):
            out["enum"] = [value]
        elif key == "format":
            out["format"] = value  # checked against the type in `_finish`
        elif key in ("$defs", "definitions") and path == "$":
            pass  # inlined where referenced
        else:
            self.dropped.append(at)
        return False

    def _type(self, out: dict[str, Any], value: Any, at: str) -> bool:
        """`type`: one type, or a list of them (an `anyOf`); `"null"` makes it nullable."""
        types = [value] if isinstance(value, str) else value if isinstance(value, list) else []
        names = [t.upper() for t in types if isinstance(t, str) and t != "null"]
        if len(names) == 1 and names[0] in _TYPES:
            out["type"] = names[0]
        elif names and all(n in _TYPES for n in names):
            out["anyOf"] = [{"type": n} for n in names]
        elif names or not isinstance(value, (str, list)):
            self.dropped.append(at)
        return "null" in types

    def _any_of(
        self, out: dict[str, Any], value: Sequence[Any], at: str, expanding: tuple[str, ...]
    ) -> bool:
        """`anyOf` / `oneOf`: a `{"type": "null"}` branch makes it nullable; one branch
        left is merged in, several stay an `anyOf`."""
        nullable = False
        branches = []
        for i, sub in enumerate(value):
            if isinstance(sub, Mapping) and sub.get("type") == "null" and len(sub) == 1:
                nullable = True
                continue
            branches.append(self.node(sub, f"{at}[{i}]", expanding))
        if len(branches) == 1:
            out.update({k: v for k, v in branches[0].items() if k not in out})
        elif branches:
            out["anyOf"] = branches
        return nullable

    def _all_of(
        self, out: dict[str, Any], value: Sequence[Any], at: str, expanding: tuple[str, ...]
    ) -> None:
        """`allOf`: every branch merged in (properties and required lists joined)."""
        for i, sub in enumerate(value):
            for k, v in self.node(sub, f"{at}[{i}]", expanding).items():
                if k == "properties":
                    out["properties"] = {**out.get("properties", {}), **v}
                elif k == "required":
                    out["required"] = [*out.get("required", []), *v]
                else:
                    out.setdefault(k, v)

    def _enum(self, out: dict[str, Any], value: Sequence[Any], at: str) -> bool:
        """`enum`: string values only (Gemini's rule); a `None` among them makes it nullable."""
        values = [v for v in value if v is not None]
        if values and all(isinstance(v, str) for v in values):
            out["enum"] = values
        else:
            self.dropped.append(at)
        return len(values) < len(value)

    def _finish(self, out: dict[str, Any], path: str, nullable: bool) -> dict[str, Any]:
        """What depends on several keywords: a format its type allows, `required` naming
        present properties only, an `enum`'s implied `STRING` type, `nullable`."""
        if "format" in out and out["format"] not in _FORMATS.get(out.get("type", ""), ()):
            del out["format"]
            self.dropped.append(f"{path}.format")
        if "required" in out:
            present = out.get("properties", {})
            out["required"] = [n for n in dict.fromkeys(out["required"]) if n in present]
            if not out["required"]:
                del out["required"]
        if "enum" in out and "type" not in out:
            out["type"] = "STRING"
        if nullable:
            out["nullable"] = True
        return out


def function_declaration(
    name: str, description: str, parameters: Mapping[str, Any], *, mode: SchemaMode = "openapi"
) -> dict[str, Any]:
    """One tool as a Gemini `functionDeclaration` (a tool without parameters has none)."""
    declaration: dict[str, Any] = {"name": name, "description": description}
    if mode == "json_schema":
        declaration["parametersJsonSchema"] = plain(parameters)
        return declaration
    translated, _ = gemini_schema(parameters)
    if translated.get("properties"):
        declaration["parameters"] = translated
    return declaration


def response_format(schema: Mapping[str, Any]) -> dict[str, Any]:
    """The `generationConfig` fields asking for JSON that matches `schema` (structured
    output); merge them into the body's `generationConfig`."""
    return {"responseMimeType": "application/json", "responseJsonSchema": plain(schema)}
