"""The chain behind the UI protocols front ends speak: AG-UI 1.0 and the Vercel AI SDK's
UI Message Stream v1, as plain ASGI apps (no web framework needed; `uvicorn`, from the
`ui` extra, or any ASGI server runs them)."""

from ._http import RequestRejected, UiLimits
from .agui import AgUiApp, from_agui_messages, to_agui_messages
from .approvals import DecisionError, DeferredTurns, WaitingCall
from .vercel import VercelChatApp, from_ui_messages, to_ui_messages

__all__ = [
    "AgUiApp",
    "DecisionError",
    "DeferredTurns",
    "RequestRejected",
    "UiLimits",
    "VercelChatApp",
    "WaitingCall",
    "from_ui_messages",
    "to_ui_messages",
    "from_agui_messages",
    "to_agui_messages",
]
