"""The order assistant's tools: thin wrappers that delegate to the `OrderService`.

Who is asking (tenant and customer) comes from the tool context, never from the model:
the tools have no such parameters, and their results never mention either.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import Field

from ..core.context import ToolContext
from ..core.tools import Tool, default_result_converter, tool, tools_from
from .orders import Order, OrderNotFound, OrderService

OrderId = Annotated[str, Field(description="The order id, like A-1001")]
ItemWords = Annotated[
    str, Field(max_length=100, description="Words of an item's name, to list only its orders")
]

_EMAIL = re.compile(
    r"([A-Za-z0-9._%+-])[A-Za-z0-9._%+-]*@([A-Za-z0-9-])[A-Za-z0-9.-]*(\.[A-Za-z]{2,})"
)


def mask_emails(value: Any) -> str:
    """Result converter: the default text of `value`, with every email address masked.

    `ada.lovelace@example.com` becomes `a***@e***.com`: enough for the customer to
    recognize, useless to anyone who reads the transcript.
    """
    return _EMAIL.sub(r"\1***@\2***\3", default_result_converter(value))


def _words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z0-9-]+", text.lower()) if len(w) > 3}


def _item_words(order: Order) -> set[str]:
    return {w for item in order.items for w in _words(item)}


def _who(context: Mapping[str, Any]) -> tuple[str, str]:
    try:
        return str(context["tenant_id"]), str(context["user_id"])
    except KeyError:
        raise PermissionError("the session has no tenant_id/user_id in its tool context") from None


class OrderTools:
    """The tools over one `OrderService`.

    `read_tools` are attached to every request; `cancellation_tools` only to the requests
    of sessions that may cancel orders.
    """

    def __init__(self, service: OrderService) -> None:
        self.service = service

    @property
    def read_tools(self) -> list[Tool]:
        """Look-ups: always attached."""
        return [self.get_order_status, self.get_customer_orders, self.get_customer_contact]

    @property
    def cancellation_tools(self) -> list[Tool]:
        """Changes: attached per request, when the session may cancel."""
        return [self.prepare_cancellation, self.cancel_order]

    @property
    def all_tools(self) -> list[Tool]:
        """Every tool of the assistant."""
        return tools_from(self)

    @tool(run_inline=True, read_only=True)
    def get_order_status(self, order_id: OrderId, context: ToolContext) -> str:
        """Look up one order by the id the customer gave (like A-1001): status, items, total,
        carrier, shipping and delivery dates. Without an order id, use get_customer_orders."""
        tenant, user = _who(context)
        return self.service.order(tenant, user, order_id).describe()

    @tool(run_inline=True, read_only=True)
    def get_customer_orders(
        self,
        context: ToolContext,
        status: Literal["any", "processing", "shipped", "delivered", "cancelled"] = "any",
        item: ItemWords = "",
    ) -> str:
        """List the customer's orders with their items, totals and status: for questions
        about the customer's orders, or about an item, without an order id."""
        tenant, user = _who(context)
        orders = [o for o in self.service.orders(tenant, user) if status in ("any", o.status)]
        if item.strip():
            wanted = _words(item)
            orders = [o for o in orders if wanted & _item_words(o)]
        if not orders:
            return "The customer has no such orders."
        return " ".join(o.describe() for o in orders)

    def orders_about(self, text: str, context: ToolContext) -> str:
        """The customer's orders whose items `text` names (every order if it names none),
        described as `get_customer_orders` describes them. Not a tool: what the chain
        answers a look-up with an order id nobody gave (see `demo.chain.GivenIdsOnly`)."""
        tenant, user = _who(context)
        orders = self.service.orders(tenant, user)
        words = _words(text)
        chosen = [o for o in orders if words & _item_words(o)] or orders
        if not chosen:
            return "The customer has no orders."
        return " ".join(o.describe() for o in chosen)

    def named_items(self, text: str, context: Mapping[str, Any]) -> list[str]:
        """The items of the customer's orders that `text` names (a word of four letters or
        more in common), in order; none without a customer in `context`. Not a tool: the
        demo's look-ups before the model is asked (see `demo.lookups`)."""
        try:
            tenant, user = _who(context)
        except PermissionError:
            return []
        words = _words(text)
        items = (i for o in self.service.orders(tenant, user) for i in o.items)
        return list(dict.fromkeys(i for i in items if words & _words(i)))

    def owns(self, order_id: str, context: Mapping[str, Any]) -> bool:
        """Whether `order_id` is an order of the customer the tool context names."""
        try:
            self.check_order(order_id, context)
        except (OrderNotFound, PermissionError):
            return False
        return True

    def check_order(self, order_id: str, context: Mapping[str, Any]) -> None:
        """Raise `OrderNotFound` unless `order_id` is the asking customer's order (the
        catalog's order tools check with it: see `demo.catalog.business_catalog`)."""
        tenant, user = _who(context)
        self.service.order(tenant, user, order_id)

    @tool(run_inline=True, read_only=True, result_converter=mask_emails)
    def get_customer_contact(
        self, context: ToolContext, detail: Literal["all", "email", "phone"] = "all"
    ) -> dict[str, str]:
        """The customer's contact details on file: name, email, phone."""
        tenant, user = _who(context)
        customer = self.service.customer(tenant, user)
        details = {"name": customer.name, "email": customer.email, "phone": customer.phone}
        return details if detail == "all" else {"name": customer.name, detail: details[detail]}

    @tool(run_inline=True, read_only=True)
    def prepare_cancellation(self, order_id: OrderId, context: ToolContext) -> str:
        """Check whether an order can be cancelled and what would be refunded. Changes nothing."""
        tenant, user = _who(context)
        quote = self.service.quote_cancellation(tenant, user, order_id)
        return (
            f"Order {quote.order_id} can be cancelled; {quote.refund:.2f} {quote.currency} "
            "would be refunded. Nothing was changed yet."
        )

    @tool(run_inline=True, requires_approval=True)
    def cancel_order(self, order_id: OrderId, context: ToolContext) -> str:
        """Cancel one of the customer's orders (needs the customer's approval)."""
        tenant, user = _who(context)
        order = self.service.cancel(tenant, user, order_id)
        return (
            f"Order {order.id} is cancelled; {order.total:.2f} {order.currency} "
            "will be refunded within 5 days."
        )


__all__ = ["ItemWords", "OrderId", "OrderTools", "mask_emails"]
