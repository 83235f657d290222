"""The provider seam: a `WireFormat` decides URL, headers and body; `HTTPChatModel` runs
it; `register_provider` lets a provider join `model_from_name`."""

from __future__ import annotations

import json
import weakref
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from advisorchain import (
    AssistantMessage,
    ChainConfigurationError,
    ChatOptions,
    ChatRequest,
    ChatResponse,
    ResponseCompleted,
    TextDelta,
    UserMessage,
)
from advisorchain.core.events import ModelDelta
from advisorchain.providers import (
    AuthenticationError,
    BadRequestError,
    HTTPChatModel,
    OpenAIChatModel,
    ProviderError,
    ProviderUnavailableError,
    RateLimitError,
    RetryPolicy,
    ScriptedChatModel,
    WireCall,
    WireFormat,
    model_from_name,
    register_provider,
)
from advisorchain.providers.factory import registered_providers

from provider_support import Recorder, sse_response

REQUEST = ChatRequest(messages=(UserMessage(content="Hi"),))


class PathWire(WireFormat):
    """A Gemini-like format: the model in the path, `?alt=sse` to stream, its own error
    shape, an end-of-stream without a marker."""

    provider = "pathwire"

    def url(self, call: WireCall) -> str:
        verb = "streamGenerate?alt=sse" if call.stream else "generate"
        return f"{call.base_url}/models/{call.model}:{verb}"

    def headers(self, call: WireCall, api_key: str | None) -> dict[str, str]:
        return {"x-goog-api-key": api_key or "", "x-version": "2"}

    def body(self, call: WireCall) -> dict[str, Any]:
        return {"said": [m.text for m in call.request.messages], "stream": call.stream}

    def parse(self, payload: Any) -> ChatResponse:
        return ChatResponse(message=AssistantMessage(content=payload["out"]))

    def stream_reader(self) -> Reader:
        return Reader()

    def error_detail(self, payload: Any) -> str | None:
        return f"{payload['problem']['why']} [{payload['problem']['code']}]"


class Reader:
    def __init__(self) -> None:
        self.done = False
        self.text = ""

    def receive(self, data: str, event: str = "message") -> list[ModelDelta]:
        piece = json.loads(data)["out"]
        self.text += piece
        return [TextDelta(piece)]

    def response(self) -> ChatResponse:
        return ChatResponse(message=AssistantMessage(content=self.text))


def path_model(recorder: Recorder, **options: Any) -> HTTPChatModel:
    return HTTPChatModel(
        "m-1",
        wire=PathWire(),
        base_url="https://api.example/v1beta/",
        api_key="k-0123456789abcdef",
        http_client=recorder.client(),
        **options,
    )


@pytest.mark.anyio
async def test_the_wire_format_builds_url_headers_and_body_on_both_paths() -> None:
    recorder = Recorder(
        httpx.Response(200, json={"out": "one"}),
        sse_response(b'data: {"out": "t"}\n\ndata: {"out": "wo"}\n\n'),
    )
    model = path_model(recorder, headers={"x-version": "1", "x-team": "a"})
    assert model.provider_name == "pathwire"
    assert (await model.call(REQUEST)).text == "one"
    other = ChatRequest(messages=REQUEST.messages, options=ChatOptions(model="m-2"))
    events = [e async for e in model.stream(other)]
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["t", "wo"]
    assert isinstance(events[-1], ResponseCompleted) and events[-1].response.text == "two"
    first, second = recorder.requests
    assert str(first.url) == "https://api.example/v1beta/models/m-1:generate"
    assert str(second.url) == "https://api.example/v1beta/models/m-2:streamGenerate?alt=sse"
    assert recorder.bodies == [{"said": ["Hi"], "stream": False}, {"said": ["Hi"], "stream": True}]
    for request in recorder.requests:
        assert request.headers["x-goog-api-key"] == "k-0123456789abcdef"
        assert request.headers["x-version"] == "2"  # the wire format's headers win
        assert request.headers["x-team"] == "a"
        assert request.headers["content-type"] == "application/json"
        assert "k-0123456789abcdef" not in str(request.url)


class _Body(dict[str, Any]):
    """A body whose lifetime a test can watch (a plain dict takes no weak reference)."""


class WatchedWire(PathWire):
    """`PathWire` remembering a weak reference to each body it builds."""

    def __init__(self) -> None:
        self.bodies: list[weakref.ref[_Body]] = []

    def body(self, call: WireCall) -> dict[str, Any]:
        body = _Body(super().body(call))
        self.bodies.append(weakref.ref(body))
        return body


@pytest.mark.anyio
@pytest.mark.parametrize("stream", [False, True])
async def test_a_body_is_encoded_once_and_not_kept_while_the_answer_is_awaited(
    stream: bool,
) -> None:
    wire = WatchedWire()
    alive: list[bool] = []

    def answer(reply: httpx.Response) -> Callable[[httpx.Request], httpx.Response]:
        def respond(request: httpx.Request) -> httpx.Response:
            alive.append(any(ref() is not None for ref in wire.bodies))
            return reply

        return respond

    final = (
        sse_response(b'data: {"out": "ok"}\n\n')
        if stream
        else httpx.Response(200, json={"out": "ok"})
    )
    recorder = Recorder(answer(httpx.Response(503)), answer(final))
    model = HTTPChatModel(
        "m-1",
        wire=wire,
        base_url="https://api.example/v1beta",
        http_client=recorder.client(),
        retry_policy=RetryPolicy(backoff_base=0.0),
    )
    if stream:
        events = [e async for e in model.stream(REQUEST)]
        assert isinstance(events[-1], ResponseCompleted)
        assert events[-1].response.text == "ok"
    else:
        assert (await model.call(REQUEST)).text == "ok"
    assert len(wire.bodies) == 1  # built once, for both attempts
    assert alive == [False, False]  # only its bytes were alive while each answer was awaited
    first, second = recorder.requests
    assert first.content == second.content  # the retry sends the same bytes
    assert json.loads(first.content) == {"said": ["Hi"], "stream": stream}


@pytest.mark.anyio
@pytest.mark.parametrize("stream", [False, True])
async def test_the_wire_format_reads_its_own_error_bodies(stream: bool) -> None:
    body = {"problem": {"why": "no such model", "code": "NOT_FOUND"}}
    model = path_model(Recorder(httpx.Response(404, json=body)))
    with pytest.raises(BadRequestError, match=r"pathwire: no such model \[NOT_FOUND\]"):
        if stream:
            async for _ in model.stream(REQUEST):
                pass
        else:
            await model.call(REQUEST)


class KindWire(PathWire):
    """A format whose error bodies name the kind of failure; statuses do not."""

    seen: list[tuple[int, Any]]

    def __init__(self) -> None:
        self.seen = []

    def error_type(self, status: int, payload: Any) -> type[ProviderError] | None:
        self.seen.append((status, payload))
        kind = payload["problem"]["code"]  # a KeyError on other bodies: the status decides
        return {"BAD_KEY": AuthenticationError, "SLOW_DOWN": RateLimitError}.get(kind)


@pytest.mark.anyio
@pytest.mark.parametrize("stream", [False, True])
async def test_the_wire_format_picks_the_error_class_on_both_paths(stream: bool) -> None:
    key = "k-0123456789abcdef"
    replies = [
        httpx.Response(400, json={"problem": {"why": f"bad key {key}", "code": "BAD_KEY"}}),
        httpx.Response(
            400,
            json={"problem": {"why": "calm", "code": "SLOW_DOWN"}},
            headers={"retry-after": "7"},
        ),
        httpx.Response(400, json={"problem": {"why": "no", "code": "ELSE"}}),
        httpx.Response(503, text="not json"),
    ]
    wire = KindWire()
    model = HTTPChatModel(
        "m-1",
        wire=wire,
        base_url="https://api.example/v1beta",
        api_key=key,
        http_client=Recorder(*replies).client(),
        max_retries=0,
    )

    async def fail() -> ProviderError:
        with pytest.raises(ProviderError) as caught:
            if stream:
                async for _ in model.stream(REQUEST):
                    pass
            else:
                await model.call(REQUEST)
        return caught.value

    bad_key = await fail()
    assert type(bad_key) is AuthenticationError and bad_key.status_code == 400
    assert key not in str(bad_key) + bad_key.body
    assert wire.seen[0] == (400, {"problem": {"why": "bad key ***", "code": "BAD_KEY"}})
    slow = await fail()
    assert isinstance(slow, RateLimitError) and slow.retry_after == 7.0
    assert type(await fail()) is BadRequestError  # None: the status decides
    assert type(await fail()) is ProviderUnavailableError  # the hook raised: likewise
    assert wire.seen[-1] == (503, None)


def test_event_object_reads_one_event_for_every_stream_reader() -> None:
    from advisorchain.core.errors import StreamInterruptedError
    from advisorchain.providers.wire import event_object

    assert event_object('{"type": "ping"}', "ping", provider="p") == {"type": "ping"}
    with pytest.raises(StreamInterruptedError, match="p: malformed JSON"):
        event_object("{cut", "message", provider="p")
    with pytest.raises(StreamInterruptedError, match="not a JSON object"):
        event_object("[1]", "message", provider="p")
    with pytest.raises(ProviderError, match="p: error event: overloaded") as caught:
        event_object("overloaded" * 50, "error", provider="p")
    assert not isinstance(caught.value, StreamInterruptedError)
    assert len(caught.value.message) == len("p: error event: ") + 200


def test_the_default_hook_leaves_the_class_to_the_status() -> None:
    assert WireFormat().error_type(400, {"error": {"message": "x"}}) is None


@pytest.mark.anyio
async def test_an_error_detail_that_fails_falls_back_to_the_reason() -> None:
    model = path_model(Recorder(httpx.Response(400, json={"error": "elsewhere"})))
    with pytest.raises(BadRequestError, match="pathwire: Bad Request"):
        await model.call(REQUEST)


def test_a_registered_provider_joins_model_from_name() -> None:
    built: list[tuple[str, dict[str, Any]]] = []

    def factory(model: str, **options: Any) -> ScriptedChatModel:
        built.append((model, options))
        return ScriptedChatModel(["hi"], model_name=model)

    register_provider("seamtest", factory, replace=True)
    model = model_from_name("seamtest:big:model:v2", temperature=1)
    assert isinstance(model, ScriptedChatModel) and model.model_name == "big:model:v2"
    assert built == [("big:model:v2", {"temperature": 1})]
    assert "seamtest" in registered_providers()
    with pytest.raises(ChainConfigurationError, match="already registered"):
        register_provider("seamtest", factory)
    with pytest.raises(ChainConfigurationError, match='"seamtest:<model>"'):
        model_from_name("seamtest:")  # a model is required by default
    with pytest.raises(ChainConfigurationError, match='"seamtest:<model>"'):
        model_from_name("nosuch:model")  # the error lists every registered form
    register_provider(
        "seamtest", lambda m, **o: OpenAIChatModel(m, base_url="http://x"), replace=True
    )
    assert isinstance(model_from_name("seamtest:m"), OpenAIChatModel)


@pytest.mark.parametrize("prefix", ["", "a:b", " pad"])
def test_a_prefix_is_one_word(prefix: str) -> None:
    with pytest.raises(ChainConfigurationError, match="prefix"):
        register_provider(prefix, lambda m, **o: ScriptedChatModel([]))


def test_the_built_in_prefixes_are_registered() -> None:
    assert {"openai", "anthropic", "openai-compatible", "scripted"} <= set(registered_providers())


def test_the_shipped_providers_are_http_chat_models_with_a_wire_format() -> None:
    openai = OpenAIChatModel("m", base_url="http://x", tool_media="omit", stream_usage=False)
    assert isinstance(openai, HTTPChatModel) and isinstance(openai.wire, WireFormat)
    assert (openai.tool_media, openai.wire.stream_usage) == ("omit", False)
    assert "omit" in repr(openai.wire)


def test_usage_reports_cache_and_reasoning_tokens_the_same_way_everywhere() -> None:
    from advisorchain import Usage
    from advisorchain.providers import anthropic, openai

    chat = openai.wire_usage(
        {
            "prompt_tokens": 100,
            "completion_tokens": 30,
            "prompt_tokens_details": {"cached_tokens": 60},
            "completion_tokens_details": {"reasoning_tokens": 12},
        }
    )
    assert chat == Usage(100, 30, 60, 1, reasoning_tokens=12)
    assert chat.cached_input_tokens == 60
    messages = anthropic.wire_usage(
        {
            "input_tokens": 10,
            "cache_creation_input_tokens": 30,
            "cache_read_input_tokens": 60,
            "output_tokens": 5,
        }
    )
    assert messages == Usage(100, 5, 60, 1, cache_write_tokens=30)
    assert messages.cached_input_tokens == 60
    total = chat + messages
    assert (total.cached_input_tokens, total.cache_write_tokens, total.reasoning_tokens) == (
        120,
        30,
        12,
    )
