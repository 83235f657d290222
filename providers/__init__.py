"""Chat models: the innermost step of a chain."""

from ..core.assembly import StreamAssembler
from ..core.exports import publish
from ..core.options import NativeToolSearch, OutputSchema
from .anthropic import AnthropicChatModel, AnthropicWire
from .errors import (
    AuthenticationError,
    BadRequestError,
    InvalidAPIKeyError,
    InvalidResponseError,
    OutputSchemaRefusedError,
    ProviderError,
    ProviderRequestError,
    ProviderStreamError,
    ProviderTimeoutError,
    ProviderUnavailableError,
    RateLimitError,
)
from .factory import model_from_name, register_provider
from .fallback import FallbackAfterEffectsError, FallbackModel
from .gemini import GeminiChatModel, GeminiWire
from .http.connection import Connection, ConnectionOptions, OfficialAPI
from .http.retry import RetryPolicy
from .http_model import HTTPChatModel
from .llamacpp import LlamaCppChatModel
from .openai import OpenAIChatModel, OpenAIChatWire
from .openai_responses import OpenAIResponsesChatModel, OpenAIResponsesWire
from .scripted import Reply, ScriptedChatModel, ScriptExhaustedError
from .text_tool_calls import TextToolCallModel
from .wire import StreamReader, WireCall, WireFormat

__all__ = [
    "AnthropicChatModel",
    "AnthropicWire",
    "AuthenticationError",
    "BadRequestError",
    "Connection",
    "ConnectionOptions",
    "FallbackAfterEffectsError",
    "FallbackModel",
    "GeminiChatModel",
    "GeminiWire",
    "HTTPChatModel",
    "InvalidAPIKeyError",
    "InvalidResponseError",
    "LlamaCppChatModel",
    "NativeToolSearch",
    "OfficialAPI",
    "OpenAIChatModel",
    "OpenAIChatWire",
    "OpenAIResponsesChatModel",
    "OpenAIResponsesWire",
    "OutputSchema",
    "OutputSchemaRefusedError",
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
    "StreamReader",
    "TextToolCallModel",
    "WireCall",
    "WireFormat",
    "model_from_name",
    "register_provider",
]

publish(globals())
del publish
