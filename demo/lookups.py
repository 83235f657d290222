"""What the demo looks up before a small model is first asked (`SmallModelAdvisor(look_first=...)`).

A 0.5B model answers from whatever it was shown: earlier turns of the conversation, an
order id from the prompt's examples, its own guesses. It answers right when the facts of
the question are already in front of it, so the demo looks them up first, from the words
of the question alone, and leaves every change to the model (and the approver):

- each order id the question names: `get_order_status`, and for the customer's own orders
  each look-up tool search found for the question that needs only an order id;
- with no order id, the items of the customer's orders the question names:
  `get_customer_orders(item=...)`; else, if it speaks of orders, all of them;
  and each look-up tool search found that needs no arguments at all.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence

from ..core.messages import Message, ToolCall, UserMessage
from ..core.request import ChatRequest
from ..core.tools import Tool
from .tools import OrderTools

ORDER_ID = re.compile(r"\b([A-Za-z])-?(\d{3,})\b")
"""An order id as the shop writes them (`A-1001`), or as customers type them (`a1001`)."""
ASKS_FOR_A_CHANGE = re.compile(
    r"\b(?:cancel|change|update|modify|edit|redeem|remove|delete|split|buy|return|refund|"
    r"reset|replace|switch|move|convert|exchange|transfer|reserve|apply|send|subscribe|"
    r"unsubscribe|upgrade|expedite|merge)\b"
    r"|\bturn\b.{0,60}\binto\b",
    re.IGNORECASE,
)
"""A request for an action, by its verb's base form (`cancel A-1002`, not `is A-1002
cancelled?`), or `turn X into Y`."""
SPEAKS_OF_ORDERS = re.compile(r"\b(?:orders?|bought|purchases?|purchased)\b", re.IGNORECASE)
"""A question about the customer's orders in general."""
MAX_IDS = 3
"""At most this many order ids of one question are looked up."""
MAX_LOOKUPS = 6
"""At most this many look-ups before the model is asked."""


def latest_question(messages: Sequence[Message]) -> str:
    """The text of the latest user message."""
    for message in reversed(messages):
        if isinstance(message, UserMessage):
            return message.text
    return ""


def named_ids(question: str) -> list[str]:
    """The order ids `question` names, upper-cased, in order, at most `MAX_IDS`."""
    found = (f"{letter.upper()}-{digits}" for letter, digits in ORDER_ID.findall(question))
    return list(dict.fromkeys(found))[:MAX_IDS]


def named_orders(request: ChatRequest) -> list[ToolCall]:
    """`get_order_status` for each order id the latest question names, unless it asks for a
    change: the order look-ups alone, for any chain with that tool (see `FirstLookUps`)."""
    question = latest_question(request.messages)
    if ASKS_FOR_A_CHANGE.search(question):
        return []
    return [_status(i) for i in named_ids(question)]


class FirstLookUps:
    """The demo's `look_first`: the look-ups a question needs (see the module).

    `own` are the names of the tools that are not search results (the order tools and
    tool search's own tool): the found tools are the attached look-ups (`read_only`)
    outside `own`. A question that asks for a change (`ASKS_FOR_A_CHANGE`) gets no
    look-ups. Found tools get an order id only for an order of the customer's own (the
    tool context says who is asking), so nothing is looked up about anyone else's.
    """

    def __init__(self, tools: OrderTools, *, own: Collection[str]) -> None:
        self.tools = tools
        self.own = frozenset(own)

    def __call__(self, request: ChatRequest) -> list[ToolCall]:
        """The look-ups for the latest question of `request`, at most `MAX_LOOKUPS`."""
        question = latest_question(request.messages)
        if not question or ASKS_FOR_A_CHANGE.search(question):
            return []
        found = [t for t in request.tools if t.read_only and t.name not in self.own]
        context = request.tool_context
        calls: list[ToolCall] = []
        ids = named_ids(question)
        by_id = [t for t in found if _required(t) == ["order_id"]]
        for order_id in ids:
            calls.append(_status(order_id))
            if by_id and self.tools.owns(order_id, context):
                calls += [ToolCall.from_arguments(t.name, {"order_id": order_id}) for t in by_id]
        if not ids:
            items = self.tools.named_items(question, context)[:MAX_IDS]
            calls += [ToolCall.from_arguments("get_customer_orders", {"item": i}) for i in items]
            if not items and SPEAKS_OF_ORDERS.search(question):
                calls.append(ToolCall.from_arguments("get_customer_orders", {}))
            calls += [ToolCall.from_arguments(t.name, {}) for t in found if not _required(t)]
        return calls[:MAX_LOOKUPS]


def _status(order_id: str) -> ToolCall:
    return ToolCall.from_arguments("get_order_status", {"order_id": order_id})


def _required(tool: Tool) -> list[str]:
    required = tool.definition.parameters.get("required", [])
    return [str(r) for r in required] if isinstance(required, list) else []


__all__ = [
    "ASKS_FOR_A_CHANGE",
    "MAX_IDS",
    "MAX_LOOKUPS",
    "ORDER_ID",
    "SPEAKS_OF_ORDERS",
    "FirstLookUps",
    "latest_question",
    "named_ids",
    "named_orders",
]
