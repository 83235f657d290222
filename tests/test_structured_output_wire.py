"""`ChatOptions.output_schema` on the wire: OpenAI, Anthropic and llama.cpp request bodies."""

from __future__ import annotations

import json
from typing import Any, Optional

import httpx
import pytest
from pydantic import BaseModel, Field

from advisorchain import (
    Chain,
    ChainConfigurationError,
    ChatModel,
    ChatOptions,
    ChatRequest,
    ResponseCompleted,
    SystemMessage,
    ToolCallingAdvisor,
    UserMessage,
    tool,
)
from advisorchain.advisors import StructuredOutputAdvisor
from advisorchain.providers import (
    AnthropicChatModel,
    BadRequestError,
    LlamaCppChatModel,
    OpenAIChatModel,
    OutputSchema,
    OutputSchemaRefusedError,
)
from advisorchain.providers._structured import (
    anthropic_schema,
    openai_response_format,
    strict_schema,
)

from provider_support import FAST_RETRY, HTTPX_ABANDONED_GENERATORS, Recorder, sse_response

pytestmark = HTTPX_ABANDONED_GENERATORS

ANSWER = '{"name": "tea", "price": 2.5, "note": null, "tags": []}'


class Item(BaseModel):
    """One item of an order."""

    name: str = Field(max_length=20)
    price: float = Field(ge=0)
    note: Optional[str] = None  # noqa: UP045 - the nullable form pydantic writes as anyOf
    tags: list[str] = []


class Order(BaseModel):
    items: list[Item]
    first: Item = Field(description="the first item")


class Tree(BaseModel):
    children: list[Tree] = []


class Counts(BaseModel):
    counts: dict[str, int]


@tool
def menu(kind: str) -> str:
    """What is on the menu."""
    return "tea 2.5"


def completion(content: str = ANSWER) -> httpx.Response:
    return httpx.Response(
        200,
        json={
            "id": "chatcmpl-1",
            "model": "gpt-test",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 5, "completion_tokens": 2},
        },
    )


def completion_stream(content: str = ANSWER) -> httpx.Response:
    chunks = [
        {"id": "c", "choices": [{"index": 0, "delta": {"content": content[:10]}}]},
        {"id": "c", "choices": [{"index": 0, "delta": {"content": content[10:]}}]},
        {"id": "c", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
    ]
    body = b"".join(f"data: {json.dumps(c)}\n\n".encode() for c in chunks) + b"data: [DONE]\n\n"
    return sse_response(body)


def message(text: str = ANSWER) -> httpx.Response:
    return httpx.Response(
        200,
        json={
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude-test",
            "content": [{"type": "text", "text": text}],
            "stop_reason": "end_turn",
            "usage": {"input_tokens": 5, "output_tokens": 2},
        },
    )


def openai(recorder: Recorder, **kwargs: Any) -> OpenAIChatModel:
    return OpenAIChatModel(
        "gpt-test",
        api_key="sk-test",
        http_client=recorder.client(),
        retry_policy=FAST_RETRY,
        **kwargs,
    )


def anthropic(recorder: Recorder) -> AnthropicChatModel:
    return AnthropicChatModel(
        "claude-test", api_key="sk-ant-test", http_client=recorder.client(), retry_policy=FAST_RETRY
    )


# --- OpenAI --------------------------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("path", ["call", "stream"])
async def test_openai_gets_a_strict_json_schema_response_format(path: str) -> None:
    recorder = Recorder(completion() if path == "call" else completion_stream())
    advisor = StructuredOutputAdvisor(Item)
    chain = Chain([advisor], model=openai(recorder))
    if path == "call":
        response = await chain.call("tea?")
    else:
        events = [e async for e in chain.stream("tea?")]
        assert isinstance(events[-1], ResponseCompleted)
        response = events[-1].response
    assert response.output == Item(name="tea", price=2.5)
    (body,) = recorder.bodies
    assert body["messages"] == [{"role": "user", "content": "tea?"}]  # no prompt instruction
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {
            "name": "Item",
            "schema": {
                "description": "One item of an order.",
                "properties": {
                    "name": {"maxLength": 20, "title": "Name", "type": "string"},
                    "price": {"minimum": 0, "title": "Price", "type": "number"},
                    "note": {"anyOf": [{"type": "string"}, {"type": "null"}], "title": "Note"},
                    "tags": {"items": {"type": "string"}, "title": "Tags", "type": "array"},
                },
                "required": ["name", "price", "note", "tags"],  # all of them, for strict
                "title": "Item",
                "type": "object",
                "additionalProperties": False,
            },
            "strict": True,
        },
    }


@pytest.mark.anyio
async def test_openai_with_tools_keeps_both_on_the_official_api() -> None:
    recorder = Recorder(completion())
    chain = Chain(
        [StructuredOutputAdvisor(Item), ToolCallingAdvisor()], model=openai(recorder), tools=[menu]
    )
    await chain.call("tea?")
    (body,) = recorder.bodies
    assert body["response_format"]["json_schema"]["name"] == "Item"
    assert [t["function"]["name"] for t in body["tools"]] == ["menu"]


@pytest.mark.anyio
async def test_another_openai_compatible_server_with_tools_is_asked_in_the_prompt() -> None:
    recorder = Recorder(completion(), completion())
    model = openai(recorder, base_url="http://127.0.0.1:8080/v1")
    advisor = StructuredOutputAdvisor(Item)
    await Chain([advisor, ToolCallingAdvisor()], model=model, tools=[menu]).call("tea?")
    await Chain([advisor], model=model).call("tea?")
    with_tools, without = recorder.bodies
    assert "response_format" not in with_tools
    assert with_tools["messages"][0] == {"role": "system", "content": advisor.instruction}
    assert without["response_format"]["type"] == "json_schema"  # llama.cpp's server, vLLM


def test_openai_strict_schemas_close_every_object_and_inline_described_refs() -> None:
    wire = openai_response_format(OutputSchema(name="Order", schema=Order.model_json_schema()))[
        "json_schema"
    ]
    assert wire["strict"] is True
    schema = wire["schema"]
    item = schema["$defs"]["Item"]
    assert item["additionalProperties"] is False
    assert item["required"] == ["name", "price", "note", "tags"]
    assert "default" not in item["properties"]["tags"]
    # `$ref` with a description next to it is inlined (strict mode takes bare refs only)
    first = schema["properties"]["first"]
    assert "$ref" not in first and first["description"] == "the first item"
    assert first["additionalProperties"] is False
    assert schema["properties"]["items"]["items"] == {"$ref": "#/$defs/Item"}


def test_a_schema_with_a_map_is_sent_non_strict_and_unchanged() -> None:
    original = Counts.model_json_schema()
    assert strict_schema(original) is None
    wire = openai_response_format(OutputSchema(name="Counts", schema=original))["json_schema"]
    assert wire["strict"] is False and wire["schema"] == original
    loose = openai_response_format(
        OutputSchema(name="Item", schema={"type": "object"}, strict=False)
    )
    assert loose["json_schema"] == {"name": "Item", "schema": {"type": "object"}, "strict": False}


def test_schema_rewrites_are_bounded() -> None:
    deep: dict[str, Any] = {"type": "string"}
    for _ in range(500):
        deep = {"type": "array", "items": deep}
    assert strict_schema(deep) is None
    assert anthropic_schema(deep) is None
    with pytest.raises(ValueError, match="deeper"):
        openai_response_format(OutputSchema(name="deep", schema=deep))


# --- Anthropic ----------------------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("with_tools", [False, True])
async def test_anthropic_gets_output_config_format(with_tools: bool) -> None:
    recorder = Recorder(message())
    advisors = [StructuredOutputAdvisor(Item), ToolCallingAdvisor()]
    chain = Chain(advisors, model=anthropic(recorder), tools=[menu] if with_tools else [])
    response = await chain.call("tea?")
    assert response.output == Item(name="tea", price=2.5)
    (body,) = recorder.bodies
    assert "system" not in body
    assert body["output_config"] == {
        "format": {
            "type": "json_schema",
            "schema": {
                "description": "One item of an order.",
                "properties": {
                    # constraints the API rejects are moved into the description
                    "name": {"title": "Name", "type": "string", "description": "(maxLength: 20)"},
                    "price": {"title": "Price", "type": "number", "description": "(minimum: 0)"},
                    "note": {"anyOf": [{"type": "string"}, {"type": "null"}], "title": "Note"},
                    "tags": {"items": {"type": "string"}, "title": "Tags", "type": "array"},
                },
                "required": ["name", "price", "note", "tags"],
                "title": "Item",
                "type": "object",
                "additionalProperties": False,
            },
        }
    }
    assert ("tools" in body) is with_tools
    assert "tool_choice" not in body  # the schema never forces or takes away a tool


@pytest.mark.anyio
async def test_anthropic_output_config_merges_with_extra() -> None:
    recorder = Recorder(message())
    schema = OutputSchema(name="Item", schema=Item.model_json_schema())
    options = ChatOptions(output_schema=schema, extra={"output_config": {"effort": "low"}})
    await anthropic(recorder).call(
        ChatRequest(messages=(UserMessage(content="x"),), options=options)
    )
    config = recorder.bodies[0]["output_config"]
    assert config["effort"] == "low" and config["format"]["type"] == "json_schema"


@pytest.mark.anyio
async def test_a_schema_anthropic_cannot_take_is_stated_in_the_prompt() -> None:
    recorder = Recorder(message('{"children": []}'))
    advisor = StructuredOutputAdvisor(Tree)  # recursive
    response = await Chain([advisor], model=anthropic(recorder)).call("a tree")
    assert response.output == Tree()
    (body,) = recorder.bodies
    assert "output_config" not in body
    assert [block["text"] for block in body["system"]] == [advisor.instruction]


@pytest.mark.anyio
async def test_a_schema_anthropic_cannot_take_set_directly_is_an_error_not_dropped() -> None:
    recorder = Recorder()
    schema = OutputSchema(name="Tree", schema=Tree.model_json_schema())
    request = ChatRequest(
        messages=(UserMessage(content="x"),), options=ChatOptions(output_schema=schema)
    )
    with pytest.raises(ChainConfigurationError, match="mode='prompt'"):
        await anthropic(recorder).call(request)
    assert recorder.requests == []
    assert anthropic_schema(Counts.model_json_schema()) is None


# --- llama.cpp (in process) ---------------------------------------------------------------


class FakeLlama:
    def __init__(self, reply: str) -> None:
        self.reply = reply
        self.kwargs: list[dict[str, Any]] = []

    def create_chat_completion(self, **kwargs: Any) -> Any:
        self.kwargs.append(kwargs)
        return {
            "id": "l1",
            "choices": [{"message": {"content": self.reply}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 3},
        }


@pytest.mark.anyio
async def test_llamacpp_gets_a_json_grammar_without_tools_and_the_prompt_with_them() -> None:
    fake = FakeLlama('{"children": []}')
    model = LlamaCppChatModel(llama=fake)
    assert isinstance(model, ChatModel)
    advisor = StructuredOutputAdvisor(Tree)
    await Chain([advisor], model=model).call("a tree")
    await Chain([advisor, ToolCallingAdvisor()], model=model, tools=[menu]).call("a tree")
    without, with_tools = fake.kwargs
    assert without["response_format"] == {
        "type": "json_object",
        "schema": Tree.model_json_schema(),
    }
    assert "response_format" not in with_tools
    assert with_tools["messages"][0] == {"role": "system", "content": advisor.instruction}


@pytest.mark.anyio
async def test_llamacpp_refuses_a_schema_with_tools_rather_than_dropping_it() -> None:
    model = LlamaCppChatModel(llama=FakeLlama("{}"))
    schema = OutputSchema(name="Tree", schema=Tree.model_json_schema())
    request = Chain(model=model, tools=[menu]).request("x", output_schema=schema)
    with pytest.raises(ChainConfigurationError, match="tools"):
        await model.call(request)


def test_the_prompt_instruction_is_a_system_message() -> None:
    advisor = StructuredOutputAdvisor(Item, mode="prompt")
    request = advisor._prepared(ChatRequest(messages=(UserMessage(content="x"),)))
    assert request.messages[0] == SystemMessage(content=advisor.instruction)


def _schema_request(*, with_tools: bool) -> ChatRequest:
    @tool
    def lookup(name: str) -> str:
        """Look an item up."""
        return name

    return ChatRequest(
        messages=(UserMessage(content="an item"),),
        tools=(lookup,) if with_tools else (),
        options=ChatOptions(
            output_schema=OutputSchema(name="Item", schema=Item.model_json_schema())
        ),
    )


@pytest.mark.parametrize("with_tools", [False, True])
def test_responses_api_sends_the_schema_as_text_format(with_tools: bool) -> None:
    from advisorchain.providers import OpenAIResponsesChatModel
    from advisorchain.providers.openai_responses import request_body

    request = _schema_request(with_tools=with_tools)
    body = request_body(request, model="gpt-5", stream=False)
    chat = openai_response_format(OutputSchema(name="Item", schema=Item.model_json_schema()))
    assert body["text"] == {"format": {"type": "json_schema", **chat["json_schema"]}}
    assert body["text"]["format"]["strict"] is True
    schema = OutputSchema(name="Item", schema={})
    assert OpenAIResponsesChatModel("gpt-5").supports_output_schema(schema, with_tools=True)


def test_gemini_sends_the_schema_in_generation_config_without_tools() -> None:
    from advisorchain.providers import GeminiChatModel
    from advisorchain.providers.gemini import request_body

    body = request_body(_schema_request(with_tools=False))
    config = body["generationConfig"]
    assert config["responseMimeType"] == "application/json"
    assert config["responseJsonSchema"] == Item.model_json_schema()
    with pytest.raises(ChainConfigurationError, match="without tools"):
        request_body(_schema_request(with_tools=True))
    model = GeminiChatModel("gemini-2.5-flash", api_key="k")
    schema = OutputSchema(name="Item", schema={})
    assert model.supports_output_schema(schema, with_tools=False)
    assert not model.supports_output_schema(schema, with_tools=True)


# --- a server that refuses the schema ------------------------------------------------------

LLAMA_CPP_SERVER_REFUSAL = {
    "error": {
        "message": (
            "1 validation error:\n  {'type': 'literal_error', 'loc': ('body', "
            "'response_format', 'type'), 'msg': \"Input should be 'text' or 'json_object'\", "
            "'input': 'json_schema', 'ctx': {'expected': \"'text' or 'json_object'\"}}\n\n"
            '  File "llama_cpp/server/app.py", line 376, in create_chat_completion\n'
            "    POST /v1/chat/completions"
        ),
        "type": "internal_server_error",
        "param": None,
        "code": None,
    }
}
"""llama-cpp-python 0.3.36's `llama_cpp.server` on a `json_schema` format (HTTP 500)."""


def refusal() -> httpx.Response:
    return httpx.Response(500, json=LLAMA_CPP_SERVER_REFUSAL)


@pytest.mark.anyio
@pytest.mark.parametrize("path", ["call", "stream"])
async def test_a_refused_schema_is_asked_in_the_prompt_without_retrying(path: str) -> None:
    reply = completion if path == "call" else completion_stream
    recorder = Recorder(refusal(), reply(), reply())
    model = openai(recorder, base_url="http://127.0.0.1:8080/v1")
    advisor = StructuredOutputAdvisor(Item)
    chain = Chain([advisor], model=model)
    for _ in range(2):
        if path == "call":
            response = await chain.call("tea?")
        else:
            events = [e async for e in chain.stream("tea?")]
            assert isinstance(events[-1], ResponseCompleted)
            response = events[-1].response
        assert response.output == Item(name="tea", price=2.5)
    refused, asked, again = recorder.bodies  # one refusal, not retried as an outage
    assert refused["response_format"]["type"] == "json_schema"
    for body in (asked, again):  # the advisor remembers: no second refusal
        assert "response_format" not in body
        assert body["messages"][0] == {"role": "system", "content": advisor.instruction}


@pytest.mark.anyio
@pytest.mark.parametrize("path", ["call", "stream"])
async def test_a_refused_schema_in_native_mode_is_a_clear_error(path: str) -> None:
    recorder = Recorder(refusal())
    model = openai(recorder, base_url="http://127.0.0.1:8080/v1")
    chain = Chain([StructuredOutputAdvisor(Item, mode="native")], model=model)
    with pytest.raises(OutputSchemaRefusedError, match="response_format") as caught:
        if path == "call":
            await chain.call("tea?")
        else:
            [e async for e in chain.stream("tea?")]
    assert isinstance(caught.value, BadRequestError) and caught.value.status_code == 500
    assert len(recorder.requests) == 1


@pytest.mark.anyio
async def test_an_outage_is_still_retried() -> None:
    outage = httpx.Response(500, json={"error": {"message": "overloaded"}})
    recorder = Recorder(outage, completion())
    model = openai(recorder, base_url="http://127.0.0.1:8080/v1")
    response = await Chain([StructuredOutputAdvisor(Item)], model=model).call("tea?")
    assert response.output == Item(name="tea", price=2.5)
    assert [b.get("response_format", {}).get("type") for b in recorder.bodies] == [
        "json_schema",
        "json_schema",
    ]
