"""McpToolset's mapping of MCP definitions and results, without a server."""

from __future__ import annotations

import os
import sys
from typing import Any

import pytest

try:
    import mcp_types
except ImportError:  # pragma: no cover - only without the extra
    if os.environ.get("CI"):
        raise
    pytest.skip("needs the 'mcp' extra: pip install -e '.[mcp]'", allow_module_level=True)

from advisorchain import ToolDefinition
from advisorchain.core.errors import ChainConfigurationError
from advisorchain.toolsets import McpToolset
from advisorchain.toolsets.mcp import result_text, tool_effects

SCHEMA = {
    "type": "object",
    "properties": {"q": {"type": "string"}, "tenant_id": {"type": "string"}},
    "required": ["q", "tenant_id"],
}


def _toolset(**options: Any) -> McpToolset:
    return McpToolset.http("http://127.0.0.1:9/mcp", **options)


def _listed(*names: str) -> list[mcp_types.Tool]:
    return [mcp_types.Tool(name=n, description=f"{n} tool", input_schema=SCHEMA) for n in names]


@pytest.mark.parametrize(
    ("policy", "expected"),
    [
        (False, {"read": False, "write": False}),
        (True, {"read": True, "write": True}),
        ({"write"}, {"read": False, "write": True}),
        (["read"], {"read": True, "write": False}),
        (lambda d: d.name.startswith("w"), {"read": False, "write": True}),
    ],
)
def test_approval_policies(policy: Any, expected: dict[str, bool]) -> None:
    tools = _toolset(requires_approval=policy, prefix="x_")._build(_listed("read", "write"))
    assert {t.name[2:]: t.requires_approval for t in tools} == expected


def test_a_bare_string_is_not_a_collection_of_names() -> None:
    with pytest.raises(ChainConfigurationError, match="collection of tool names"):
        _toolset(requires_approval="write")._build(_listed("write"))


def test_context_arguments_leave_the_server_schema_intact_for_the_call() -> None:
    toolset = _toolset(context_arguments={"tenant_id": "tenant"})
    [tool] = toolset._build(_listed("search"))
    assert tool.definition.parameters["properties"] == {"q": {"type": "string"}}
    assert tool.definition.parameters["required"] == ["q"]
    assert SCHEMA["required"] == ["q", "tenant_id"]  # the listing itself is not changed


def test_unusable_tool_names_are_skipped_not_fatal() -> None:
    tools = _toolset()._build(_listed("good", "bad name/with spaces"))
    assert [t.name for t in tools] == ["good"]


def test_filter_sees_the_server_definition() -> None:
    seen: list[str] = []

    def keep(definition: ToolDefinition) -> bool:
        seen.append(definition.name)
        return definition.name == "b"

    tools = _toolset(filter=keep, prefix="p_")._build(_listed("a", "b"))
    assert seen == ["a", "b"]
    assert [t.name for t in tools] == ["p_b"]


def test_result_text_joins_text_and_describes_other_content() -> None:
    result = mcp_types.CallToolResult(
        content=[
            mcp_types.TextContent(type="text", text="first"),
            mcp_types.ImageContent(type="image", data="aGk=", mime_type="image/png"),
            mcp_types.EmbeddedResource(
                type="resource",
                resource=mcp_types.TextResourceContents(uri="file:///a.txt", text="inside"),
            ),
            mcp_types.TextContent(type="text", text="last"),
        ]
    )
    assert result_text(result) == "first\n[image content, image/png]\ninside\nlast"


def test_result_text_falls_back_to_structured_content() -> None:
    result = mcp_types.CallToolResult(content=[], structured_content={"total": 3})
    assert result_text(result) == '{"total": 3}'
    assert result_text(mcp_types.CallToolResult(content=[])) == ""


@pytest.mark.parametrize("url", ["ftp://host/mcp", "not a url", "http:///mcp"])
def test_bad_urls_are_refused(url: str) -> None:
    with pytest.raises(ChainConfigurationError, match="http"):
        McpToolset.http(url)


def test_the_http_repr_and_name_hide_credentials() -> None:
    toolset = McpToolset.http(
        "https://user:pw-secret@example.test:8443/mcp?token=q-secret",
        headers={"Authorization": "Bearer h-secret"},
    )
    assert toolset.name == "https://example.test:8443/mcp"
    assert "secret" not in repr(toolset)


def test_without_the_sdk_the_error_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "mcp", None)  # what a missing package looks like
    with pytest.raises(ImportError, match=r"install the 'mcp' extra"):
        McpToolset.stdio("server")
    with pytest.raises(ImportError, match=r"advisorchain\[mcp\]"):
        McpToolset.http("http://127.0.0.1:1/mcp")


@pytest.mark.parametrize(
    ("annotations", "expected"),
    [
        (None, (False, False)),
        (mcp_types.ToolAnnotations(), (False, False)),
        (mcp_types.ToolAnnotations(read_only_hint=True), (True, False)),
        (mcp_types.ToolAnnotations(idempotent_hint=True), (False, True)),
        (mcp_types.ToolAnnotations(read_only_hint=True, idempotent_hint=True), (True, True)),
        (mcp_types.ToolAnnotations(read_only_hint=False, idempotent_hint=False), (False, False)),
    ],
)
def test_effects_come_from_the_server_annotations(
    annotations: mcp_types.ToolAnnotations | None, expected: tuple[bool, bool]
) -> None:
    listed = mcp_types.Tool(name="t", description="t", input_schema=SCHEMA, annotations=annotations)
    assert tool_effects(listed) == expected
    [built] = _toolset()._build([listed])
    assert (built.read_only, built.idempotent) == expected
    assert not built.sequential


def test_changed_annotations_rebuild_the_tool() -> None:
    toolset = _toolset()
    [first] = toolset._build(_listed("t"))
    read_only = mcp_types.Tool(
        name="t",
        description="t tool",
        input_schema=SCHEMA,
        annotations=mcp_types.ToolAnnotations(read_only_hint=True),
    )
    [second] = toolset._build([read_only])
    assert not first.read_only and second.read_only
    [third] = toolset._build([read_only])
    assert third is second
