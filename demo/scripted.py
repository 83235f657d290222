"""`--model scripted`: a rule-based stand-in for a model, instant and deterministic.

It reads the request the way a model would (the question, the attached tools, the tool
results so far) and answers with tool calls or text, so the whole chain runs for real.
"""

from __future__ import annotations

import re

from ..advisors.small_model import DONE, NOT_DONE, RESULTS_HEADING
from ..core.messages import ToolCall, ToolMessage, UserMessage
from ..core.request import ChatRequest
from ..providers.scripted import Reply, ScriptedChatModel

_ORDER_ID = re.compile(r"\b([A-Za-z])-?(\d{4})\b")


def _order_id(text: str) -> str | None:
    match = _ORDER_ID.search(text)
    return f"{match.group(1).upper()}-{match.group(2)}" if match else None


def _question(request: ChatRequest) -> str:
    for message in reversed(request.messages):
        if isinstance(message, UserMessage):
            return message.text
    return ""


def order_assistant_reply(request: ChatRequest) -> Reply:
    """The scripted assistant's next reply to `request`."""
    last = request.messages[-1] if request.messages else None
    if isinstance(last, UserMessage) and last.text.startswith(RESULTS_HEADING):
        reply = _after_results_text(request, last.text)
        if reply is not None:
            return reply
    if isinstance(last, ToolMessage):
        return _after_tool(request, last)
    question = _question(request).lower()
    order_id = _order_id(question)
    if "cancel" in question:
        if request.find_tool("prepare_cancellation") is None:
            return "I'm sorry, I cannot cancel orders in this session."
        if order_id is None:
            return "Which order should I cancel? Please give its id, like A-1002."
        return ToolCall.from_arguments("prepare_cancellation", {"order_id": order_id})
    if any(word in question for word in ("email", "contact", "phone", "address on file")):
        return ToolCall.from_arguments("get_customer_contact", {})
    if order_id is not None:
        return ToolCall.from_arguments("get_order_status", {"order_id": order_id})
    if any(word in question for word in ("order", "pay", "price", "bought", "cost")):
        return ToolCall.from_arguments("get_customer_orders", {})
    return "I can look up your orders, show your contact details and cancel an order."


def _after_results_text(request: ChatRequest, content: str) -> Reply | None:
    # Tool results shown as text (SmallModelAdvisor): go on from the latest one; after
    # only a search, from the question (`None`).
    first = [line for line in content.split("\n") if line.startswith("- ")][-1][2:]
    if first.startswith("search_tools("):
        return None
    if f" {NOT_DONE}: " in first:
        return f"I could not do that: {first.split(f' {NOT_DONE}: ', 1)[1]}"
    result = first.split(" returned: ", 1)[-1].split(f" {DONE}: ", 1)[-1]
    may_call = request.options.tool_choice != "none" and request.find_tool("cancel_order")
    order_id = _order_id(result)
    if first.startswith("prepare_cancellation(") and may_call and order_id is not None:
        return ToolCall.from_arguments("cancel_order", {"order_id": order_id})
    return result


def _after_tool(request: ChatRequest, result: ToolMessage) -> Reply:
    if result.is_error:
        reason = result.text.split(": ", 1)[-1]
        return f"I could not do that: {reason}"
    may_call = request.options.tool_choice != "none"
    if result.name == "prepare_cancellation" and may_call and request.find_tool("cancel_order"):
        order_id = _order_id(result.text)
        if order_id is not None:
            return ToolCall.from_arguments("cancel_order", {"order_id": order_id})
    if result.name == "get_customer_contact":
        return f"Here are the contact details on file: {result.text}"
    return result.text


def scripted_order_model() -> ScriptedChatModel:
    """The `--model scripted` model."""
    return ScriptedChatModel(order_assistant_reply, model_name="scripted-order-assistant")


__all__ = ["order_assistant_reply", "scripted_order_model"]
