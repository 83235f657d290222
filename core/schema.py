"""JSON schemas of tool inputs: generation from Python signatures, and validation.

Function tools get a pydantic model built from their signature; its JSON schema (with
the noise of `title` keys removed) is what the model sees, and the same model validates
the arguments. Tools declared with a hand-written JSON schema are checked against it by
`check_json_schema`, a small validator of the subset tool schemas use.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable, Mapping
from typing import Any, get_args, get_origin

from pydantic import BaseModel, ConfigDict, Field, create_model
from pydantic.fields import FieldInfo

from ._docstrings import ParsedDocstring
from .context import ToolContext
from .errors import ToolDefinitionError


class ArgumentsModel(BaseModel):
    """Base of the generated argument models: unknown arguments are an error."""

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=False)


def _is_tool_context(annotation: Any) -> bool:
    if annotation is ToolContext:
        return True
    if get_origin(annotation) is typing.Annotated:
        return _is_tool_context(get_args(annotation)[0])
    if get_origin(annotation) in (typing.Union, _union_type()):
        return any(_is_tool_context(a) for a in get_args(annotation) if a is not type(None))
    return False


def _union_type() -> Any:
    import types

    return types.UnionType


def _allows_none(annotation: Any) -> bool:
    if annotation is None or annotation is type(None) or annotation is Any:
        return True
    origin = get_origin(annotation)
    if origin is typing.Annotated:
        return _allows_none(get_args(annotation)[0])
    if origin in (typing.Union, _union_type()):
        return any(_allows_none(a) for a in get_args(annotation))
    return False


def _has_description(annotation: Any) -> bool:
    if get_origin(annotation) is typing.Annotated:
        return any(isinstance(m, FieldInfo) and m.description for m in get_args(annotation)[1:])
    return False


def signature_model(
    fn: Callable[..., Any], name: str, doc: ParsedDocstring, *, skip_first: bool
) -> tuple[type[ArgumentsModel], str | None, bool]:
    """Build the arguments model of `fn`.

    Returns the model, the name of the parameter that receives the `ToolContext` (if
    any), and whether the function is annotated `-> None`.
    """
    try:
        hints = typing.get_type_hints(fn, include_extras=True)
    except Exception as exc:
        raise ToolDefinitionError(f"tool {name!r}: cannot resolve type hints: {exc}") from exc
    params = list(inspect.signature(fn).parameters.values())
    if skip_first and params:
        params = params[1:]
    fields: dict[str, Any] = {}
    context_param: str | None = None
    for p in params:
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            raise ToolDefinitionError(
                f"tool {name!r}: *args/**kwargs cannot be described to a model; "
                "declare each parameter"
            )
        if p.kind is p.POSITIONAL_ONLY:
            raise ToolDefinitionError(f"tool {name!r}: positional-only parameter {p.name!r}")
        if p.name not in hints:
            raise ToolDefinitionError(
                f"tool {name!r}: parameter {p.name!r} needs a type annotation"
            )
        annotation = hints[p.name]
        if _is_tool_context(annotation):
            context_param = p.name
            continue
        if p.default is not inspect.Parameter.empty:
            default: Any = p.default
        elif _allows_none(annotation):
            default = None
        else:
            default = ...
        description = doc.params.get(p.name)
        if description and not _has_description(annotation):
            fields[p.name] = (annotation, Field(default, description=description))
        else:
            fields[p.name] = (annotation, default)
    try:
        model = create_model(f"{name}_arguments", __base__=ArgumentsModel, **fields)
        model.model_json_schema()
    except Exception as exc:
        raise ToolDefinitionError(f"tool {name!r}: cannot build an input schema: {exc}") from exc
    returns_none = hints.get("return", inspect.Parameter.empty) in (None, type(None))
    return model, context_param, returns_none


def clean_schema(schema: Any) -> Any:
    """Drop pydantic's generated `title` keys: they cost tokens and tell the model nothing."""
    if isinstance(schema, dict):
        out: dict[str, Any] = {}
        for key, value in schema.items():
            if key == "title" and isinstance(value, str):
                continue
            if key in ("properties", "$defs", "definitions") and isinstance(value, dict):
                out[key] = {k: clean_schema(v) for k, v in value.items()}
            else:
                out[key] = clean_schema(value)
        return out
    if isinstance(schema, list):
        return [clean_schema(v) for v in schema]
    return schema


_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,),
    "array": (list, tuple),
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "null": (type(None),),
}


def check_json_schema(value: Any, schema: Mapping[str, Any], path: str = "") -> list[str]:
    """Errors of `value` against `schema` (type, enum, const, required, properties,
    additionalProperties, items, anyOf/oneOf/allOf, min/max bounds). Empty when valid."""
    where = path or "arguments"
    if "const" in schema and value != schema["const"]:
        return [f"{where}: must be {schema['const']!r}"]
    if "enum" in schema and value not in schema["enum"]:
        return [f"{where}: must be one of {list(schema['enum'])!r}"]
    for key in ("anyOf", "oneOf"):
        if key in schema:
            options = schema[key]
            if not any(not check_json_schema(value, s, path) for s in options):
                return [f"{where}: matches none of the allowed forms"]
    errors: list[str] = []
    for sub in schema.get("allOf", ()):
        errors += check_json_schema(value, sub, path)
    kind = schema.get("type")
    if kind is not None:
        kinds = [kind] if isinstance(kind, str) else list(kind)
        if not any(_is_json_type(value, k) for k in kinds):
            return [f"{where}: expected {' or '.join(kinds)}, got {_json_type_name(value)}"]
    if isinstance(value, dict):
        props: Mapping[str, Any] = schema.get("properties", {})
        for req in schema.get("required", ()):
            if req not in value:
                errors.append(f"{path + '.' if path else ''}{req}: missing required argument")
        extra = schema.get("additionalProperties", True)
        for key, item in value.items():
            sub_path = f"{path}.{key}" if path else str(key)
            if key in props:
                errors += check_json_schema(item, props[key], sub_path)
            elif extra is False:
                errors.append(f"{sub_path}: unexpected argument")
            elif isinstance(extra, dict):
                errors += check_json_schema(item, extra, sub_path)
    elif isinstance(value, (list, tuple)) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(value):
            errors += check_json_schema(item, schema["items"], f"{path}[{i}]")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            errors.append(f"{where}: must be >= {schema['minimum']}")
        if "maximum" in schema and value > schema["maximum"]:
            errors.append(f"{where}: must be <= {schema['maximum']}")
    return errors


def _is_json_type(value: Any, kind: str) -> bool:
    if kind in ("integer", "number") and isinstance(value, bool):
        return False
    if kind == "integer" and isinstance(value, float):
        return value.is_integer()
    return isinstance(value, _JSON_TYPES.get(kind, (object,)))


def _json_type_name(value: Any) -> str:
    for name in _JSON_TYPES:
        if name != "number" and _is_json_type(value, name):
            return name
    return "number" if isinstance(value, float) else type(value).__name__


__all__ = ["ArgumentsModel", "check_json_schema", "clean_schema", "signature_model"]
