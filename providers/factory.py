"""`model_from_name`: a chat model from a short name, for command lines and config files.

Names are `<prefix>:<model>`; each prefix is an entry of a registry that any package can
join with `register_provider`. The built-in prefixes are `openai`, `anthropic`,
`openai-responses`, `gemini`, `openai-compatible` and `scripted`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..core.errors import ChainConfigurationError
from ..core.messages import UserMessage
from ..core.model import ChatModel
from ..core.request import ChatRequest

ProviderFactory = Callable[..., ChatModel]
"""Builds a chat model: `factory(model, **options)`, `model` being the text after the
prefix's colon (the empty string for a bare `prefix`)."""


@dataclass(frozen=True, slots=True)
class _Entry:
    factory: ProviderFactory
    form: str
    model_required: bool


_REGISTRY: dict[str, _Entry] = {}


def register_provider(
    prefix: str,
    factory: ProviderFactory,
    *,
    form: str | None = None,
    model_required: bool = True,
    replace: bool = False,
) -> None:
    """Make `model_from_name("<prefix>:<model>", **options)` return
    `factory(model, **options)`.

    `form` is how the name is written, for error messages (default `<prefix>:<model>`).
    With `model_required` (the default) a name without a model (`"prefix"`, `"prefix:"`)
    is refused before `factory` is called; a factory refusing its model itself should
    raise `ChainConfigurationError`. A prefix already registered raises
    `ChainConfigurationError` unless `replace`.
    """
    if not prefix or ":" in prefix or prefix != prefix.strip():
        raise ChainConfigurationError(f"a provider prefix is a word without colons, not {prefix!r}")
    if prefix in _REGISTRY and not replace:
        raise ChainConfigurationError(
            f"provider prefix {prefix!r} is already registered (pass replace=True to replace it)"
        )
    _REGISTRY[prefix] = _Entry(factory, form or f"{prefix}:<model>", model_required)


def registered_providers() -> tuple[str, ...]:
    """The prefixes `model_from_name` knows, in the order they were registered."""
    return tuple(_REGISTRY)


def _forms() -> str:
    forms = [f'"{entry.form}"' for entry in _REGISTRY.values()]
    return ", ".join(forms[:-1]) + f" or {forms[-1]}" if len(forms) > 1 else "".join(forms)


def model_from_name(name: str, **options: Any) -> ChatModel:
    """The chat model `name` designates; `options` go to its factory (its constructor).

    `name` is split at its first colon into a registered prefix and a model (which may
    itself contain colons). The built-in prefixes:

    - `openai:<model>`: `OpenAIChatModel` (key from `OPENAI_API_KEY`).
    - `anthropic:<model>`: `AnthropicChatModel` (key from `ANTHROPIC_API_KEY`).
    - `openai-responses:<model>`: `OpenAIResponsesChatModel`, OpenAI's Responses API
      (key from `OPENAI_API_KEY`).
    - `gemini:<model>`: `GeminiChatModel`, the Gemini API (key from `GEMINI_API_KEY`).
    - `openai-compatible:<base_url>:<model>`: `OpenAIChatModel` at `base_url` (vLLM,
      llama.cpp, Ollama's `/v1`, ...). The base URL ends at the first colon after its
      host, port and path, so the model name may contain colons.
    - `scripted`: a `ScriptedChatModel`; pass `script=`, or it echoes the user's message.

    An unknown prefix, or a missing model, raises `ChainConfigurationError` listing the
    forms known.
    """
    if not isinstance(name, str):
        raise TypeError(f"a model name is a string such as 'openai:gpt-4.1', not {name!r:.80}")
    prefix, _, rest = name.strip().partition(":")
    entry = _REGISTRY.get(prefix)
    if entry is None or (entry.model_required and not rest):
        raise ChainConfigurationError(f"unknown model name {name!r}: expected {_forms()}")
    return entry.factory(rest, **options)


def _openai(model: str, **options: Any) -> ChatModel:
    from .openai import OpenAIChatModel

    return OpenAIChatModel(model, **options)


def _anthropic(model: str, **options: Any) -> ChatModel:
    from .anthropic import AnthropicChatModel

    return AnthropicChatModel(model, **options)


def _openai_responses(model: str, **options: Any) -> ChatModel:
    from .openai_responses import OpenAIResponsesChatModel

    return OpenAIResponsesChatModel(model, **options)


def _gemini(model: str, **options: Any) -> ChatModel:
    from .gemini import GeminiChatModel

    return GeminiChatModel(model, **options)


# scheme://host[:port][/path] then ":" and the model; the port is digits, a path has no
# colon, so a model name may contain colons ("llama3.1:8b"). The port is possessive:
# "http://host:8080/v1" alone is an error, not the model "8080/v1" at "http://host".
_COMPATIBLE = re.compile(
    r"(?P<base>https?://(?:\[[^\]/]*\]|[^/:\[\]]+)(?::\d+)?+(?:/[^:]*)?):(?P<model>.+)",
    re.IGNORECASE,
)


def _openai_compatible(rest: str, **options: Any) -> ChatModel:
    from .openai import OpenAIChatModel

    match = _COMPATIBLE.fullmatch(rest)
    if match is None:
        raise ChainConfigurationError(
            f"cannot read {'openai-compatible:' + rest!r}: expected "
            "openai-compatible:<base_url>:<model> with an http(s) base URL"
        )
    return OpenAIChatModel(match["model"], base_url=match["base"], **options)


def _echo(request: ChatRequest) -> str:
    for message in reversed(request.messages):
        if isinstance(message, UserMessage):
            return message.text
    return ""


def _scripted(rest: str, **options: Any) -> ChatModel:
    from .scripted import ScriptedChatModel

    if rest:
        raise ChainConfigurationError(
            f"unknown model name {'scripted:' + rest!r}: expected {_forms()}"
        )
    script = options.pop("script", _echo)
    return ScriptedChatModel(script, **options)


register_provider("openai", _openai)
register_provider("anthropic", _anthropic)
register_provider("openai-responses", _openai_responses)
register_provider("gemini", _gemini)
register_provider(
    "openai-compatible",
    _openai_compatible,
    form="openai-compatible:<base_url>:<model>",
)
register_provider("scripted", _scripted, form="scripted", model_required=False)


__all__ = ["ProviderFactory", "model_from_name", "register_provider", "registered_providers"]
