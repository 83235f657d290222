"""The demo as a template (issue 38): a safe catalog, no class names, no guessed ids."""

from __future__ import annotations

import io
import re

import pytest

from advisorchain import ChatRequest, ToolCall, ToolContext
from advisorchain.core.invocation import ToolInvocation
from advisorchain.demo.app import DemoOptions, run_demo
from advisorchain.demo.catalog import READ_ONLY, business_catalog
from advisorchain.demo.chain import tool_error_text
from advisorchain.demo.orders import CancellationRefused, OrderNotFound, OrderService
from advisorchain.demo.scripted import scripted_order_model
from advisorchain.demo.tools import OrderTools
from advisorchain.providers import Reply, ScriptedChatModel

TENANT, USER = "tenant-acme-7f3a", "user-ada-91c2"
READ_VERBS = ("get_", "list_", "check_", "search_", "find_", "validate_", "download_", "track_")


def _all_tools() -> list:  # type: ignore[type-arg]
    return [*OrderTools(OrderService.sample()).all_tools, *business_catalog()]


def test_every_tool_that_changes_something_requires_approval() -> None:
    """Walks the whole catalog: each tool is a look-up or asks the customer first."""
    for t in _all_tools():
        assert t.read_only != t.requires_approval, t.name
        if t.read_only and t.name != "prepare_cancellation":
            assert t.name.startswith(READ_VERBS), f"{t.name} is read_only but sounds like a change"
    catalog = {t.name: t for t in business_catalog()}
    assert READ_ONLY <= set(catalog)
    # the ones seen called for read-only questions
    for name in (
        "update_shipping_address",
        "redeem_loyalty_points",
        "split_order",
        "remove_payment_method",
        "buy_gift_card",
        "start_return",
        "request_refund",
    ):
        assert catalog[name].requires_approval and not catalog[name].read_only


def _invocation(name: str = "get_order_status") -> ToolInvocation:
    tool = next(t for t in _all_tools() if t.name == name)
    call = ToolCall.from_arguments(name, {"order_id": "A-1004"})
    return ToolInvocation(
        tool=tool,
        call=call,
        arguments={"order_id": "A-1004"},
        context=ToolContext({}),
        request=ChatRequest(messages=()),
    )


def test_tool_errors_read_without_class_names() -> None:
    text = tool_error_text(OrderNotFound("no order 'A-1004' for this customer"), _invocation())
    assert text == "Error: no order 'A-1004' for this customer"
    text = tool_error_text(CancellationRefused("order A-1001 is shipped"), _invocation())
    assert text == "Error: order A-1001 is shipped"
    # an unexpected failure says nothing of its insides
    text = tool_error_text(KeyError("/srv/secret/path"), _invocation())
    assert text == "Error: get_order_status failed; nothing was done."


CLASS_NAME = re.compile(r"\b[A-Z][a-z]+(?:[A-Z][a-z]+)+\b|\w+Error\b")


@pytest.mark.anyio
@pytest.mark.parametrize("small", [False, True])
async def test_customer_text_never_shows_exception_class_names(small: bool) -> None:
    """The scripted model repeats the tool's error, as small models do."""
    model = scripted_order_model()
    if small:
        model.provider_name = "llama.cpp"
    out = io.StringIO()
    questions = ("Show me the details of order A-1004.", "Please cancel my order A-1001.")
    await run_demo(DemoOptions(approval="yes", questions=questions), out=out, model=model)
    answers = [line for line in out.getvalue().splitlines() if line.startswith("assistant> ")]
    assert len(answers) == 2
    assert "no order 'A-1004'" in answers[0] and "A-1001 is shipped" in answers[1]
    for answer in answers:
        assert not CLASS_NAME.search(answer), answer
    # what the model read had no class names either
    for request in model.requests:
        for message in request.messages:
            assert "OrderNotFound" not in message.text and "CancellationRefused" not in message.text


def _guessing(request: ChatRequest) -> Reply:
    """Answers an item question the way the 0.5B and 1.5B models did: a guessed id."""
    last = request.messages[-1]
    if last.role == "user" and "Results" not in last.text:
        return ToolCall.from_arguments("get_order_status", {"order_id": "A-1001"})
    return last.text


@pytest.mark.anyio
async def test_an_item_question_is_answered_from_the_customers_orders() -> None:
    model = ScriptedChatModel(_guessing)
    model.provider_name = "llama.cpp"
    out = io.StringIO()
    options = DemoOptions(approval="yes", questions=("What did I pay for the ergonomic chair?",))
    await run_demo(options, out=out, model=model)
    # the item's orders were looked up before the model was asked: it answers from them
    (asked,) = model.requests
    shown = asked.messages[-1].text
    assert (
        'get_customer_orders(item="ergonomic chair") returned: '
        "Order A-1003 (ergonomic chair; total 249.00 EUR) is delivered." in shown
    )
    assert "89.90" not in shown  # not another order


@pytest.mark.anyio
async def test_a_guessed_order_id_is_answered_with_the_customers_orders() -> None:
    """An item none of the customer's orders has: nothing is looked up first, the model
    guesses an id, and `GivenIdsOnly` answers with the customer's orders instead."""
    model = ScriptedChatModel(_guessing)
    model.provider_name = "llama.cpp"
    out = io.StringIO()
    options = DemoOptions(approval="yes", questions=("What did I pay for the velvet sofa?",))
    await run_demo(options, out=out, model=model)
    shown = model.requests[-1].messages[-1].text
    assert 'get_order_status(order_id="A-1001") returned: (No order id was given' in shown
    assert "Order A-1003 (ergonomic chair; total 249.00 EUR) is delivered." in shown


def test_orders_about_names_the_items_or_lists_all() -> None:
    tools = OrderTools(OrderService.sample())
    context = ToolContext({"tenant_id": TENANT, "user_id": USER})
    assert tools.orders_about("When will my desk lamp ship?", context).startswith(
        "Order A-1002 (desk lamp"
    )
    every = tools.orders_about("What did I buy?", context)
    assert all(f"Order A-100{i}" in every for i in (1, 2, 3)) and "A-1004" not in every


@pytest.mark.anyio
async def test_a_change_with_a_guessed_id_is_not_run() -> None:
    service = OrderService.sample()
    model = ScriptedChatModel(
        [ToolCall.from_arguments("cancel_order", {"order_id": "A-1002"}), "Which order?"]
    )
    out = io.StringIO()
    options = DemoOptions(approval="yes", questions=("Cancel my lamp order.",))
    await run_demo(options, out=out, model=model, service=service)
    assert service.order(TENANT, USER, "A-1002").status == "processing"
    assert "needs approval" not in out.getvalue()  # not even asked: the id was never given
    result = model.requests[-1].messages[-1]
    assert result.role == "tool" and "never gave the order id A-1002" in result.text


@pytest.mark.anyio
async def test_a_given_id_is_passed_on() -> None:
    model = ScriptedChatModel(
        [ToolCall.from_arguments("get_order_status", {"order_id": "a-1003"}), "Delivered."]
    )
    out = io.StringIO()
    await run_demo(DemoOptions(questions=("Is A1003 delivered?",)), out=out, model=model)
    result = model.requests[-1].messages[-1]
    assert result.role == "tool" and result.text.startswith("Order A-1003 (ergonomic chair")
