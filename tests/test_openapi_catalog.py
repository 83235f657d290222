"""The OpenAPI directory's operations become tools as the benchmark's loader documents.

`benchmarks/tool_search/openapi_catalog.py` turns each operation of a specification into
a `ToolDefinition`; these check the conversion on a small inline specification (the
directory itself is 45 MB from npm, never needed by the tests).
"""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from advisorchain import ToolDefinition

ROOT = Path(__file__).resolve().parent.parent

if TYPE_CHECKING:
    from advisorchain.benchmarks.tool_search import openapi_catalog
else:
    import sys

    sys.path.insert(0, str(ROOT / "benchmarks" / "tool_search"))
    import openapi_catalog

    sys.path.remove(str(ROOT / "benchmarks" / "tool_search"))

SPEC: dict[str, Any] = {
    "openapi": "3.0.0",
    "paths": {
        "/pets/{petId}": {
            "parameters": [
                {"$ref": "#/components/parameters/PetId"},
                {"name": "X-Api-Key", "in": "header", "schema": {"type": "string"}},
            ],
            "get": {
                "operationId": "getPet",
                "summary": "Find a pet",
                "description": "Returns one pet by its id.",
                "parameters": [
                    {
                        "name": "fields",
                        "in": "query",
                        "description": "Fields to return",
                        "schema": {"type": "array", "items": {"enum": ["name", "tag"]}},
                    }
                ],
            },
            "put": {
                "summary": "Update a pet",
                "requestBody": {
                    "required": True,
                    "content": {
                        "application/json": {"schema": {"$ref": "#/components/schemas/Pet"}}
                    },
                },
            },
            "delete": {"summary": "Find a pet"},  # the same description as `get`
            "x-extension": {"summary": "not an operation"},
        },
    },
    "components": {
        "parameters": {
            "PetId": {
                "name": "petId",
                "in": "path",
                "required": True,
                "description": "The pet's id",
                "schema": {"type": "integer", "format": "int64"},
            }
        },
        "schemas": {
            "Named": {"properties": {"name": {"type": "string", "description": "Its name"}}},
            "Pet": {
                "allOf": [{"$ref": "#/components/schemas/Named"}],
                "required": ["name"],
                "properties": {
                    "status": {"type": "string", "enum": ["sold", "free"], "pattern": "x"},
                    "parent": {"$ref": "#/components/schemas/Pet"},
                },
            },
        },
    },
}


def test_operations_become_tools_with_resolved_parameters() -> None:
    tools = list(openapi_catalog.tools_of_spec("example.com/pets", SPEC))
    assert [t.name for t in tools] == [
        "example_com_pets_getPet",
        "example_com_pets_put_pets_petId",
        "example_com_pets_delete_pets_petId",
    ]
    get, put, _ = tools
    assert get.description == "Find a pet. Returns one pet by its id."
    assert get.parameters == {
        "type": "object",
        "properties": {
            "petId": {"type": "integer", "format": "int64", "description": "The pet's id"},
            "fields": {
                "description": "Fields to return",
                "type": "array",
                "items": {"enum": ["name", "tag"]},
            },
        },
        "required": ["petId"],
    }
    body = put.parameters["properties"]["body"]
    assert put.parameters["required"] == ["petId", "body"]
    assert body["required"] == ["name"]
    assert body["properties"]["name"] == {"type": "string", "description": "Its name"}
    assert body["properties"]["status"] == {"type": "string", "enum": ["sold", "free"]}
    # `Pet` inside `Pet`: the cycle is cut, not followed
    assert body["properties"]["parent"] == {}


def test_nesting_and_property_count_are_bounded() -> None:
    deep: dict[str, Any] = {"type": "string"}
    for level in range(10):
        deep = {"properties": {f"p{level}": deep}}
    wide = {"properties": {f"w{i}": {"type": "string"} for i in range(500)}}
    spec = {
        "paths": {
            "/a": {
                "post": {
                    "operationId": "a" * 80,
                    "requestBody": {"content": {"text/plain": {"schema": deep}}},
                },
                "put": {
                    "operationId": "b",
                    "requestBody": {"content": {"application/json": {"schema": wide}}},
                },
            }
        }
    }
    put, post = openapi_catalog.tools_of_spec("x", spec)
    assert len(post.name) == 64 and post.name.startswith("x_aaaa")
    node = post.parameters["properties"]["body"]
    depth = 1
    while "properties" in node:
        (node,) = node["properties"].values()
        depth += 1
    assert depth == openapi_catalog.MAX_DEPTH
    assert len(put.parameters["properties"]["body"]["properties"]) == 128


def test_long_descriptions_are_cut_at_a_word() -> None:
    text = " ".join(["word"] * 400)
    described = openapi_catalog.description_of({"summary": "Sum", "description": text})
    assert len(described) <= openapi_catalog.MAX_DESCRIPTION
    assert described.startswith("Sum. word word") and described.endswith("word")


def test_distinct_keeps_new_names_and_descriptions_in_name_order() -> None:
    tools = [
        ToolDefinition("b", "two"),
        ToolDefinition("a", "one"),
        ToolDefinition("c", "one"),  # a description already seen
        ToolDefinition("a", "other"),  # a name already seen
        ToolDefinition("d", ""),
    ]
    assert openapi_catalog.distinct(tools) == [
        ToolDefinition("a", "one"),
        ToolDefinition("b", "two"),
    ]


def test_sample_is_seeded_and_in_name_order() -> None:
    tools = [ToolDefinition(f"t{i:03}", str(i)) for i in range(200)]
    first = openapi_catalog.sample(tools, 20)
    assert first == openapi_catalog.sample(list(tools), 20)
    assert [t.name for t in first] == sorted(t.name for t in first)
    assert first != openapi_catalog.sample(tools, 20, seed=1)
    assert openapi_catalog.sample(tools, 500) == tools


def test_convert_reads_a_package_tarball(tmp_path: Path) -> None:
    path = tmp_path / "package.tgz"
    with tarfile.open(path, "w:gz") as archive:
        for name, spec in (("package/api/z.org.json", SPEC), ("package/api/a.com/v1.json", SPEC)):
            data = json.dumps(spec).encode()
            member = tarfile.TarInfo(name)
            member.size = len(data)
            archive.addfile(member, io.BytesIO(data))
        readme = tarfile.TarInfo("package/README.md")
        archive.addfile(readme, io.BytesIO(b""))
    tools = openapi_catalog.convert(path)
    # the second spec's operations repeat the first's descriptions: only one set is kept
    assert [t.name for t in tools] == [
        "a_com_v1_delete_pets_petId",
        "a_com_v1_getPet",
        "a_com_v1_put_pets_petId",
    ]


def test_fetch_without_npm_says_what_is_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(openapi_catalog, "CONVERTED", tmp_path / "tools.json")
    monkeypatch.setattr(openapi_catalog, "TARBALL", tmp_path / "p.tgz")
    monkeypatch.setattr("shutil.which", lambda _: None)
    with pytest.raises(openapi_catalog.CatalogMissing, match="no npm"):
        openapi_catalog.fetch()
