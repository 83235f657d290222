"""`ChatOptions.output_schema` on the wire: pure functions the providers call.

Each API constrains the answer to a JSON schema its own way, and accepts its own subset
of JSON Schema:

- OpenAI Chat Completions: `response_format: {type: json_schema, json_schema: {name,
  schema, strict}}`. Strict mode needs every object closed (`additionalProperties:
  false`) with every property required; `strict_schema` rewrites a schema that way
  (optional fields stay nullable, defaults are dropped: the answer is validated by the
  caller anyway). A schema that cannot be closed (a `dict[str, X]` field) is sent with
  `strict: false`. Only the official API takes a schema together with tools; other
  servers (vLLM, llama.cpp's server, Ollama) constrain the whole output, which would
  leave no room for a tool call, so they take it only on requests without tools.
- Anthropic Messages: `output_config: {format: {type: json_schema, schema}}` (structured
  outputs, generally available; the beta's `output_format` is not used). Objects must be
  closed, recursive schemas are refused, and numeric, length and count constraints are
  not supported: they are moved into the field's description (the caller still
  validates them). A schema the API cannot take makes `anthropic_supports` false.
- llama-cpp-python (in process): `response_format: {type: json_object, schema}`, which
  becomes a grammar over the whole output, so only for requests without tools.

Schemas are walked with an explicit depth bound (`MAX_SCHEMA_DEPTH`): a schema is data a
caller may have built from anywhere.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..core.arguments import MAX_ARGUMENT_DEPTH
from ..core.errors import ChainConfigurationError
from ..core.options import OutputSchema

MAX_SCHEMA_DEPTH = MAX_ARGUMENT_DEPTH
"""The deepest nesting of a schema the rewrites walk; deeper schemas are not rewritten."""

OPENAI_OFFICIAL_URL = "https://api.openai.com/v1"

_ANTHROPIC_UNSUPPORTED = (
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "minLength",
    "maxLength",
    "pattern",
    "maxItems",
    "uniqueItems",
    "minProperties",
    "maxProperties",
)
"""Keywords Anthropic's structured outputs reject; moved into the description."""

_ANTHROPIC_FORMATS = frozenset(
    {"date-time", "time", "date", "duration", "email", "hostname", "uri", "ipv4", "ipv6", "uuid"}
)


class _NotExpressible(Exception):
    """The schema cannot be written in the subset asked for."""


# --- OpenAI -------------------------------------------------------------------------------


def openai_response_format(output: OutputSchema) -> dict[str, Any]:
    """The Chat Completions `response_format` for `output` (strict when it can be)."""
    schema: Mapping[str, Any] | None = strict_schema(output.schema) if output.strict else None
    wire: dict[str, Any] = {"name": output.name}
    if output.description:
        wire["description"] = output.description
    wire["schema"] = schema if schema is not None else _copy(output.schema)
    wire["strict"] = schema is not None
    return {"type": "json_schema", "json_schema": wire}


def openai_supports(base_url: str, *, with_tools: bool) -> bool:
    """Whether a Chat Completions server at `base_url` honours a schema: the official API
    always, other servers on requests without tools (see the module's notes)."""
    return not with_tools or base_url.rstrip("/") == OPENAI_OFFICIAL_URL


def strict_schema(schema: Mapping[str, Any]) -> dict[str, Any] | None:
    """A copy of `schema` in OpenAI's strict subset, or `None` if it has none.

    Every object gets `additionalProperties: false` and all its properties `required`;
    `default`s are dropped; `oneOf` becomes `anyOf`; a `$ref` with sibling keywords is
    inlined (strict mode takes a bare `$ref` only). Objects that allow other keys (maps)
    have no strict form.
    """
    try:
        return _Rewrite(schema, anthropic=False).root()
    except _NotExpressible:
        return None


# --- Anthropic ----------------------------------------------------------------------------


def anthropic_schema(schema: Mapping[str, Any]) -> dict[str, Any] | None:
    """A copy of `schema` that Anthropic's structured outputs accept, or `None`.

    As `strict_schema`, and: unsupported constraints (`minimum`, `maxLength`, `pattern`,
    `minItems` above 1, ...) and unknown `format`s are moved into the description;
    recursive schemas have no form (`None`).
    """
    try:
        return _Rewrite(schema, anthropic=True).root()
    except _NotExpressible:
        return None


def anthropic_supports(output: OutputSchema) -> bool:
    """Whether the Messages API can constrain its answer to `output`."""
    return anthropic_schema(output.schema) is not None


def anthropic_output_config(output: OutputSchema, existing: Any = None) -> dict[str, Any]:
    """The Messages API's `output_config` for `output`, merged into an `existing` one
    (from `ChatOptions.extra`, say, which may carry other settings such as `effort`).

    Raises `ChainConfigurationError` for a schema the API cannot take (check
    `anthropic_supports` first): sending none would silently drop the constraint.
    """
    schema = anthropic_schema(output.schema)
    if schema is None:
        raise ChainConfigurationError(
            f"anthropic: output schema {output.name!r} cannot be expressed for the Messages "
            "API (recursive, or an object that allows any keys); state it in the prompt "
            "instead: StructuredOutputAdvisor(..., mode='prompt')"
        )
    config: dict[str, Any] = dict(existing) if isinstance(existing, Mapping) else {}
    config["format"] = {"type": "json_schema", "schema": schema}
    return config


# --- llama-cpp-python ---------------------------------------------------------------------


def llamacpp_response_format(output: OutputSchema, *, with_tools: bool) -> dict[str, Any]:
    """llama-cpp-python's `response_format` for `output` (a grammar over the whole answer).

    Raises `ChainConfigurationError` on a request with tools: the grammar would leave no
    room for a tool call, and sending none would silently drop the constraint.
    """
    if with_tools:
        raise ChainConfigurationError(
            f"llama.cpp: output schema {output.name!r} constrains the whole output, so it "
            "cannot be combined with tools; state it in the prompt instead: "
            "StructuredOutputAdvisor(..., mode='prompt')"
        )
    return {"type": "json_object", "schema": _copy(output.schema)}


# --- the rewrite --------------------------------------------------------------------------


class _Rewrite:
    """One walk over a schema, producing the strict (or Anthropic) copy."""

    def __init__(self, schema: Mapping[str, Any], *, anthropic: bool) -> None:
        if not isinstance(schema, Mapping):
            raise _NotExpressible
        self.source = schema
        self.anthropic = anthropic
        self.definitions: dict[str, Any] = {}
        for key in ("$defs", "definitions"):
            defs = schema.get(key)
            if isinstance(defs, Mapping):
                for name, value in defs.items():
                    self.definitions[f"#/{key}/{name}"] = value

    def root(self) -> dict[str, Any]:
        if self.anthropic:
            outside = {k: v for k, v in self.source.items() if k not in ("$defs", "definitions")}
            if _recursive({"#": outside, **self.definitions}):
                raise _NotExpressible
        return self.node(self.source, 0)

    def node(self, schema: Any, depth: int) -> dict[str, Any]:
        if depth > MAX_SCHEMA_DEPTH or not isinstance(schema, Mapping):
            raise _NotExpressible
        ref = schema.get("$ref")
        if isinstance(ref, str) and len(schema) > 1:
            target = self.definitions.get(ref)
            if not isinstance(target, Mapping):
                raise _NotExpressible
            merged = {**target, **{k: v for k, v in schema.items() if k != "$ref"}}
            return self.node(merged, depth + 1)
        out: dict[str, Any] = {}
        notes: list[str] = []
        for key, value in schema.items():
            if key == "default":
                continue
            if key in ("$defs", "definitions"):
                if not isinstance(value, Mapping):
                    raise _NotExpressible
                out[key] = {name: self.node(d, depth + 1) for name, d in value.items()}
            elif key == "properties":
                if not isinstance(value, Mapping):
                    raise _NotExpressible
                out[key] = {str(name): self.node(p, depth + 1) for name, p in value.items()}
            elif key in ("items", "not", "contains"):
                out[key] = self.node(value, depth + 1)
            elif key in ("anyOf", "oneOf", "allOf", "prefixItems"):
                if not isinstance(value, (list, tuple)):
                    raise _NotExpressible
                target_key = "anyOf" if key == "oneOf" else key
                out[target_key] = [self.node(v, depth + 1) for v in value]
            elif key in ("additionalProperties", "patternProperties", "unevaluatedProperties"):
                if value is not False:
                    raise _NotExpressible  # a map: strict objects are closed
            elif key == "discriminator":
                continue  # OpenAPI's, not JSON Schema's: the anyOf carries the variants
            elif self.anthropic and key in _ANTHROPIC_UNSUPPORTED:
                notes.append(f"{key}: {value}")
            elif self.anthropic and key == "minItems" and value not in (0, 1):
                notes.append(f"minItems: {value}")
            elif self.anthropic and key == "format" and value not in _ANTHROPIC_FORMATS:
                notes.append(f"format: {value}")
            else:
                out[key] = _plain(value, depth + 1)
        if _is_object(schema):
            properties = out.setdefault("properties", {})
            out["required"] = list(properties)
            out["additionalProperties"] = False
        if notes:
            described = out.get("description")
            extra = "; ".join(notes)
            out["description"] = f"{described} ({extra})" if described else f"({extra})"
        return out


def _is_object(schema: Mapping[str, Any]) -> bool:
    kind = schema.get("type")
    return (
        kind == "object"
        or (isinstance(kind, list) and "object" in kind)
        or (kind is None and "properties" in schema)
    )


def _refs(value: Any, found: set[str], depth: int = 0) -> None:
    if depth > MAX_SCHEMA_DEPTH:
        raise _NotExpressible
    if isinstance(value, Mapping):
        ref = value.get("$ref")
        if isinstance(ref, str):
            found.add(ref)
        for child in value.values():
            _refs(child, found, depth + 1)
    elif isinstance(value, (list, tuple)):
        for child in value:
            _refs(child, found, depth + 1)


def _recursive(definitions: Mapping[str, Any]) -> bool:
    """Whether a definition refers to itself, directly or through others."""
    graph: dict[str, set[str]] = {}
    for name, schema in definitions.items():
        graph[name] = set()
        _refs(schema, graph[name])
    state: dict[str, int] = {}  # 1: on the path, 2: done
    for start in graph:
        if state.get(start):
            continue
        stack: list[tuple[str, list[str]]] = [(start, sorted(graph[start]))]
        state[start] = 1
        while stack:
            name, todo = stack[-1]
            if not todo:
                state[name] = 2
                stack.pop()
                continue
            child = todo.pop()
            if state.get(child) == 1:
                return True
            if child in graph and not state.get(child):
                state[child] = 1
                stack.append((child, sorted(graph[child])))
    return False


def _copy(schema: Mapping[str, Any]) -> Any:
    """`schema` as plain JSON containers; `ValueError` if it nests too deeply."""
    try:
        return _plain(schema)
    except _NotExpressible:
        raise ValueError(f"output schema nested deeper than {MAX_SCHEMA_DEPTH} levels") from None


def _plain(value: Any, depth: int = 0) -> Any:
    """`value` as plain JSON containers (mappings as dicts, tuples as lists)."""
    if depth > MAX_SCHEMA_DEPTH:
        raise _NotExpressible
    if isinstance(value, Mapping):
        return {str(k): _plain(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v, depth + 1) for v in value]
    return value


__all__ = [
    "MAX_SCHEMA_DEPTH",
    "OPENAI_OFFICIAL_URL",
    "anthropic_output_config",
    "anthropic_schema",
    "anthropic_supports",
    "llamacpp_response_format",
    "openai_response_format",
    "openai_supports",
    "strict_schema",
]
