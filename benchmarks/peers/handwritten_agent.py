"""The floor: a hand-written tool loop over plain dicts, no framework.

Per round: the scripted model (a plain async function) returns an OpenAI-style message
dict; the loop appends it to a list, `json.loads` each call's arguments, runs the calls
with `asyncio.gather` (sync tools: `asyncio.to_thread`), and appends one tool dict per
result. No validation, no limits, no error handling: what the frameworks add on top of
this is their overhead.
"""

from __future__ import annotations

import asyncio
import json
import platform
from collections.abc import Callable
from typing import Any

from .. import scenario
from .errors import Unavailable

NAME = "handwritten"


def version() -> str:
    """The Python version (there is no framework)."""
    return f"python {platform.python_version()}"


async def model(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """The scripted model: pick the reply from the tool messages after the last user one."""
    scenario.mark()
    results = 0
    for m in reversed(messages):
        if m["role"] == "user":
            break
        if m["role"] == "tool":
            results += 1
    step = scenario.script(results)
    if isinstance(step, str):
        return {"role": "assistant", "content": step}
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": call_id,
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(args)},
            }
            for call_id, name, args in step
        ],
    }


async def build(variant: str, tool_kind: str = "async") -> scenario.Turn:
    """A turn function (only the bare variant exists)."""
    if variant != "bare":
        raise Unavailable("the hand-written loop has no middleware")
    sync_tools: dict[str, Callable[..., str]] = {
        "get_weather": scenario.weather,
        "get_time": scenario.local_time,
    }

    async def get_weather(city: str) -> str:
        return scenario.weather(city)

    async def get_time(city: str) -> str:
        return scenario.local_time(city)

    async_tools = {"get_weather": get_weather, "get_time": get_time}

    async def run(call: dict[str, Any]) -> str:
        function = call["function"]
        args = json.loads(function["arguments"])
        if tool_kind == "sync":
            return await asyncio.to_thread(sync_tools[function["name"]], **args)
        if tool_kind == "inline":
            return sync_tools[function["name"]](**args)
        return await async_tools[function["name"]](**args)

    async def turn() -> str:
        messages: list[dict[str, Any]] = [{"role": "user", "content": scenario.PROMPT}]
        while True:
            reply = await model(messages)
            messages.append(reply)
            calls = reply.get("tool_calls")
            if not calls:
                content: str = reply["content"]
                return content
            results = await asyncio.gather(*(run(c) for c in calls))
            for call, result in zip(calls, results, strict=True):
                messages.append({"role": "tool", "tool_call_id": call["id"], "content": result})

    return turn
