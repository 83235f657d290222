"""`--model`: which chat model the demo runs on."""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.model import ChatModel
from ..providers import TextToolCallModel
from .scripted import scripted_order_model

MODEL_HELP = (
    "local (default: Qwen2.5-Coder-0.5B on the CPU, needs the 'local' extra), local:1.5b "
    "(Qwen2.5-Coder-1.5B, also needs the 'local-1.5b' extra), scripted "
    "(instant, no model), openai:<name>, anthropic:<name>, openai-compatible:<base_url>:<name>"
)


class ModelOptionError(ValueError):
    """A `--model` value the demo cannot use; the message says what to do."""


@dataclass(frozen=True, slots=True)
class ModelSpec:
    """A parsed `--model` value."""

    kind: str
    name: str = ""
    base_url: str = ""


def parse_model_option(value: str) -> ModelSpec:
    """Parse `local`, `local:<size>` (`0.5b`, `1.5b`), `scripted`, `openai:<name>`,
    `anthropic:<name>` or `openai-compatible:<base_url>:<name>` (the base URL may contain
    colons)."""
    from ..providers.local.weights import LOCAL_MODELS

    if value in ("local", "scripted"):
        return ModelSpec(value)
    kind, _, rest = value.partition(":")
    if kind == "local" and rest.lower() in LOCAL_MODELS:
        return ModelSpec(kind, name=rest.lower())
    if kind in ("openai", "anthropic") and rest:
        return ModelSpec(kind, name=rest)
    if kind == "openai-compatible":
        base_url, _, name = rest.rpartition(":")
        if base_url.startswith(("http://", "https://")) and name and "/" not in name:
            return ModelSpec(kind, name=name, base_url=base_url)
    raise ModelOptionError(f"unknown --model {value!r}; use {MODEL_HELP}")


def _providers_attribute(name: str) -> Any:
    providers = importlib.import_module("advisorchain.providers")
    found = getattr(providers, name, None)
    if found is None:
        raise ModelOptionError(
            f"this build of advisorchain has no {name} yet; use --model local or scripted"
        )
    return found


def create_model(spec: ModelSpec, *, local_model_path: Path | None = None) -> ChatModel:
    """The chat model for `spec`.

    Local models are not loaded here (see `LlamaCppChatModel.load`). Models behind an
    OpenAI-compatible server are wrapped in `TextToolCallModel`, since small models
    served there often write their tool calls as text.
    """
    if spec.kind == "scripted":
        return scripted_order_model()
    if spec.kind == "local":
        from ..providers.llamacpp import LlamaCppChatModel

        return LlamaCppChatModel(local_model_path, local_model=spec.name or "0.5b")
    if spec.kind == "openai-compatible":
        openai_model = _providers_attribute("OpenAIChatModel")
        model: ChatModel = openai_model(spec.name, base_url=spec.base_url)
        return TextToolCallModel(model)
    model_from_name = _providers_attribute("model_from_name")
    created: ChatModel = model_from_name(f"{spec.kind}:{spec.name}")
    return created


__all__ = ["MODEL_HELP", "ModelOptionError", "ModelSpec", "create_model", "parse_model_option"]
