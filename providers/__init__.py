"""Chat models: the innermost step of a chain."""

from ..core._assembly import StreamAssembler
from ..core._exports import publish
from ..core.errors import ScriptExhaustedError
from ..core.options import OutputSchema
from ..providers.text_tool_calls import TextToolCallModel
from .anthropic import AnthropicChatModel
from .errors import (
    AuthenticationError,
    BadRequestError,
    InvalidAPIKeyError,
    InvalidResponseError,
    ProviderError,
    ProviderRequestError,
    ProviderStreamError,
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
    "InvalidAPIKeyError",
    "InvalidResponseError",
    "LlamaCppChatModel",
    "OpenAIChatModel",
    "OutputSchema",
    "ProviderError",
    "ProviderRequestError",
    "ProviderStreamError",
    "ProviderTimeoutError",
    "ProviderUnavailableError",
    "RateLimitError",
    "Reply",
    "RetryPolicy",
    "ScriptExhaustedError",
    "ScriptedChatModel",
    "StreamAssembler",
    "TextToolCallModel",
    "model_from_name",
]

publish(globals())
del publish
