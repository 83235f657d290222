"""The chain behind the UI protocols front ends speak: AG-UI 1.0 and the Vercel AI SDK's
UI Message Stream v1, as plain ASGI apps (no web framework needed; `uvicorn`, from the
`ui` extra, or any ASGI server runs them)."""

from ._http import ASGIApp, Receive, RequestRejected, Scope, Send, UiLimits, serve_lifespan
from .agui import AgUiApp, from_agui_messages, to_agui_messages
from .approvals import DecisionError, DeferredTurns, WaitingCall
from .vercel import VercelChatApp, from_ui_messages, to_ui_messages

__all__ = [
    "ASGIApp",
    "AgUiApp",
    "DecisionError",
    "DeferredTurns",
    "Receive",
    "RequestRejected",
    "Scope",
    "Send",
    "UiLimits",
    "VercelChatApp",
    "WaitingCall",
    "from_ui_messages",
    "to_ui_messages",
    "from_agui_messages",
    "to_agui_messages",
    "serve_lifespan",
]
