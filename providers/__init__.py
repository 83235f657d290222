"""Chat models: the innermost step of a chain."""

from .llamacpp import LlamaCppChatModel
from .scripted import Reply, ScriptedChatModel

__all__ = ["LlamaCppChatModel", "Reply", "ScriptedChatModel"]
