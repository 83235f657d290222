from __future__ import annotations

import pytest

from advisorchain import Chain, ChainConfigurationError
from advisorchain.providers import (
    AnthropicChatModel,
    OpenAIChatModel,
    ScriptedChatModel,
    model_from_name,
)


def test_openai_and_anthropic() -> None:
    model = model_from_name("openai:gpt-4.1-mini", api_key="k")
    assert isinstance(model, OpenAIChatModel)
    assert (model.model_name, model.base_url) == ("gpt-4.1-mini", "https://api.openai.com/v1")
    claude = model_from_name("anthropic:claude-sonnet-4-5", max_tokens=100)
    assert isinstance(claude, AnthropicChatModel)
    assert (claude.model_name, claude.max_tokens) == ("claude-sonnet-4-5", 100)


def test_model_names_with_colons_are_kept_whole() -> None:
    model = model_from_name("openai:ft:gpt-4o-mini:acme::abc123")
    assert isinstance(model, OpenAIChatModel)
    assert model.model_name == "ft:gpt-4o-mini:acme::abc123"


@pytest.mark.parametrize(
    ("name", "base_url", "model"),
    [
        (
            "openai-compatible:http://localhost:8080/v1:qwen2.5-7b",
            "http://localhost:8080/v1",
            "qwen2.5-7b",
        ),
        # Ollama model tags contain a colon: splitting on the last colon would be wrong
        (
            "openai-compatible:http://localhost:11434/v1:llama3.1:8b",
            "http://localhost:11434/v1",
            "llama3.1:8b",
        ),
        ("openai-compatible:http://127.0.0.1:8000:my-model", "http://127.0.0.1:8000", "my-model"),
        (
            "openai-compatible:https://api.groq.com/openai/v1:llama-3.3-70b",
            "https://api.groq.com/openai/v1",
            "llama-3.3-70b",
        ),
        ("openai-compatible:http://[::1]:8080/v1:phi-4", "http://[::1]:8080/v1", "phi-4"),
        (
            "openai-compatible:https://api.deepseek.com:deepseek-chat",
            "https://api.deepseek.com",
            "deepseek-chat",
        ),
    ],
)
def test_openai_compatible(name: str, base_url: str, model: str) -> None:
    built = model_from_name(name)
    assert isinstance(built, OpenAIChatModel)
    assert (built.base_url, built.model_name, built.provider_name) == (base_url, model, "openai")


@pytest.mark.anyio
async def test_scripted_echoes_by_default_or_follows_a_script() -> None:
    echo = model_from_name("scripted")
    assert isinstance(echo, ScriptedChatModel)
    assert (await Chain(model=echo).call("ping")).text == "ping"
    scripted = model_from_name("scripted", script=["hello"], model_name="demo")
    assert (await Chain(model=scripted).call("x")).text == "hello"
    assert isinstance(scripted, ScriptedChatModel)
    assert scripted.model_name == "demo"


@pytest.mark.parametrize(
    "name",
    [
        "",
        "gpt-4",
        "openai:",
        "anthropic:",
        "mistral:large",
        "scripted:x",
        "openai-compatible:localhost:8080:m",
        "openai-compatible:http://localhost:8080/v1",
        "openai-compatible:http://localhost:8080/v1:",
    ],
)
def test_bad_names_are_a_clear_error(name: str) -> None:
    with pytest.raises(ChainConfigurationError, match="openai-compatible:<base_url>:<model>"):
        model_from_name(name)
