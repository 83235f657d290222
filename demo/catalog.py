"""A catalog of ~50 further business tools, so tool search has something to search.

They are declared programmatically (`Tool(name, description, schema, handler)`). A few
look-ups answer with fixed sample data (`SAMPLE_ANSWERS`); every other tool fails with
`NotInDemoShop`, which the model reads as an error: nothing was done. (A stub that
answered "done" made the model tell the customer that, say, their address was changed.)

Every tool is declared either `read_only` (a look-up, `READ_ONLY`) or `requires_approval`
(it changes something: the customer approves each call). The demo is the template users
copy: no tool that changes something runs without a person saying yes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeAlias

from ..core.context import ToolContext
from ..core.tools import Tool

_P = {
    "order_id": "The order id, like A-1001",
    "sku": "The product's SKU",
    "query": "Words to search for",
    "amount": "An amount of money",
    "code": "A coupon or gift card code",
    "ticket_id": "A support ticket id",
    "address": "A full postal address",
    "date": "A date, YYYY-MM-DD",
    "city": "A city name",
    "text": "Free text",
    "rating": "A rating from 1 to 5",
    "phone": "A phone number",
}

_CATALOG: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("get_invoice", "Get the invoice of an order.", ("order_id",)),
    ("list_invoices", "List the customer's invoices.", ()),
    ("download_invoice_pdf", "Get a download link for an order's invoice PDF.", ("order_id",)),
    ("get_refund_status", "Check the status of a refund for an order.", ("order_id",)),
    ("request_refund", "Request a refund for a delivered order.", ("order_id", "text")),
    ("get_shipping_rates", "Shipping options and prices to a city.", ("city",)),
    ("track_shipment", "Detailed tracking events of a shipped order.", ("order_id",)),
    ("update_shipping_address", "Change where an unshipped order goes.", ("order_id", "address")),
    (
        "change_delivery_date",
        "Move the delivery of an order to another date.",
        ("order_id", "date"),
    ),
    ("get_return_label", "Get a return shipping label for an order.", ("order_id",)),
    ("start_return", "Start returning a delivered order.", ("order_id", "text")),
    ("get_return_status", "Check the status of a return.", ("order_id",)),
    ("list_payment_methods", "List the customer's saved payment methods.", ()),
    ("add_payment_method", "Start adding a card or bank account.", ()),
    ("remove_payment_method", "Remove a saved payment method.", ("text",)),
    ("get_loyalty_points", "The customer's loyalty points balance.", ()),
    ("redeem_loyalty_points", "Turn loyalty points into a voucher.", ("amount",)),
    ("apply_coupon", "Apply a coupon code to an unshipped order.", ("order_id", "code")),
    ("validate_coupon", "Check whether a coupon code is valid.", ("code",)),
    ("get_product_details", "Description, price and specs of a product.", ("sku",)),
    ("search_products", "Search the product catalog.", ("query",)),
    ("check_stock", "Whether a product is in stock, and where.", ("sku",)),
    ("get_product_reviews", "Customer reviews of a product.", ("sku",)),
    ("add_product_review", "Write a review for a product.", ("sku", "rating", "text")),
    ("get_price_history", "How a product's price changed over time.", ("sku",)),
    ("create_wishlist", "Create a new wishlist.", ("text",)),
    ("add_to_wishlist", "Add a product to the wishlist.", ("sku",)),
    ("get_wishlist", "Show the customer's wishlist.", ()),
    ("subscribe_back_in_stock", "Notify the customer when a product is back.", ("sku",)),
    ("get_store_hours", "Opening hours of the stores in a city.", ("city",)),
    ("find_nearby_stores", "Stores near a city.", ("city",)),
    ("reserve_in_store_pickup", "Reserve a product for pickup in a store.", ("sku", "city")),
    ("get_gift_card_balance", "The balance of a gift card.", ("code",)),
    ("buy_gift_card", "Buy a gift card of some amount.", ("amount",)),
    ("update_email_preferences", "Choose which emails the customer receives.", ("text",)),
    ("unsubscribe_newsletter", "Stop the newsletter.", ()),
    ("get_account_settings", "Show the customer's account settings.", ()),
    ("update_phone_number", "Change the phone number on file.", ("phone",)),
    ("send_password_reset_link", "Email a password reset link.", ()),
    ("get_billing_address", "The billing address of an order.", ("order_id",)),
    ("split_order", "Ship the available items of an order now.", ("order_id",)),
    ("merge_orders", "Ship two unshipped orders together.", ("order_id", "text")),
    ("expedite_order", "Upgrade an order to express shipping.", ("order_id",)),
    ("get_warranty_status", "Warranty coverage of a product bought in an order.", ("order_id",)),
    ("file_warranty_claim", "File a warranty claim for a broken product.", ("order_id", "text")),
    ("open_support_ticket", "Open a ticket with the support team.", ("text",)),
    ("get_support_ticket", "Status of a support ticket.", ("ticket_id",)),
    ("escalate_support_ticket", "Escalate a support ticket to a supervisor.", ("ticket_id",)),
    ("rate_support_conversation", "Rate a conversation with support.", ("ticket_id", "rating")),
    ("get_delivery_photo", "The courier's photo of a delivered parcel.", ("order_id",)),
    ("report_damaged_item", "Report that an item arrived damaged.", ("order_id", "text")),
    ("report_missing_package", "Report a parcel marked delivered but not received.", ("order_id",)),
)


READ_ONLY: frozenset[str] = frozenset(
    {
        "get_invoice",
        "list_invoices",
        "download_invoice_pdf",
        "get_refund_status",
        "get_shipping_rates",
        "track_shipment",
        "get_return_label",
        "get_return_status",
        "list_payment_methods",
        "get_loyalty_points",
        "validate_coupon",
        "get_product_details",
        "search_products",
        "check_stock",
        "get_product_reviews",
        "get_price_history",
        "get_wishlist",
        "get_store_hours",
        "find_nearby_stores",
        "get_gift_card_balance",
        "get_account_settings",
        "get_billing_address",
        "get_warranty_status",
        "get_support_ticket",
        "get_delivery_photo",
    }
)
"""The catalog's look-ups: they change nothing. Every other catalog tool needs approval."""

SAMPLE_ANSWERS: Mapping[str, str] = {
    "get_loyalty_points": "The customer has 1240 loyalty points (worth 12.40 EUR).",
    "track_shipment": (
        "Order {order_id}: picked up by DHL in Leipzig on Nov 29, in transit since Nov 30, "
        "delivery expected Dec 2."
    ),
    "get_store_hours": "The store in {city} is open Monday to Saturday, 9:00 to 20:00.",
    "get_refund_status": "No refund has been requested for order {order_id}.",
    "list_payment_methods": "Saved: a Visa card ending in 4242 (default) and PayPal.",
    "get_warranty_status": "The item of order {order_id} is under warranty until Nov 2028.",
    "get_gift_card_balance": "Gift card {code} has 25.00 EUR left.",
}
"""The catalog tools that answer with data, and what they say (arguments filled in)."""


class NotInDemoShop(RuntimeError):
    """A catalog tool the demo shop does not implement: nothing was done."""


def _schema(params: tuple[str, ...]) -> dict[str, Any]:
    properties: dict[str, Any] = {}
    for name in params:
        kind = "integer" if name == "rating" else "number" if name == "amount" else "string"
        properties[name] = {"type": kind, "description": _P[name]}
    return {"type": "object", "properties": properties, "required": list(params)}


OrderCheck: TypeAlias = Callable[[str, Mapping[str, Any]], None]
"""Raises unless an order id is the asking customer's (`OrderTools.check_order`)."""


def _handler(name: str, check_order: OrderCheck | None) -> Any:
    def handle(arguments: Mapping[str, Any], context: ToolContext) -> str:
        order_id = arguments.get("order_id")
        if check_order is not None and order_id is not None:
            check_order(str(order_id), context)
        answer = SAMPLE_ANSWERS.get(name)
        if answer is None:
            raise NotInDemoShop(f"{name} is not available in the demo shop; nothing was changed")
        return answer.format_map({k: str(v) for k, v in arguments.items()})

    return handle


def business_catalog(check_order: OrderCheck | None = None) -> list[Tool]:
    """The demo's further business tools (about 50), fresh `Tool` objects: the look-ups
    `read_only`, every other one `requires_approval`. With `check_order`, a tool given an
    order id first checks it is the asking customer's (else it fails with what
    `check_order` raised), as every order tool of a real shop would."""
    return [
        Tool(
            name,
            description,
            _schema(params),
            _handler(name, check_order),
            run_inline=True,
            read_only=name in READ_ONLY,
            requires_approval=name not in READ_ONLY,
        )
        for name, description, params in _CATALOG
    ]


__all__ = ["READ_ONLY", "SAMPLE_ANSWERS", "NotInDemoShop", "OrderCheck", "business_catalog"]
