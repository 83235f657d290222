"""One `Connection` for every HTTP provider, and the official-URL rule written once.

Every HTTP chat model takes `connection=` and the same fields as keywords (applied over
it); no provider restates the connection's arguments; `Connection.for_api` decides the base
URL, the key's variable and whether a key is required, the same way for every provider.
"""

from __future__ import annotations

import inspect
import json
from dataclasses import fields
from typing import Any, get_type_hints

import httpx
import pytest

from advisorchain import ChatRequest, ResponseCompleted, UserMessage
from advisorchain.providers import (
    AnthropicChatModel,
    AuthenticationError,
    Connection,
    ConnectionOptions,
    GeminiChatModel,
    HTTPChatModel,
    OfficialAPI,
    OpenAIChatModel,
    OpenAIChatWire,
    OpenAIResponsesChatModel,
    RetryPolicy,
    WireFormat,
)
from advisorchain.providers.anthropic import ANTHROPIC_API, ANTHROPIC_BASE_URL
from advisorchain.providers.gemini import GEMINI_API, GEMINI_BASE_URL
from advisorchain.providers.http import connection as connection_module
from advisorchain.providers.openai import OPENAI_API, OPENAI_BASE_URL

from provider_support import HTTPX_ABANDONED_GENERATORS, Recorder, sse_response

pytestmark = HTTPX_ABANDONED_GENERATORS

KEY = "sk-connection-0123456789"
REQUEST = ChatRequest(messages=(UserMessage(content="Hi"),))
PROVIDERS = (OpenAIChatModel, OpenAIResponsesChatModel, AnthropicChatModel, GeminiChatModel)
CONNECTION_FIELDS = {f.name for f in fields(Connection)}


def test_the_keywords_are_the_connection_fields() -> None:
    where = vars(connection_module)  # `__module__` names the package that exports them
    hints = get_type_hints(ConnectionOptions, globalns=where)
    assert set(hints) == CONNECTION_FIELDS
    dataclass_hints = get_type_hints(Connection, globalns=where)
    assert all(hints[name] == dataclass_hints[name] for name in CONNECTION_FIELDS)


@pytest.mark.parametrize("model_class", [HTTPChatModel, *PROVIDERS], ids=lambda c: c.__name__)
def test_no_provider_restates_the_connection_arguments(model_class: type[Any]) -> None:
    parameters = inspect.signature(model_class.__init__).parameters
    assert not CONNECTION_FIELDS & set(parameters)
    assert "connection" in parameters
    assert any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values())


@pytest.mark.parametrize(
    ("official", "connection", "env", "expected"),
    [
        # no base_url: the official API (or the URL variable), its key variable
        (OPENAI_API, Connection(), {}, (OPENAI_BASE_URL, "OPENAI_API_KEY", True)),
        (
            OPENAI_API,
            Connection(),
            {"OPENAI_BASE_URL": "http://127.0.0.1:9/v1"},
            ("http://127.0.0.1:9/v1", "OPENAI_API_KEY", False),
        ),
        # the official URL given explicitly: a key is required all the same
        (
            OPENAI_API,
            Connection(base_url=OPENAI_BASE_URL + "/"),
            {},
            (OPENAI_BASE_URL + "/", "OPENAI_API_KEY", True),
        ),
        # another server: no default variable, no key required
        (
            OPENAI_API,
            Connection(base_url="http://127.0.0.1:9/v1"),
            {},
            ("http://127.0.0.1:9/v1", None, False),
        ),
        # a variable named explicitly must be set
        (
            OPENAI_API,
            Connection(base_url="http://127.0.0.1:9/v1", api_key_env="GROQ_API_KEY"),
            {},
            ("http://127.0.0.1:9/v1", "GROQ_API_KEY", True),
        ),
        (GEMINI_API, Connection(), {}, (GEMINI_BASE_URL, "GEMINI_API_KEY", True)),
        (
            GEMINI_API,
            Connection(base_url="http://127.0.0.1:9"),
            {},
            ("http://127.0.0.1:9", None, False),
        ),
        # Anthropic's key is read and required whatever the URL
        (
            ANTHROPIC_API,
            Connection(base_url="http://127.0.0.1:9"),
            {},
            ("http://127.0.0.1:9", "ANTHROPIC_API_KEY", True),
        ),
        (
            ANTHROPIC_API,
            Connection(),
            {"ANTHROPIC_BASE_URL": "http://127.0.0.1:8"},
            ("http://127.0.0.1:8", "ANTHROPIC_API_KEY", True),
        ),
        # no official API: the connection as given, an optional key
        (
            None,
            Connection(base_url="http://127.0.0.1:9", api_key_env="X_KEY"),
            {},
            ("http://127.0.0.1:9", "X_KEY", False),
        ),
    ],
)
def test_the_official_url_rule(
    official: OfficialAPI | None,
    connection: Connection,
    env: dict[str, str],
    expected: tuple[str, str | None, bool],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("OPENAI_BASE_URL", "ANTHROPIC_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    resolved = connection.for_api(official)
    assert (resolved.base_url, resolved.api_key_env, resolved.key_required) == expected
    assert resolved.for_api(official) == resolved  # applying it again changes nothing


class _NoOfficialWire(WireFormat):
    """A wire format that names no official API (the base class's default)."""


def test_without_an_official_api_a_base_url_is_required() -> None:
    with pytest.raises(TypeError, match="base_url is required"):
        HTTPChatModel("m", wire=_NoOfficialWire())


def test_a_wire_with_an_official_api_needs_no_base_url(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    model = HTTPChatModel("m", wire=OpenAIChatWire(), api_key=KEY)
    assert model.base_url == OPENAI_BASE_URL


def test_the_connection_shows_no_secret() -> None:
    connection = Connection(api_key=KEY, headers={"x-secret": "header-value-123456"})
    assert KEY not in repr(connection) and "header-value-123456" not in repr(connection)


@pytest.mark.parametrize(
    ("values", "error", "match"),
    [
        ({"base_url": 3}, TypeError, "base_url must be a URL"),
        ({"api_key_env": 3}, TypeError, "api_key_env"),
        ({"max_retries": -1}, ValueError, "max_retries"),
        ({"timeout": "slow"}, TypeError, "timeout"),
        ({"retry_policy": 2}, TypeError, "retry_policy must be a RetryPolicy"),
        ({"http_client": object()}, TypeError, "http_client must be an httpx.AsyncClient"),
        ({"headers": ["x"]}, TypeError, "headers"),
    ],
)
def test_wrong_kinds_are_refused_at_the_door(
    values: dict[str, Any], error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        Connection(**values)
    with pytest.raises(error, match=match):
        OpenAIChatModel("m", **values)


def test_a_connection_that_is_not_one_is_refused() -> None:
    with pytest.raises(TypeError, match="connection must be a Connection"):
        GeminiChatModel("m", connection={"base_url": "x"})  # type: ignore[arg-type]


def openai_answer(request: httpx.Request) -> httpx.Response:
    if json.loads(request.content).get("stream"):
        chunk = {"choices": [{"index": 0, "delta": {"content": "hello"}, "finish_reason": "stop"}]}
        return sse_response(f"data: {json.dumps(chunk)}\n\ndata: [DONE]\n\n".encode())
    message = {"role": "assistant", "content": "hello"}
    return httpx.Response(
        200, json={"choices": [{"index": 0, "message": message, "finish_reason": "stop"}]}
    )


async def answer(model: Any, stream: bool) -> str:
    if not stream:
        return str((await model.call(REQUEST)).text)
    events = [e async for e in model.stream(REQUEST)]
    assert isinstance(events[-1], ResponseCompleted)
    return str(events[-1].response.text)


@pytest.mark.anyio
@pytest.mark.parametrize("stream", [False, True], ids=["call", "stream"])
async def test_one_connection_value_serves_several_models(stream: bool) -> None:
    recorder = Recorder(openai_answer, openai_answer)
    shared = Connection(
        base_url="http://127.0.0.1:9/v1",
        api_key=KEY,
        http_client=recorder.client(),
        headers={"x-team": "search"},
        retry_policy=RetryPolicy(max_retries=0),
    )
    first = OpenAIChatModel("small", connection=shared)
    second = OpenAIChatModel("large", connection=shared, headers={"x-team": "ranking"})
    assert await answer(first, stream) == "hello"
    assert await answer(second, stream) == "hello"
    one, two = recorder.requests
    assert one.headers["authorization"] == two.headers["authorization"] == f"Bearer {KEY}"
    assert one.headers["x-team"] == "search"  # the connection's headers
    assert two.headers["x-team"] == "ranking"  # a keyword applied over the connection
    assert [json.loads(r.content)["model"] for r in recorder.requests] == ["small", "large"]
    assert shared.headers == {"x-team": "search"}  # the shared value is unchanged


@pytest.mark.anyio
@pytest.mark.parametrize("stream", [False, True], ids=["call", "stream"])
@pytest.mark.parametrize("model_class", PROVIDERS, ids=lambda c: c.__name__)
async def test_every_provider_requires_a_key_at_its_official_url(
    model_class: type[Any], stream: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    for name in ("OPENAI_BASE_URL", "ANTHROPIC_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    recorder = Recorder()
    model = model_class("m", connection=Connection(http_client=recorder.client()))
    with pytest.raises(AuthenticationError, match="_API_KEY"):
        await answer(model, stream)
    assert recorder.requests == []  # refused before anything is sent
    assert model.base_url.startswith("https://")
    assert model.base_url.rstrip("/") in (OPENAI_BASE_URL, ANTHROPIC_BASE_URL, GEMINI_BASE_URL)
