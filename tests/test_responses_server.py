"""`OpenAIResponsesChatModel` against a real Responses server, offline: the
`open-responses-server` bridge in front of llama-cpp-python's server and the demo model.

Needs the `local` extra and the bridge (a dev dependency); skipped without them, except in
CI. The bridge streams only and drops `tool_choice`, so what is checked is the wire:
streamed text, the history sent as Responses input, and the bridge's `null` answer to a
non-streamed request read as a typed error.
"""

from __future__ import annotations

import importlib
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import httpx
import pytest

from advisorchain import (
    AssistantMessage,
    Chain,
    ChatOptions,
    ChatRequest,
    ReasoningPart,
    ResponseCompleted,
    SystemMessage,
    TextDelta,
    TextPart,
    UserMessage,
)
from advisorchain.providers import InvalidResponseError, OpenAIResponsesChatModel

_READY_WITHIN = 180.0  # seconds; loading takes about one, but CI machines are shared

pytestmark = pytest.mark.anyio


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _start(command: list[str], ready: str, log: IO[str], **options: Any) -> subprocess.Popen[str]:
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, text=True, **options)
    deadline = time.monotonic() + _READY_WITHIN
    while time.monotonic() < deadline and process.poll() is None:
        try:
            if httpx.get(ready, timeout=2).status_code == 200:
                return process
        except httpx.TransportError:
            pass
        time.sleep(0.25)
    _stop(process)
    log.seek(0)
    pytest.fail(f"{command[2]} did not start (exit code {process.poll()}):\n{log.read()}")


def _stop(process: subprocess.Popen[str]) -> None:
    process.terminate()
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


@pytest.fixture(scope="module")
def responses_url(local_model_path: Path) -> Iterator[str]:
    """The bridge's base URL (it serves `POST /responses`), over `llama_cpp.server`."""
    try:
        importlib.import_module("open_responses_server")
    except ImportError as exc:
        if os.environ.get("CI"):
            raise
        pytest.skip(f"open-responses-server is not installed: {exc}")
    llama_port, bridge_port = _free_port(), _free_port()
    with tempfile.TemporaryDirectory() as folder, tempfile.TemporaryFile(mode="w+") as log:
        llama = _start(
            [
                sys.executable,
                "-m",
                "llama_cpp.server",
                "--model",
                str(local_model_path),
                "--model_alias",
                "qwen",
                "--n_ctx",
                "2048",
                "--host",
                "127.0.0.1",
                "--port",
                str(llama_port),
            ],
            f"http://127.0.0.1:{llama_port}/v1/models",
            log,
        )
        try:
            env = {
                **os.environ,
                "OPENAI_BASE_URL_INTERNAL": f"http://127.0.0.1:{llama_port}",
                "OPENAI_API_KEY": "unused",
                "MCP_SERVERS_CONFIG_PATH": str(Path(folder) / "none.json"),
            }
            bridge = _start(
                [
                    sys.executable,
                    "-m",
                    "uvicorn",
                    "open_responses_server.api_controller:app",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(bridge_port),
                ],
                f"http://127.0.0.1:{bridge_port}/health",
                log,
                env=env,
                cwd=folder,  # it reads a .env file from its working directory
            )
            try:
                yield f"http://127.0.0.1:{bridge_port}"
            finally:
                _stop(bridge)
        finally:
            _stop(llama)


def _model(url: str) -> OpenAIResponsesChatModel:
    return OpenAIResponsesChatModel("qwen", base_url=url, include=())


async def test_a_streamed_answer_through_a_chain(responses_url: str) -> None:
    async with _model(responses_url) as model:
        chain = Chain(model=model)
        events = [e async for e in chain.stream("Say hello in three words.", max_tokens=24)]
    final = events[-1]
    assert isinstance(final, ResponseCompleted)
    texts = [e.text for e in events if isinstance(e, TextDelta)]
    assert texts and "".join(texts) == final.response.text
    assert final.response.finish_reason == "stop"
    assert (final.response.id or "").startswith("resp_")


async def test_the_history_is_sent_as_responses_input(responses_url: str) -> None:
    history = (
        SystemMessage(content="You answer with one word."),
        UserMessage(content="Name a color."),
        AssistantMessage(
            content=(
                ReasoningPart(text="hidden", signature="sig", provider="anthropic"),
                TextPart(text="Blue."),
            )
        ),
        UserMessage(content=(TextPart(text="Name another one."),)),
    )
    request = ChatRequest(messages=history, options=ChatOptions(max_tokens=16))
    async with _model(responses_url) as model:
        events = [e async for e in model.stream(request)]
    final = events[-1]
    assert isinstance(final, ResponseCompleted) and final.response.text.strip()


async def test_a_non_streamed_request_gets_the_bridges_null_as_a_typed_error(
    responses_url: str,
) -> None:
    request = ChatRequest(messages=(UserMessage(content="Hi"),))
    async with _model(responses_url) as model:
        with pytest.raises(InvalidResponseError, match="not a JSON object"):
            await model.call(request)
