"""Every path by which text reaches the caller, other than the transcript (redaction of the
transcript is `RedactionAdvisor`'s, tested with it): the reprs of the objects an app
prints or logs, the errors it catches and the log records the library writes. None may
show an API key, a password in a URL, a header value or a tool-context value."""

from __future__ import annotations

import logging
from typing import Any

import httpx
import pytest

from advisorchain import (
    AdvisorChainError,
    Chain,
    ChatRequest,
    LoggingAdvisor,
    ToolCall,
    ToolCallingAdvisor,
    ToolContext,
    UserMessage,
    tool,
)
from advisorchain.core.invocation import ToolInvocation
from advisorchain.providers import (
    AnthropicChatModel,
    GeminiChatModel,
    OpenAIChatModel,
    OpenAIResponsesChatModel,
    ScriptedChatModel,
)
from advisorchain.toolsets import McpToolset

from .support import KEY, dump_findings, exception_chain_text
from provider_support import FAST_RETRY

PASSWORD = "pw-adversarial-9876543210SECRET"
HEADER = "hv-adversarial-5555555555SECRET"
CONTEXT = "ctx-adversarial-4444444444SECRET"
SECRETS = (KEY, PASSWORD, HEADER, CONTEXT)

MODELS: dict[str, Any] = {
    "openai": OpenAIChatModel,
    "anthropic": AnthropicChatModel,
    "responses": OpenAIResponsesChatModel,
    "gemini": GeminiChatModel,
}


def _leaks(text: str) -> list[str]:
    return [s[:6] for s in SECRETS if s in text]


def _model(kind: str, base_url: str, **kw: Any) -> Any:
    return MODELS[kind](
        "m",
        api_key=KEY,
        base_url=base_url,
        headers={"x-tenant-token": HEADER},
        retry_policy=FAST_RETRY,
        **kw,
    )


def test_reprs_show_no_secret() -> None:
    found: dict[str, str] = {}
    cases = 0
    for kind in MODELS:
        for url in (f"https://user:{PASSWORD}@gateway.test/v1", "https://gateway.test/v1"):
            model = _model(kind, url)
            cases += 1
            leaked = _leaks(f"{model!r} {model!s}")
            if leaked:
                found[f"{kind} model ({url.split('@')[0][:14]})"] = repr(model)
    context = ToolContext({"api_key": CONTEXT}, call_id="c1", tool_name="t")
    request = ChatRequest(messages=(UserMessage(content="hi"),), tool_context={"k": CONTEXT})

    @tool
    def look(q: str) -> str:
        """Look."""
        return q

    invocation = ToolInvocation(
        tool=look,
        call=ToolCall.from_arguments("look", {"q": "x"}, id="c1"),
        arguments={"q": "x"},
        context=context,
        request=request,
    )
    mcp = McpToolset.http(
        f"https://user:{PASSWORD}@mcp.test/mcp", headers={"Authorization": f"Bearer {HEADER}"}
    )
    for name, value in {
        "ToolContext": context,
        "ChatRequest": request,
        "ToolInvocation": invocation,
        "McpToolset": mcp,
    }.items():
        cases += 1
        if _leaks(f"{value!r} {value!s}"):
            found[name] = repr(value)[:200]
    dump_findings("reprs", found, cases)
    assert found == {}, found


@pytest.mark.anyio
@pytest.mark.parametrize("path", ["call", "stream"])
async def test_errors_and_logs_of_a_failed_turn_show_no_secret(
    path: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A gateway that cannot be reached, one that answers 500 quoting everything it got,
    and one whose URL is invalid: the error the caller catches, its causes and every log
    record of the turn (DEBUG, every logger) are free of the key, the URL's password,
    the header value and the tool context."""

    def echo(request: httpx.Request) -> httpx.Response:
        quoted = f"{request.url} {dict(request.headers)} {request.content.decode()}"
        return httpx.Response(500, json={"error": {"message": quoted}})

    clients = {
        "unreachable": httpx.AsyncClient(transport=httpx.MockTransport(_refuse)),
        "echoing 500": httpx.AsyncClient(transport=httpx.MockTransport(echo)),
    }
    found: dict[str, str] = {}
    cases = 0
    with caplog.at_level(logging.DEBUG):
        for kind in MODELS:
            for name, client in clients.items():
                cases += 1
                model = _model(kind, f"https://user:{PASSWORD}@gateway.test/v1", http_client=client)
                chain = Chain([LoggingAdvisor(), ToolCallingAdvisor()], model=model)
                try:
                    if path == "call":
                        await chain.call("hi", tool_context={"api_key": CONTEXT})
                    else:
                        [e async for e in chain.stream("hi", tool_context={"api_key": CONTEXT})]
                except AdvisorChainError as exc:
                    leaked = _leaks(exception_chain_text(exc))
                    if leaked:
                        found[f"{kind} {name}: error"] = str(leaked)
                else:
                    found[f"{kind} {name}"] = "no error"
    # httpx's own INFO record names each request's URL as given, user information
    # included: an app that puts a password in a base URL must not log httpx at INFO.
    ours = [r for r in caplog.records if r.name.startswith("advisorchain")]
    logged = "\n".join(f"{r.getMessage()} {r.__dict__}" for r in ours)
    if _leaks(logged):
        found["logs"] = str(_leaks(logged))
    dump_findings(f"errors and logs ({path})", found, cases + 1)
    assert found == {}, found


def _refuse(request: httpx.Request) -> httpx.Response:
    raise httpx.ConnectError(f"connection refused: {request.url}", request=request)


@pytest.mark.anyio
@pytest.mark.parametrize("path", ["call", "stream"])
async def test_a_tools_context_never_reaches_logs(
    path: str, caplog: pytest.LogCaptureFixture
) -> None:
    @tool
    def whoami(context: ToolContext) -> str:
        """Who is asking."""
        return "someone"

    model = ScriptedChatModel([ToolCall.from_arguments("whoami", {}, id="c1"), "done"])
    chain = Chain([LoggingAdvisor(), ToolCallingAdvisor()], model=model, tools=[whoami])
    with caplog.at_level(logging.DEBUG):
        if path == "call":
            await chain.call("hi", tool_context={"api_key": CONTEXT})
        else:
            [e async for e in chain.stream("hi", tool_context={"api_key": CONTEXT})]
    logged = "\n".join(f"{r.getMessage()} {r.__dict__}" for r in caplog.records)
    assert _leaks(logged) == []
