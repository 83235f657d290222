"""Chat models: the innermost step of a chain."""

from .anthropic import AnthropicChatModel
from .errors import (
    AuthenticationError,
    BadRequestError,
    InvalidResponseError,
    ProviderError,
    ProviderTimeoutError,
    ProviderUnavailableError,
    RateLimitError,
)
from .factory import model_from_name
from .fallback import FallbackModel
from .http import RetryPolicy
from .llamacpp import LlamaCppChatModel
from .openai import OpenAIChatModel
from .scripted import Reply, ScriptedChatModel

__all__ = [
    "AnthropicChatModel",
    "AuthenticationError",
    "BadRequestError",
    "FallbackModel",
    "InvalidResponseError",
    "LlamaCppChatModel",
    "OpenAIChatModel",
    "ProviderError",
    "ProviderTimeoutError",
    "ProviderUnavailableError",
    "RateLimitError",
    "Reply",
    "RetryPolicy",
    "ScriptedChatModel",
    "model_from_name",
]
