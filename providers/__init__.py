"""Chat models: the innermost step of a chain."""

from .scripted import Reply, ScriptedChatModel

__all__ = ["Reply", "ScriptedChatModel"]
