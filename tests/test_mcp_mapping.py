"""McpToolset's mapping of MCP definitions and results, without a server."""

from __future__ import annotations

import base64
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

from advisorchain import DocumentPart, ImagePart, TextPart, ToolDefinition
from advisorchain.core.errors import ChainConfigurationError
from advisorchain.toolsets import ContentLimits, McpToolset
from advisorchain.toolsets.mcp import ToolHints, result_text, tool_effects, tool_hints
from advisorchain.toolsets.mcp._content import convert_result

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


PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\x00" * 8).decode()


def test_images_and_pdf_blobs_become_parts_other_binaries_a_note() -> None:
    result = mcp_types.CallToolResult(
        content=[
            mcp_types.TextContent(type="text", text="first"),
            mcp_types.ImageContent(type="image", data=PNG, mime_type="image/png"),
            mcp_types.AudioContent(type="audio", data="aGk=", mime_type="audio/wav"),
            mcp_types.EmbeddedResource(
                type="resource",
                resource=mcp_types.TextResourceContents(uri="file:///a.txt", text="inside"),
            ),
            mcp_types.EmbeddedResource(
                type="resource",
                resource=mcp_types.BlobResourceContents(
                    uri="demo://r/doc.pdf", blob="JVBERi0=", mime_type="application/pdf"
                ),
            ),
            mcp_types.EmbeddedResource(
                type="resource",
                resource=mcp_types.BlobResourceContents(
                    uri="demo://r/7", blob="AAEC", mime_type="application/octet-stream"
                ),
            ),
            mcp_types.ResourceLink(
                type="resource_link", uri="demo://r/8", name="eight", description="The 8th."
            ),
        ]
    )
    converted = convert_result(result)
    assert converted.raw is result
    kinds = [type(p).__name__ for p in converted.content]
    assert (
        kinds
        == ["TextPart", "ImagePart", "TextPart", "TextPart", "DocumentPart"] + ["TextPart"] * 2
    )
    image, document = converted.content[1], converted.content[4]
    assert isinstance(image, ImagePart) and image.data == base64.b64decode(PNG)
    assert image.media_type == "image/png"
    assert isinstance(document, DocumentPart) and document.data == b"%PDF-"
    assert document.name == "doc.pdf"
    assert converted.text.split("\n") == [
        "first",
        "[audio content, audio/wav, about 2 bytes: not sent to the model]",
        "inside",
        "[resource demo://r/7, application/octet-stream, about 3 bytes: not sent to the model]",
        "[resource link demo://r/8 (eight): The 8th.]",
    ]
    assert converted.for_model() == converted.content


def test_a_text_only_result_is_plain_text_for_the_model() -> None:
    result = mcp_types.CallToolResult(
        content=[
            mcp_types.TextContent(type="text", text="a"),
            mcp_types.TextContent(type="text", text="b"),
        ]
    )
    assert convert_result(result).for_model() == "a\nb"
    assert result_text(result) == "a\nb"


def test_results_are_bounded_in_blocks_text_and_bytes() -> None:
    limits = ContentLimits(max_blocks=3, max_text_chars=10, max_binary_bytes=20)
    many: list[mcp_types.ContentBlock] = [
        mcp_types.TextContent(type="text", text="x" * 6) for _ in range(5)
    ]
    converted = convert_result(mcp_types.CallToolResult(content=many), limits)
    assert converted.text.split("\n") == [
        "xxxxxx",
        "xxxx",
        "[2 characters omitted]",
        "[6 characters omitted]",
        "[2 more content blocks omitted]",
    ]
    images: list[mcp_types.ContentBlock] = [
        mcp_types.ImageContent(type="image", data=PNG, mime_type="image/png") for _ in range(2)
    ]
    converted = convert_result(mcp_types.CallToolResult(content=images), limits)
    assert isinstance(converted.content[0], ImagePart)
    assert converted.content[1] == TextPart(
        text="[image content, image/png, about 16 bytes: omitted, over the size limit]"
    )


def test_a_text_blob_is_read_as_text_when_it_is_utf8() -> None:
    def blob(data: bytes) -> mcp_types.EmbeddedResource:
        contents = mcp_types.BlobResourceContents(
            uri="demo://t", blob=base64.b64encode(data).decode(), mime_type="text/plain"
        )
        return mcp_types.EmbeddedResource(type="resource", resource=contents)

    converted = convert_result(mcp_types.CallToolResult(content=[blob(b"caf\xc3\xa9")]))
    assert converted.text == "café"
    converted = convert_result(mcp_types.CallToolResult(content=[blob(b"\xff\xfe")]))
    assert converted.text == "[resource demo://t, text/plain, about 2 bytes: not sent to the model]"


def test_invalid_base64_is_a_note_not_a_crash() -> None:
    bad = mcp_types.ImageContent(type="image", data="not base64!", mime_type="image/png")
    converted = convert_result(mcp_types.CallToolResult(content=[bad]))
    assert converted.text == "[image content, image/png: the server sent invalid base64]"


def test_structured_content_is_kept_and_is_the_text_when_there_is_no_content() -> None:
    result = mcp_types.CallToolResult(content=[], structured_content={"total": 3})
    converted = convert_result(result)
    assert converted.structured_content == {"total": 3}
    assert converted.text == '{"total": 3}'
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


def test_the_url_password_and_headers_never_reach_the_model_in_server_text() -> None:
    toolset = McpToolset.http(
        "https://user:url-password-1234@example.test/mcp",
        headers={"Authorization": "Bearer header-token-5678"},
    )
    text = toolset._server_text("rejected url-password-1234 and header-token-5678 at /srv/x")
    assert "url-password-1234" not in text
    assert "header-token-5678" not in text
    assert "/srv/x" in text  # the server's paths are kept


def test_without_the_sdk_the_error_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "mcp", None)  # what a missing package looks like
    with pytest.raises(ImportError, match=r"install the 'mcp' extra"):
        McpToolset.stdio("server")
    with pytest.raises(ImportError, match=r"mcp>=2\.3,<3.*pip install '\.\[mcp\]'"):
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


def _annotated(**hints: bool) -> mcp_types.Tool:
    return mcp_types.Tool(
        name="t",
        description="t",
        input_schema=SCHEMA,
        annotations=mcp_types.ToolAnnotations.model_validate(hints),
    )


@pytest.mark.parametrize(
    ("hints", "expected"),
    [
        ({}, ToolHints()),
        ({"destructive_hint": True}, ToolHints(destructive=True)),
        # Hints add caution, never remove it: a destructive tool is never read-only.
        pytest.param(
            {"destructive_hint": True, "read_only_hint": True},
            ToolHints(destructive=True),
            marks=pytest.mark.issue32(4),
        ),
        ({"read_only_hint": True, "idempotent_hint": True}, ToolHints(True, False, True)),
        ({"open_world_hint": True}, ToolHints(open_world=True)),
    ],
)
def test_hints_read_destructive_over_read_only(hints: dict[str, bool], expected: ToolHints) -> None:
    assert tool_hints(_annotated(**hints)) == expected


@pytest.mark.parametrize(
    ("policy", "needs_approval"),
    [("destructive", True), (False, False), (True, True), ({"other"}, False)],
)
def test_destructive_tools_need_approval_unless_overridden(
    policy: Any, needs_approval: bool
) -> None:
    [tool] = _toolset(requires_approval=policy)._build([_annotated(destructive_hint=True)])
    assert tool.requires_approval is needs_approval
    assert tool.metadata["mcp_destructive"] is True


def test_by_default_only_destructive_tools_need_approval() -> None:
    toolset = _toolset()
    [plain] = toolset._build(_listed("plain"))
    [safe] = toolset._build([_annotated(destructive_hint=False)])
    assert not plain.requires_approval and not safe.requires_approval


def test_an_unknown_policy_string_is_refused() -> None:
    with pytest.raises(ChainConfigurationError, match="destructive"):
        _toolset(requires_approval="all")
