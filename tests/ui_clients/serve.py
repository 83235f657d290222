"""Serves the refund chain over both protocols on 127.0.0.1 for the node clients:
`/agui` (AgUiApp) and `/vercel` (VercelChatApp); `/agui-nested` and `/vercel-nested`
serve a chain whose refund waits inside a sub-agent; `/agui-hang` and `/vercel-hang` a
chain whose tool never ends, and `GET /hang` how many such calls started and how many
were cancelled. Usage: `python serve.py PORT`."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import uvicorn

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import anyio  # noqa: E402
from ui_support import (  # noqa: E402
    billing_chain,
    billing_tools,
    refund_chain,
    refund_reply,
    server_tools,
)

from advisorchain import Chain, ToolCall, ToolCallingAdvisor, tool  # noqa: E402
from advisorchain.providers import ScriptedChatModel  # noqa: E402
from advisorchain.ui import AgUiApp, VercelChatApp  # noqa: E402

hang = {"started": 0, "cancelled": 0}


@tool
async def wait_forever() -> str:
    """Never ends, unless cancelled."""
    hang["started"] += 1
    try:
        await anyio.sleep_forever()
    finally:
        hang["cancelled"] += 1
    return "unreachable"


def hang_chain() -> Chain:
    call = ToolCall.from_arguments("wait_forever", {}, id="call_wait")
    return Chain([ToolCallingAdvisor()], model=ScriptedChatModel(lambda request: call))


async def hang_state(send: Any) -> None:
    body = json.dumps(hang).encode()
    headers = [(b"content-type", b"application/json")]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})


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
        "/agui-hang": AgUiApp(hang_chain(), tools=[wait_forever]),
        "/vercel-hang": VercelChatApp(hang_chain(), tools=[wait_forever]),
    }

    async def app(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await apps["/agui"](scope, receive, send)
            return
        if scope["path"] == "/hang":
            await hang_state(send)
            return
        await apps[scope["path"]](scope, receive, send)

    return app


if __name__ == "__main__":
    uvicorn.run(build(), host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")
