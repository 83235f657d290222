"""What the demo looks up before a small model is asked (`demo.lookups.FirstLookUps`), and
the order checks the catalog and `get_customer_orders(item=...)` make (issue 38).

Grown by class of question: an order id of the customer's own, of someone else's; a
request for a change; an item and no id; orders in general; neither; no customer known;
too many ids.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from advisorchain import ChatRequest, UserMessage
from advisorchain.core.context import ToolContext
from advisorchain.core.tools import Tool
from advisorchain.demo.catalog import business_catalog
from advisorchain.demo.lookups import MAX_IDS, MAX_LOOKUPS, FirstLookUps
from advisorchain.demo.orders import OrderNotFound, OrderService
from advisorchain.demo.tools import OrderTools

TENANT, USER = "tenant-acme-7f3a", "user-ada-91c2"
WHO = {"tenant_id": TENANT, "user_id": USER}
CATALOG = {t.name: t for t in business_catalog()}


def _look(
    question: str, found: Sequence[str] = (), who: dict[str, Any] | None = None
) -> list[tuple[str, str]]:
    tools = OrderTools(OrderService.sample())
    attached = [*tools.read_tools, *(CATALOG[name] for name in found)]
    look = FirstLookUps(tools, own=[t.name for t in tools.read_tools])
    request = ChatRequest(
        messages=(UserMessage(content=question),),
        tools=tuple(attached),
        tool_context=WHO if who is None else who,
    )
    return [(c.name, c.arguments) for c in look(request)]


def test_an_own_order_is_looked_up_with_the_found_order_look_ups() -> None:
    calls = _look(
        "Is the chair from my order A-1003 still under warranty?",
        found=["get_warranty_status", "get_shipping_rates", "file_warranty_claim"],
    )
    assert calls == [
        ("get_order_status", '{"order_id":"A-1003"}'),
        ("get_warranty_status", '{"order_id":"A-1003"}'),
    ]  # not the look-up that needs a city, never the change


@pytest.mark.parametrize("written", ["a1003", "A1003", "a-1003"])
def test_an_order_id_typed_without_its_dash_or_in_lower_case(written: str) -> None:
    assert _look(f"is {written} under warranty?", found=["get_warranty_status"]) == [
        ("get_order_status", '{"order_id":"A-1003"}'),
        ("get_warranty_status", '{"order_id":"A-1003"}'),
    ]


@pytest.mark.parametrize("order_id", ["A-1004", "B-2001", "Z-9999"])
def test_someone_elses_order_gets_only_the_status_look_up(order_id: str) -> None:
    calls = _look(f"Can you track my shipment {order_id}?", found=["track_shipment"])
    assert calls == [("get_order_status", f'{{"order_id":"{order_id}"}}')]


@pytest.mark.parametrize(
    "question",
    [
        "Please cancel my order A-1002.",
        "Change the address of A-1002 to 1 Main St",
        "Please turn 500 of my loyalty points into a voucher.",
        "Could you convert my points to a voucher?",
        "I want to return my desk lamp",
    ],
)
def test_a_request_for_a_change_is_left_to_the_model(question: str) -> None:
    assert _look(question, found=["get_loyalty_points", "track_shipment"]) == []


@pytest.mark.parametrize(
    ("question", "items"),
    [
        ("What is the price of my desk lamp order?", ["desk lamp"]),
        ("Which carrier has my USB-C dock?", ["USB-C dock"]),
        ("when does the LAMP ship", ["desk lamp"]),
        ("Did the chair and the dock arrive?", ["USB-C dock", "ergonomic chair"]),
    ],
)
def test_an_item_without_an_order_id_lists_its_orders(question: str, items: list[str]) -> None:
    calls = _look(question, found=["get_price_history"])
    assert calls == [("get_customer_orders", f'{{"item":"{i}"}}') for i in items]


def test_orders_in_general_list_them_all_and_found_tools_without_arguments_run() -> None:
    assert _look("Which orders do I have?", found=["list_invoices"]) == [
        ("get_customer_orders", "{}"),
        ("list_invoices", "{}"),
    ]
    assert _look("Which payment methods have I saved?", found=["list_payment_methods"]) == [
        ("list_payment_methods", "{}")
    ]
    assert _look("What email address do you have on file for me?") == []


def test_without_a_customer_nothing_of_theirs_is_looked_up() -> None:
    assert _look("Where is my desk lamp?", who={}) == []
    assert _look("Where is A-1001?", found=["track_shipment"], who={}) == [
        ("get_order_status", '{"order_id":"A-1001"}')
    ]


def test_look_ups_are_bounded() -> None:
    ids = " ".join(f"A-{1000 + i}" for i in range(20))
    calls = _look(f"Where are {ids}?", found=["track_shipment", "get_invoice"])
    assert len({a for _, a in calls}) == MAX_IDS
    assert len(calls) == MAX_LOOKUPS


def _tool(name: str) -> Tool:
    return {t.name: t for t in business_catalog(OrderTools(OrderService.sample()).check_order)}[
        name
    ]


@pytest.mark.anyio
async def test_the_catalogs_order_tools_check_the_order_is_the_customers() -> None:
    context = ToolContext(WHO)
    track = _tool("track_shipment")
    assert (await track.run({"order_id": "A-1001"}, context)).startswith("Order A-1001: picked")
    for other in ("A-1004", "B-2001"):
        with pytest.raises(OrderNotFound):
            await track.run({"order_id": other}, context)
    with pytest.raises(PermissionError):
        await track.run({"order_id": "A-1001"}, ToolContext({}))
    # a tool without an order id is not checked
    assert "1240" in await _tool("get_loyalty_points").run({}, context)


@pytest.mark.anyio
async def test_customer_orders_by_item() -> None:
    tools = OrderTools(OrderService.sample())
    context = ToolContext(WHO)
    lamp = await tools.get_customer_orders.run({"item": "lamp"}, context)
    assert "A-1002" in lamp and "A-1001" not in lamp and "A-1003" not in lamp
    assert await tools.get_customer_orders.run({"item": "sofa"}, context) == (
        "The customer has no such orders."
    )
    everything = await tools.get_customer_orders.run({}, context)
    assert all(i in everything for i in ("A-1001", "A-1002", "A-1003"))
    assert "Order A-1003 (ergonomic chair; total 249.00 EUR) is delivered." in everything
    with pytest.raises(ValueError, match="item"):
        tools.get_customer_orders.validate_arguments({"item": "x" * 101})


def test_named_items_reads_the_customers_items_only() -> None:
    tools = OrderTools(OrderService.sample())
    assert tools.named_items("my monitor arm", WHO) == []  # another customer's item
    assert tools.named_items("the desk lamp", {"tenant_id": TENANT}) == []
    assert tools.named_items("the desk lamp", WHO) == ["desk lamp"]
