"""`OpenAIChatModel` against a real OpenAI-compatible server: llama-cpp-python's, on 127.0.0.1.

Needs the `local` extra (skipped without it, except in CI). The server runs the demo's
Qwen2.5-Coder-0.5B; generations are kept short, and assertions are about structure.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest
from pydantic import BaseModel

from advisorchain import (
    Advisor,
    AssistantMessage,
    CallNext,
    Chain,
    ChatRequest,
    ChatResponse,
    ResponseCompleted,
    StreamEvent,
    StreamNext,
    SystemMessage,
    TextDelta,
    ToolCallFinished,
    ToolCallingAdvisor,
    ToolCallStarted,
    ToolMessage,
    UserMessage,
    tool,
)
from advisorchain.advisors import StructuredOutputAdvisor, StructuredOutputError
from advisorchain.providers import OpenAIChatModel

_READY_WITHIN = 180.0  # seconds; loading takes about one, but CI machines are shared


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.fixture(scope="module")
def server_url(local_model_path: Path) -> Iterator[str]:
    """`python -m llama_cpp.server` with the demo model; yields its `/v1` base URL."""
    yield from _serve(local_model_path)


@pytest.fixture(scope="module")
def function_calling_url(local_model_path: Path) -> Iterator[str]:
    """The same server with `--chat_format chatml-function-calling`."""
    yield from _serve(local_model_path, "--chat_format", "chatml-function-calling")


def _serve(model_path: Path, *extra: str) -> Iterator[str]:
    port = _free_port()
    with tempfile.TemporaryFile(mode="w+") as log:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "llama_cpp.server",
                "--model",
                str(model_path),
                "--model_alias",
                "qwen",
                "--n_ctx",
                "2048",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                *extra,
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            _wait_until_ready(process, port, log)
            yield f"http://127.0.0.1:{port}/v1"
        finally:
            process.terminate()
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _wait_until_ready(process: subprocess.Popen[bytes], port: int, log: object) -> None:
    deadline = time.monotonic() + _READY_WITHIN
    while time.monotonic() < deadline:
        if process.poll() is not None:
            break
        try:
            if httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.25)
    assert hasattr(log, "seek") and hasattr(log, "read")
    log.seek(0)
    pytest.fail(f"llama_cpp.server did not start (exit code {process.poll()}):\n{log.read()}")


_executed: list[str] = []


@tool
def get_order_status(order_id: str) -> str:
    """Look up the shipping status of one order by its id, e.g. A-1001."""
    _executed.append(order_id)
    return f"Order {order_id} has shipped with DHL and arrives on Tuesday."


class _NamedToolChoiceOnce(Advisor):
    """A named `tool_choice` forces a call on every round; after the first, answer in text."""

    def _adjusted(self, request: ChatRequest) -> ChatRequest:
        if any(isinstance(m, ToolMessage) for m in request.messages):
            return request.with_options(tool_choice="none")
        return request

    async def call_model(self, request: ChatRequest, next: CallNext) -> ChatResponse:
        return await next(self._adjusted(request))

    async def stream_model(
        self, request: ChatRequest, next: StreamNext
    ) -> AsyncIterator[StreamEvent]:
        async for event in next(self._adjusted(request)):
            yield event


@pytest.fixture
async def model(server_url: str) -> AsyncIterator[OpenAIChatModel]:
    """The client under test; closed after each test so no connection outlives its loop."""
    client = OpenAIChatModel("qwen", base_url=server_url, api_key="sk-unused-local")
    async with client:  # `__aenter__` returns the client itself, typed as an HTTPChatModel
        yield client


def _chain(model: OpenAIChatModel, *advisors: Advisor) -> Chain:
    return Chain([ToolCallingAdvisor(), *advisors], model=model, tools=[get_order_status])


def _assert_tool_round(response: ChatResponse) -> None:
    asked, result, answer = response.messages
    assert isinstance(asked, AssistantMessage) and isinstance(result, ToolMessage)
    (call,) = asked.tool_calls
    assert call.name == "get_order_status" and call.id
    get_order_status.validate_arguments(json.loads(call.arguments))
    assert result.tool_call_id == call.id and not result.is_error
    assert isinstance(answer, AssistantMessage) and not answer.tool_calls
    assert response.usage.requests == 2  # the follow-up with the tool result was accepted


@pytest.mark.anyio
async def test_plain_chat(model: OpenAIChatModel) -> None:
    chain = Chain([ToolCallingAdvisor()], model=model)
    response = await chain.call("Say hello in three words.", temperature=0, max_tokens=12)
    assert response.text.strip()
    assert response.finish_reason in ("stop", "length")
    assert response.usage.input_tokens > 0 and response.usage.output_tokens > 0


@pytest.mark.anyio
async def test_streaming(model: OpenAIChatModel) -> None:
    chain = Chain([ToolCallingAdvisor()], model=model)
    stream = chain.stream("Count from one to five.", temperature=0, max_tokens=16)
    events = [e async for e in stream]
    deltas = [e.text for e in events if isinstance(e, TextDelta)]
    assert len(deltas) > 1
    final = events[-1]
    assert isinstance(final, ResponseCompleted)
    assert final.response.text == "".join(deltas)


@pytest.mark.anyio
async def test_named_tool_choice_round_trip(model: OpenAIChatModel) -> None:
    _executed.clear()
    chain = _chain(model, _NamedToolChoiceOnce())
    response = await chain.call(
        "Where is my order A-1001?", tool_choice="get_order_status", temperature=0, max_tokens=32
    )
    _assert_tool_round(response)
    assert len(_executed) == 1


@pytest.mark.anyio
async def test_named_tool_choice_round_trip_streamed(model: OpenAIChatModel) -> None:
    _executed.clear()
    chain = _chain(model, _NamedToolChoiceOnce())
    events = [
        e
        async for e in chain.stream(
            "Where is my order A-1001?",
            tool_choice="get_order_status",
            temperature=0,
            max_tokens=32,
        )
    ]
    # The server repeats the call's id and name in every chunk; they must assemble to one.
    (started,) = [e for e in events if isinstance(e, ToolCallStarted)]
    assert started.call.name == "get_order_status"
    (finished,) = [e for e in events if isinstance(e, ToolCallFinished)]
    assert finished.outcome == "ok"
    final = events[-1]
    assert isinstance(final, ResponseCompleted)
    _assert_tool_round(final.response)
    assert len(_executed) == 1


@pytest.mark.anyio
async def test_tools_reach_a_chatml_function_calling_server_without_a_tool_choice(
    function_calling_url: str,
) -> None:
    """That chat format renders the tools into the prompt only when a `tool_choice` is
    sent; `OpenAIChatModel` sends `"auto"` whenever tools are attached. The model then
    picks the function: llama-cpp-python 0.3 returns that pick as the text
    `functions.<name>:` instead of a call (its stop sequence is not cut), so either
    counts here; what fails without `"auto"` is the tools being offered at all."""
    messages = (SystemMessage(content="You are a shop assistant."),)
    async with OpenAIChatModel("qwen", base_url=function_calling_url) as client:
        bare = ChatRequest(messages=(*messages, UserMessage(content="Where is order A-1001?")))
        without_tools = await client.call(bare.with_options(temperature=0, max_tokens=16))
        with_tools = bare.with_tools((get_order_status,)).with_options(temperature=0, max_tokens=48)
        answers = [await client.call(with_tools)]
        answers += [
            e.response async for e in client.stream(with_tools) if isinstance(e, ResponseCompleted)
        ]
    # the tool definitions are in the prompt (a stream reports no usage here)
    assert answers[0].usage.input_tokens > without_tools.usage.input_tokens + 50
    for answer in answers:
        called = [c.name for c in answer.message.tool_calls]
        assert called == ["get_order_status"] or answer.text.startswith(
            "functions.get_order_status"
        )


class _Capital(BaseModel):
    country: str
    capital: str


@pytest.mark.anyio
@pytest.mark.parametrize("path", ["call", "stream"])
async def test_structured_output_falls_back_to_the_prompt_when_json_schema_is_refused(
    server_url: str, path: str
) -> None:
    """The server answers `response_format: json_schema` with HTTP 500 (it takes only
    `text` and `json_object`): one refusal, not retried as an outage, then the schema
    in the prompt."""
    statuses: list[int] = []

    async def record(response: httpx.Response) -> None:
        statuses.append(response.status_code)

    http = httpx.AsyncClient(event_hooks={"response": [record]}, timeout=120)
    async with http, OpenAIChatModel("qwen", base_url=server_url, http_client=http) as client:
        advisor = StructuredOutputAdvisor(_Capital, retries=2)
        chain = Chain([advisor], model=client)
        prompt = "Give the capital of France as JSON with the keys country and capital."
        try:
            if path == "call":
                response = await chain.call(prompt, temperature=0, max_tokens=48)
            else:
                events = [e async for e in chain.stream(prompt, temperature=0, max_tokens=48)]
                assert isinstance(events[-1], ResponseCompleted)
                response = events[-1].response
        except StructuredOutputError:  # the small model's answer, not the server's refusal
            response = None
    assert statuses[0] == 500 and set(statuses[1:]) == {200}
    if response is not None:
        assert isinstance(response.output, _Capital)
