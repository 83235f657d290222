"""One validator per wire format: the transcript rules each provider enforces (a 400
otherwise), checked on what the provider module would actually send.

Each returns the list of broken rules (empty: valid). `waiting=True` allows the calls
of the last assistant message to be unanswered (a turn that waits for them)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from advisorchain.core.messages import Message
from advisorchain.providers import anthropic, gemini, openai, openai_responses


def openai_chat_errors(messages: Sequence[Message], *, waiting: bool = False) -> list[str]:
    """Chat Completions: every `tool` message answers a call of the assistant message
    right before its run of tool messages, once; every call is answered before the next
    message that is not a tool result (the user message of tool media excepted)."""
    errors: list[str] = []
    wire = openai.wire_messages(messages)
    open_calls: set[str] = set()
    in_results = False
    for i, item in enumerate(wire):
        role = item["role"]
        if role == "tool":
            if not in_results or item["tool_call_id"] not in open_calls:
                errors.append(f"{i}: tool result {item['tool_call_id']} answers no open call")
            open_calls.discard(item["tool_call_id"])
            continue
        media_only = role == "user" and in_results and isinstance(item["content"], list)
        if media_only and (not open_calls or (waiting and i == len(wire) - 1)):
            continue
        if open_calls:
            errors.append(f"{i}: calls {sorted(open_calls)} unanswered before a {role} message")
        open_calls = set()
        in_results = False
        if role == "assistant" and item.get("tool_calls"):
            open_calls = {c["id"] for c in item["tool_calls"]}
            in_results = True
    if open_calls and not waiting:
        errors.append(f"end: calls {sorted(open_calls)} unanswered")
    return errors


def responses_errors(messages: Sequence[Message], *, waiting: bool = False) -> list[str]:
    """Responses: every `function_call_output` follows its `function_call`, once; every
    `function_call` has its output ("No tool output found for function call")."""
    errors: list[str] = []
    items = openai_responses.input_items(messages)
    called: dict[str, int] = {}
    answered: set[str] = set()
    for i, item in enumerate(items):
        if item.get("type") == "function_call":
            called[item["call_id"]] = i
        elif item.get("type") == "function_call_output":
            call_id = item["call_id"]
            if call_id not in called:
                errors.append(f"{i}: output for {call_id} with no call before it")
            if call_id in answered:
                errors.append(f"{i}: second output for {call_id}")
            answered.add(call_id)
    last_calls = _last_call_ids(items)
    for call_id in called:
        if call_id not in answered and not (waiting and call_id in last_calls):
            errors.append(f"No tool output found for function call {call_id}")
    return errors


def _last_call_ids(items: list[dict[str, Any]]) -> set[str]:
    found: set[str] = set()
    for item in reversed(items):
        if item.get("type") == "function_call":
            found.add(item["call_id"])
        elif item.get("type") == "function_call_output":
            continue
        elif found:
            break
        else:
            return set()
    return found


def anthropic_errors(messages: Sequence[Message], *, waiting: bool = False) -> list[str]:
    """Messages API: starts with a user message; roles alternate; the message after an
    assistant message with `tool_use` blocks is a user message that starts with one
    `tool_result` for each of them; a `tool_result` answers a `tool_use` of the message
    right before; no empty content."""
    errors: list[str] = []
    _, wire = anthropic.wire_messages(messages)
    if not wire:
        return ["no messages"]
    if wire[0]["role"] != "user":
        errors.append("the first message is not a user message")
    for i, item in enumerate(wire):
        if not item["content"]:
            errors.append(f"{i}: empty content")
        if i and wire[i - 1]["role"] == item["role"]:
            errors.append(f"{i}: two {item['role']} messages in a row")
        uses = [b["id"] for b in item["content"] if b.get("type") == "tool_use"]
        results = [b for b in item["content"] if b.get("type") == "tool_result"]
        if results:
            previous = wire[i - 1]["content"] if i else []
            asked = {b["id"] for b in previous if b.get("type") == "tool_use"}
            for block in results:
                if block["tool_use_id"] not in asked:
                    errors.append(f"{i}: tool_result {block['tool_use_id']} answers no tool_use")
            leading = 0
            while leading < len(item["content"]) and item["content"][leading]["type"] == (
                "tool_result"
            ):
                leading += 1
            if leading != len(results):
                errors.append(f"{i}: tool_result blocks not first")
        if uses:
            if i + 1 == len(wire):
                if not waiting:
                    errors.append(f"{i}: tool_use {uses} unanswered at the end")
                continue
            following = wire[i + 1]["content"]
            got = Counter(b["tool_use_id"] for b in following if b.get("type") == "tool_result")
            partial = waiting and i + 2 == len(wire) and not got - Counter(uses)
            if got != Counter(uses) and not partial:
                errors.append(f"{i}: tool_use {uses} answered by {dict(got)}")
    return errors


def gemini_errors(messages: Sequence[Message], *, waiting: bool = False) -> list[str]:
    """generateContent: starts with a user turn; no two model turns in a row; a model
    turn with `functionCall` parts is followed by a user turn of exactly as many
    `functionResponse` parts, of the same names; a `functionResponse` only there."""
    errors: list[str] = []
    contents = gemini.contents(messages)
    if not contents:
        return ["no contents"]
    if contents[0]["role"] != "user":
        errors.append("the first content is not a user turn")
    for i, item in enumerate(contents):
        if i and contents[i - 1]["role"] == item["role"] == "model":
            errors.append(f"{i}: two model turns in a row")
        calls = [p["functionCall"]["name"] for p in item["parts"] if "functionCall" in p]
        answers = [p["functionResponse"]["name"] for p in item["parts"] if "functionResponse" in p]
        if answers:
            previous = contents[i - 1]["parts"] if i else []
            asked = [p["functionCall"]["name"] for p in previous if "functionCall" in p]
            partial = waiting and i + 1 == len(contents) and not Counter(answers) - Counter(asked)
            if Counter(asked) != Counter(answers) and not partial:
                errors.append(f"{i}: functionResponse {answers} for functionCall {asked}")
        if calls:
            if i + 1 == len(contents):
                if not waiting:
                    errors.append(f"{i}: functionCall {calls} unanswered at the end")
                continue
            if not any("functionResponse" in p for p in contents[i + 1]["parts"]):
                errors.append(f"{i}: functionCall {calls} not followed by responses")
    return errors


VALIDATORS = {
    "openai-chat": openai_chat_errors,
    "openai-responses": responses_errors,
    "anthropic": anthropic_errors,
    "gemini": gemini_errors,
}


def wire_errors(messages: Sequence[Message], *, waiting: bool = False) -> dict[str, list[str]]:
    """The broken rules of every wire format (only the formats with any)."""
    found = {name: check(messages, waiting=waiting) for name, check in VALIDATORS.items()}
    return {name: errors for name, errors in found.items() if errors}


__all__ = [
    "VALIDATORS",
    "anthropic_errors",
    "gemini_errors",
    "openai_chat_errors",
    "responses_errors",
    "wire_errors",
]
