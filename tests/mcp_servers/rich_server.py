"""An MCP server (SDK's `MCPServer`, stdio) for what goes beyond text: images, audio,
resources, structured output, progress, logs, cancellation and annotated tools.

`wait_forever(marker)` writes `marker` (a file path) once it is cancelled, so a test can
see that the client sent `notifications/cancelled`.
"""

from __future__ import annotations

import base64
import warnings
from pathlib import Path
from typing import Any

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.utilities.types import Audio, Image
from mcp_types import (
    BlobResourceContents,
    CallToolResult,
    EmbeddedResource,
    ResourceLink,
    SamplingMessage,
    TextContent,
    ToolAnnotations,
)
from pydantic import BaseModel

warnings.simplefilter("ignore")  # the logging capability's deprecation: not this test's concern

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 8


class Person(BaseModel):
    name: str
    age: int


class Confirm(BaseModel):
    confirm: bool
    reason: str


class Total(BaseModel):
    total: int
    unit: str


def build_server() -> MCPServer:
    server = MCPServer("rich")

    @server.tool(structured_output=False)
    def picture() -> list[Any]:
        """A PNG image, a WAV sound and a caption."""
        return [Image(data=PNG, format="png"), Audio(data=b"RIFF", format="wav"), "a caption"]

    @server.tool(structured_output=False)
    def resources() -> list[Any]:
        """An embedded PDF blob and a link to another resource."""
        blob = BlobResourceContents(
            uri="demo://docs/report.pdf",
            mime_type="application/pdf",
            blob=base64.b64encode(b"%PDF-1.4").decode(),
        )
        return [
            EmbeddedResource(type="resource", resource=blob),
            ResourceLink(type="resource_link", uri="demo://docs/2", name="second"),
        ]

    @server.tool()
    def count(a: int, b: int) -> Total:
        """Add, as structured output."""
        return Total(total=a + b, unit="items")

    @server.tool()
    def bad_count() -> CallToolResult:
        """Structured output that does not match the tool's output schema."""
        return CallToolResult(
            content=[TextContent(type="text", text="not a number")],
            structured_content={"total": "many"},
        )

    @server.tool()
    async def slow(steps: int, ctx: Context) -> str:
        """Report progress `steps` times (pausing between), then answer."""
        for step in range(1, steps + 1):
            await ctx.report_progress(step, steps, f"step {step}")
            await anyio.sleep(0.3)
        return f"done after {steps} steps"

    @server.tool()
    async def wait_forever(marker: str, ctx: Context) -> str:
        """Report progress once, then wait until cancelled (then write `marker`)."""
        await ctx.report_progress(0, None, "waiting")
        try:
            await anyio.sleep_forever()
        finally:
            Path(marker).write_text("cancelled")  # noqa: ASYNC240 - cancelled: cannot await
        return "never"

    @server.tool()
    async def shout(text: str, ctx: Context) -> str:
        """Send `text` as a warning log message, then answer."""
        await ctx.log("warning", text, logger_name="shouter")
        await ctx.log("debug", "quiet detail")
        return "shouted"

    @server.tool(annotations=ToolAnnotations(destructive_hint=True))
    def drop_table(table: str) -> str:
        """Delete a table (destructive)."""
        return f"dropped {table}"

    @server.tool(annotations=ToolAnnotations(read_only_hint=True, idempotent_hint=True))
    def lookup(key: str) -> str:
        """Look a key up."""
        return f"value of {key}"

    @server.resource(
        "demo://readme", name="readme", description="The readme.", mime_type="text/plain"
    )
    def readme() -> str:
        return "Read me first."

    @server.resource("demo://logo", name="logo", mime_type="image/png")
    def logo() -> bytes:
        return PNG

    @server.prompt()
    def review(code: str) -> str:
        """Review a piece of code."""
        return f"Please review: {code}"

    @server.tool()
    async def publish(ctx: Context) -> str:
        """Add a resource and a prompt, and tell the client both lists changed."""

        def news() -> str:
            return "Fresh news."

        server.resource("demo://news", name="news", mime_type="text/plain")(news)

        def summary(text: str) -> str:
            return f"Summarize: {text}"

        server.prompt(name="summarize", description="Summarize a text.")(summary)
        await ctx.session.send_resource_list_changed()
        await ctx.session.send_prompt_list_changed()
        return "published"

    @server.tool()
    async def ask_model(question: str, ctx: Context) -> str:
        """Ask the client's model (sampling) and return its answer."""
        result = await ctx.session.create_message(
            messages=[
                SamplingMessage(role="user", content=TextContent(type="text", text=question))
            ],
            max_tokens=5000,
            system_prompt="Be brief.",
        )
        content = result.content
        return f"model said: {getattr(content, 'text', content)}"

    @server.tool()
    async def ask_user(ctx: Context) -> str:
        """Ask the user for a name and an age (elicitation)."""
        answer = await ctx.elicit("Who are you?", schema=Person)
        if answer.action != "accept":
            return f"user chose {answer.action}"
        return f"hello {answer.data.name}, {answer.data.age}"

    runs = {"confirm_drop": 0}

    @server.tool()
    async def confirm_drop(table: str, ctx: Context) -> str:
        """Ask the user to confirm (elicitation), then drop `table`; counts its runs."""
        runs["confirm_drop"] += 1
        run = runs["confirm_drop"]
        answer = await ctx.elicit(f"Drop the table {table}?", schema=Confirm)
        if answer.action != "accept":
            return f"not dropped: {answer.action} (run {run})"
        if not answer.data.confirm:
            return f"kept {table} (run {run})"
        return f"dropped {table}: {answer.data.reason} (run {run})"

    bad = server._tool_manager.get_tool("bad_count")
    assert bad is not None
    bad.fn_metadata.output_schema = Total.model_json_schema()
    return server


if __name__ == "__main__":
    build_server().run("stdio")
