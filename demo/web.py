"""`advisorchain demo --web`: the order assistant in a browser page, over AG-UI.

One ASGI app: `GET /` is the page (plain HTML and JavaScript, no build step), `POST
/agui` the demo chain behind `AgUiApp`. Approvals are deferred: a cancellation ends the
run with an AG-UI interrupt, the page shows approve / edit / reject, and its answer
resumes the turn. The session's tenant and customer are the server's tool context.
"""

from __future__ import annotations

from typing import Any

from ..advisors.approval import DeferredApprover, InMemoryApprovalStore
from ..core.extras import install_hint
from ..core.model import ChatModel, model_name
from ..core.options import ChatOptions
from ..ui import AgUiApp, Receive, Scope, Send, UiLimits, serve_lifespan
from .app import DemoOptions
from .catalog import business_catalog
from .chain import SMALL_MODEL_SYSTEM_PROMPT, SYSTEM_PROMPT, build_chain
from .orders import OrderService
from .tools import OrderTools
from .web_page import PAGE

__all__ = ["WebDemo", "serve_web"]


class WebDemo:
    """The demo page and its AG-UI endpoint, as one ASGI app."""

    def __init__(
        self,
        model: ChatModel,
        options: DemoOptions | None = None,
        *,
        service: OrderService | None = None,
        allowed_origins: tuple[str, ...] = (),
    ) -> None:
        options = options or DemoOptions()
        tools = OrderTools(service or OrderService.sample())
        small_model = getattr(model, "provider_name", None) == "llama.cpp"
        chain = build_chain(
            model,
            tools=tools,
            approver=DeferredApprover(),
            catalog=business_catalog(tools.check_order),
            max_rounds=1 if small_model else 3,
            small_model=small_model,
            options=ChatOptions(temperature=0, max_tokens=options.max_tokens),
            approval_store=InMemoryApprovalStore(),
        )
        self.agui = AgUiApp(
            chain,
            tools=tools.cancellation_tools if options.may_cancel else (),
            tool_context={"tenant_id": options.tenant_id, "user_id": options.user_id},
            system_prompt=SMALL_MODEL_SYSTEM_PROMPT if small_model else SYSTEM_PROMPT,
            limits=UiLimits(
                max_body_bytes=200_000, max_messages=60, allowed_origins=allowed_origins
            ),
        )
        self.model_name = model_name(model) or type(model).__name__
        self._page = PAGE.replace("{{MODEL}}", _escape(self.model_name)).encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await serve_lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        path = scope.get("path")
        if path == "/agui":
            await self.agui(scope, receive, send)
            return
        if path == "/" and scope.get("method") in ("GET", "HEAD"):
            await _respond(send, 200, "text/html; charset=utf-8", self._page)
            return
        await _respond(send, 404, "text/plain; charset=utf-8", b"not found")


async def _respond(send: Send, status: int, content_type: str, body: bytes) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", content_type.encode()),
                (b"content-length", str(len(body)).encode()),
                (b"x-content-type-options", b"nosniff"),
                (b"content-security-policy", _CSP),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


_CSP = (
    b"default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
    b"connect-src 'self'; img-src 'self' data:"
)


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


async def serve_web(
    model: ChatModel, options: DemoOptions, *, host: str = "127.0.0.1", port: int = 8000
) -> None:
    """Serve the demo page on `host:port` until interrupted (uvicorn, the `ui` extra), in
    this event loop (asyncio), where `model` was loaded."""
    try:
        import uvicorn
    except ImportError:
        raise ImportError(f"`demo --web` needs uvicorn: {install_hint('ui')}") from None
    app: Any = WebDemo(model, options)
    print(f"advisorchain demo: open http://{host}:{port}/ (model: {app.model_name}); Ctrl-C ends")
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on")
    await uvicorn.Server(config).serve()
