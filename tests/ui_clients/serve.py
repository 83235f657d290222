"""Serves the refund chain over both protocols on 127.0.0.1 for the node clients:
`/agui` (AgUiApp) and `/vercel` (VercelChatApp); `/agui-nested` and `/vercel-nested`
serve a chain whose refund waits inside a sub-agent. Usage: `python serve.py PORT`."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import uvicorn

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ui_support import (  # noqa: E402
    billing_chain,
    billing_tools,
    refund_chain,
    refund_reply,
    server_tools,
)

from advisorchain.ui import AgUiApp, VercelChatApp  # noqa: E402


def build() -> Any:
    """One ASGI app routing by path; each protocol has its own chain, whose scripted model
    answers from the transcript (any number of turns)."""
    agui_chain, _ = refund_chain(refund_reply)
    vercel_chain, _ = refund_chain(refund_reply)
    apps: dict[str, Any] = {
        "/agui": AgUiApp(agui_chain, tools=server_tools(), tool_context={"tenant": "acme"}),
        "/vercel": VercelChatApp(
            vercel_chain, tools=server_tools(), tool_context={"tenant": "acme"}
        ),
        "/agui-nested": AgUiApp(billing_chain(), tools=billing_tools()),
        "/vercel-nested": VercelChatApp(billing_chain(), tools=billing_tools()),
    }

    async def app(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await apps["/agui"](scope, receive, send)
            return
        await apps[scope["path"]](scope, receive, send)

    return app


if __name__ == "__main__":
    uvicorn.run(build(), host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")
