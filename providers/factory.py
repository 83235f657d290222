"""`model_from_name`: a chat model from a short name, for command lines and config files."""

from __future__ import annotations

import re
from typing import Any

from ..core.errors import ChainConfigurationError
from ..core.messages import UserMessage
from ..core.model import ChatModel
from ..core.request import ChatRequest

_FORMS = (
    '"openai:<model>", "anthropic:<model>", "openai-compatible:<base_url>:<model>" '
    '(e.g. "openai-compatible:http://localhost:11434/v1:llama3.1:8b") or "scripted"'
)

# scheme://host[:port][/path] then ":" and the model; the port is digits, a path has no
# colon, so a model name may contain colons ("llama3.1:8b"). The port is possessive:
# "http://host:8080/v1" alone is an error, not the model "8080/v1" at "http://host".
_COMPATIBLE = re.compile(
    r"(?P<base>https?://(?:\[[^\]/]*\]|[^/:\[\]]+)(?::\d+)?+(?:/[^:]*)?):(?P<model>.+)",
    re.IGNORECASE,
)


def _echo(request: ChatRequest) -> str:
    for message in reversed(request.messages):
        if isinstance(message, UserMessage):
            return message.text
    return ""


def model_from_name(name: str, **options: Any) -> ChatModel:
    """The chat model `name` designates; `options` go to its constructor.

    - `openai:<model>`: `OpenAIChatModel` (key from `OPENAI_API_KEY`).
    - `anthropic:<model>`: `AnthropicChatModel` (key from `ANTHROPIC_API_KEY`).
    - `openai-compatible:<base_url>:<model>`: `OpenAIChatModel` at `base_url` (vLLM,
      llama.cpp, Ollama's `/v1`, ...). The base URL ends at the first colon after its
      host, port and path, so the model name may contain colons.
    - `scripted`: a `ScriptedChatModel`; pass `script=`, or it echoes the user's message.
    """
    from .anthropic import AnthropicChatModel
    from .openai import OpenAIChatModel
    from .scripted import ScriptedChatModel

    provider, _, rest = name.strip().partition(":")
    if provider == "scripted" and not rest:
        script = options.pop("script", _echo)
        return ScriptedChatModel(script, **options)
    if provider in ("openai", "anthropic") and rest:
        cls = OpenAIChatModel if provider == "openai" else AnthropicChatModel
        model: ChatModel = cls(rest, **options)
        return model
    if provider == "openai-compatible":
        match = _COMPATIBLE.fullmatch(rest)
        if match is None:
            raise ChainConfigurationError(
                f"cannot read {name!r}: expected openai-compatible:<base_url>:<model> "
                "with an http(s) base URL"
            )
        return OpenAIChatModel(match["model"], base_url=match["base"], **options)
    raise ChainConfigurationError(f"unknown model name {name!r}: expected {_FORMS}")
