"""BFCL `simple_python` on the embedded model: advisorchain's parsing vs llama_cpp.server's.

    python -m benchmarks.bfcl_local [--queries 30]

The first `--queries` entries of BFCL v4 `simple_python` (data from the `bfcl-eval` wheel,
see `benchmarks/tool_search/bfcl.py`), each a question and one function, asked once per
method, the methods interleaved query by query, on the same GGUF file:

- `advisorchain`: `LlamaCppChatModel` in-process; the model writes its call as text
  (`<tool_call>{...}</tool_call>`), `core.text_tool_calls` turns it into a tool call.
- `llama_cpp.server`: `python -m llama_cpp.server` on 127.0.0.1 with its default chat
  handling, asked through its OpenAI-compatible API with `tools` and `tool_choice="auto"`;
  its `message.tool_calls` is what counts.

A query is fully correct when exactly one call names the function and every argument
given is one of BFCL's accepted values, with no required one missing and none unknown
(BFCL's AST check, simplified: strings compared case-insensitively, numbers by value).
Both use temperature 0 and at most 128 new tokens.
"""

from __future__ import annotations

import argparse
import json
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import anyio
import httpx

from advisorchain.core.messages import ToolCall, UserMessage
from advisorchain.core.options import ChatOptions
from advisorchain.core.request import ChatRequest
from advisorchain.core.tools import Tool

from .tool_search.bfcl import fetch, json_schema

MAX_TOKENS = 128


@dataclass(frozen=True)
class Entry:
    """One BFCL query: the question, its function, the accepted answer."""

    id: str
    question: str
    function: Mapping[str, Any]
    answer: Mapping[str, Mapping[str, list[Any]]]


def entries(count: int) -> list[Entry]:
    data = fetch()
    answers: dict[str, Any] = {}
    with open(data / "possible_answer" / "BFCL_v4_simple_python.json", encoding="utf-8") as f:
        for line in f:
            row = json.loads(line)
            answers[row["id"]] = row["ground_truth"][0]
    out: list[Entry] = []
    with open(data / "BFCL_v4_simple_python.json", encoding="utf-8") as f:
        for line in f:
            row = json.loads(line)
            text = "\n".join(m["content"] for m in row["question"][0] if m["role"] == "user")
            out.append(Entry(row["id"], text, row["function"][0], answers[row["id"]]))
            if len(out) == count:
                break
    return out


def _same(value: Any, accepted: Any) -> bool:
    if isinstance(accepted, str) and isinstance(value, str):
        return value.strip().lower() == accepted.strip().lower()
    if isinstance(accepted, bool) or isinstance(value, bool):
        return value is accepted
    if isinstance(accepted, (int, float)) and isinstance(value, (int, float)):
        return float(value) == float(accepted)
    if isinstance(accepted, list) and isinstance(value, list):
        return len(value) == len(accepted) and all(map(_same, value, accepted))
    if isinstance(accepted, dict) and isinstance(value, dict):
        return set(value) == set(accepted) and all(_same(value[k], accepted[k]) for k in value)
    return bool(value == accepted)


def correct(entry: Entry, calls: Sequence[tuple[str, str]]) -> bool:
    """Whether `calls` (name, JSON arguments) is exactly one accepted call."""
    if len(calls) != 1:
        return False
    name, raw = calls[0]
    ((expected_name, params),) = entry.answer.items()
    if name != expected_name:
        return False
    try:
        arguments = json.loads(raw)
    except ValueError:
        return False
    if not isinstance(arguments, dict) or set(arguments) - set(params):
        return False
    for param, accepted in params.items():
        if param not in arguments:
            if "" not in accepted:
                return False
        elif not any(_same(arguments[param], a) for a in accepted if a != ""):
            return False
    return True


def _tool(function: Mapping[str, Any]) -> Tool:
    schema = json_schema(function.get("parameters", {}))
    return Tool(function["name"], function.get("description", ""), schema, lambda a, c: "")


async def ask_in_process(model: Any, entry: Entry) -> list[tuple[str, str]]:
    request = ChatRequest(
        messages=(UserMessage(content=entry.question),),
        tools=(_tool(entry.function),),
        options=ChatOptions(temperature=0, max_tokens=MAX_TOKENS),
    )
    response = await model.call(request)
    calls: Sequence[ToolCall] = response.tool_calls
    return [(c.name, c.arguments) for c in calls]


def ask_server(client: httpx.Client, entry: Entry) -> list[tuple[str, str]]:
    tool = _tool(entry.function)
    body = {
        "model": "qwen",
        "messages": [{"role": "user", "content": entry.question}],
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": tool.name,
                    "description": tool.description,
                    "parameters": tool.definition.parameters,
                },
            }
        ],
        "tool_choice": "auto",
        "temperature": 0,
        "max_tokens": MAX_TOKENS,
    }
    reply = client.post("/chat/completions", json=body, timeout=600).json()
    message = reply["choices"][0]["message"]
    return [
        (c["function"]["name"], c["function"].get("arguments") or "{}")
        for c in message.get("tool_calls") or ()
    ]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def start_server(model_path: str, port: int, log: Any) -> subprocess.Popen[bytes]:
    process = subprocess.Popen(
        [sys.executable, "-m", "llama_cpp.server", "--model", model_path]
        + ["--model_alias", "qwen", "--n_ctx", "2048", "--host", "127.0.0.1", "--port", str(port)],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and process.poll() is None:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=2).status_code == 200:
                return process
        except httpx.TransportError:
            pass
        time.sleep(0.5)
    process.kill()
    raise RuntimeError("llama_cpp.server did not start")


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(prog="benchmarks.bfcl_local", description=__doc__)
    parser.add_argument("--queries", type=int, default=30)
    args = parser.parse_args(argv)
    from advisorchain.providers.llamacpp import LlamaCppChatModel
    from advisorchain.providers.local.weights import ensure_local_model

    path = ensure_local_model()
    model = LlamaCppChatModel(path, n_ctx=2048)
    chosen = entries(args.queries)
    scores = {"advisorchain": 0, "llama_cpp.server": 0}
    seconds = {"advisorchain": 0.0, "llama_cpp.server": 0.0}
    port = _free_port()
    with tempfile.TemporaryFile(mode="w+") as log:
        server = start_server(str(path), port, log)
        try:
            with httpx.Client(base_url=f"http://127.0.0.1:{port}/v1") as client:
                for number, entry in enumerate(chosen):
                    methods = ["advisorchain", "llama_cpp.server"]
                    for method in methods if number % 2 == 0 else reversed(methods):
                        started = time.perf_counter()
                        if method == "advisorchain":
                            calls = anyio.run(ask_in_process, model, entry)
                        else:
                            calls = ask_server(client, entry)
                        seconds[method] += time.perf_counter() - started
                        ok = correct(entry, calls)
                        scores[method] += ok
                        print(
                            f"{entry.id:<18} {method:<17} {'ok  ' if ok else 'FAIL'} {calls}",
                            file=sys.stderr,
                            flush=True,
                        )
        finally:
            server.terminate()
            server.wait(timeout=30)
    print(f"BFCL v4 simple_python, first {len(chosen)} queries, fully correct:")
    for method, score in scores.items():
        print(f"  {method:<17} {score}/{len(chosen)}  {seconds[method] / len(chosen):.1f} s/query")
    return {"queries": len(chosen), "scores": scores, "seconds": seconds}


if __name__ == "__main__":
    main()
