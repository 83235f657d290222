"""Tools from functions, methods and schemas: schemas, validation, execution, conversion."""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import threading
from typing import Annotated, Any, Literal

import pytest
from pydantic import BaseModel, Field

from advisorchain import (
    ChainConfigurationError,
    Tool,
    ToolContext,
    tool,
    tools_from,
)
from advisorchain.core.errors import ToolDefinitionError
from advisorchain.core.tools import InvalidToolArguments, ToolOptions


class Unit(enum.Enum):
    CELSIUS = "celsius"
    FAHRENHEIT = "fahrenheit"


class Address(BaseModel):
    street: str
    city: str = Field(description="City name")


@tool
def forecast(
    city: Annotated[str, Field(description="Where to look")],
    day: dt.date,
    unit: Unit = Unit.CELSIUS,
    detail: Literal["short", "long"] = "short",
    note: str | None = None,
    ctx: ToolContext | None = None,
) -> str:
    """Weather forecast for a city.

    Args:
        day: The day to forecast.
        unit: Temperature unit.
        note (str): A free note
            spanning two lines.
    """
    return f"{city} {day.isoformat()} {unit.value} {detail} {note}"


def test_schema_from_type_hints_and_docstring() -> None:
    definition = forecast.definition
    assert definition.name == "forecast"
    assert definition.description == "Weather forecast for a city."
    schema = dict(definition.parameters)
    props = schema["properties"]
    assert schema["required"] == ["city", "day"]
    assert props["city"]["description"] == "Where to look"
    assert props["day"] == {
        "description": "The day to forecast.",
        "format": "date",
        "type": "string",
    }
    assert props["detail"]["enum"] == ["short", "long"]
    assert props["note"]["description"] == "A free note spanning two lines."
    assert "ctx" not in props
    assert "title" not in schema and all("title" not in p for p in props.values())
    unit_schema = schema["$defs"]["Unit"]
    assert unit_schema["enum"] == ["celsius", "fahrenheit"]


def test_nested_models_and_optional() -> None:
    @tool
    def ship(to: Address, express: bool = False, items: list[int] | None = None) -> str:
        """Ship a parcel."""
        return f"{to.street}/{to.city}/{express}/{items}"

    schema = dict(ship.definition.parameters)
    assert schema["required"] == ["to"]
    assert schema["$defs"]["Address"]["properties"]["city"]["description"] == "City name"
    validated = ship.validate_arguments({"to": {"street": "Main", "city": "Oslo"}})
    assert validated.to == Address(street="Main", city="Oslo")


@pytest.mark.anyio
async def test_run_validates_and_injects_context() -> None:
    context = ToolContext({"tenant": "acme"}, call_id="c1", tool_name="forecast")

    @tool
    async def who(name: str, ctx: ToolContext) -> str:
        """Say who."""
        return f"{name}@{ctx['tenant']}#{ctx.call_id}"

    assert await who.run({"name": "bob"}, context) == "bob@acme#c1"
    assert "ctx" not in who.definition.parameters["properties"]
    result = await forecast.run(
        {"city": "Oslo", "day": "2026-01-02", "unit": "fahrenheit"}, context
    )
    assert result == "Oslo 2026-01-02 fahrenheit short None"


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({}, "city: missing required argument"),
        ({"city": "x", "day": "not a date"}, "day: "),
        ({"city": "x", "day": "2026-01-01", "unit": "kelvin"}, "unit: "),
        ({"city": "x", "day": "2026-01-01", "bogus": 1}, "bogus: unexpected argument"),
    ],
)
def test_invalid_arguments_are_described(arguments: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidToolArguments, match=message):
        forecast.validate_arguments(arguments)


@pytest.mark.anyio
async def test_sync_tools_run_in_a_worker_thread_unless_inline() -> None:
    loop_thread = threading.get_ident()

    @tool
    def where() -> int:
        """Thread id."""
        return threading.get_ident()

    @tool(run_inline=True)
    def where_inline() -> int:
        """Thread id, inline."""
        return threading.get_ident()

    assert await where.run({}, ToolContext()) != loop_thread
    assert await where_inline.run({}, ToolContext()) == loop_thread


class Orders:
    def __init__(self, prefix: str) -> None:
        self.prefix = prefix

    @tool
    def get_order(self, order_id: str) -> str:
        """Look up an order."""
        return f"{self.prefix}-{order_id}"

    @tool(name="count_orders", return_direct=True)
    async def count(self) -> int:
        """Count orders."""
        return 3


@pytest.mark.anyio
async def test_methods_bind_to_their_instance() -> None:
    first, second = tools_from(Orders("a")), tools_from(Orders("b"))
    assert [t.name for t in first] == ["get_order", "count_orders"]
    assert "self" not in first[0].definition.parameters["properties"]
    assert await first[0].run({"order_id": "1"}, ToolContext()) == "a-1"
    assert await second[0].run({"order_id": "1"}, ToolContext()) == "b-1"
    assert first[1].return_direct
    assert Orders("c").get_order("9") == "c-9"


@pytest.mark.anyio
async def test_unbound_method_tool_explains_itself() -> None:
    with pytest.raises(ToolDefinitionError, match="tools_from"):
        await Orders.get_order.run({"order_id": "1"}, ToolContext())


def test_tools_from_rejects_duplicate_names() -> None:
    @tool(name="get_order")
    def other(order_id: str) -> str:
        """Another."""
        return order_id

    with pytest.raises(ChainConfigurationError, match="get_order"):
        tools_from(Orders("a"), other)


@pytest.mark.anyio
async def test_tool_from_json_schema_and_handler() -> None:
    seen: list[tuple[dict[str, Any], ToolContext]] = []

    async def handler(arguments: dict[str, Any], context: ToolContext) -> dict[str, Any]:
        seen.append((arguments, context))
        return {"ok": arguments["n"] * 2}

    doubler = Tool(
        "double",
        "Double a number.",
        {
            "type": "object",
            "properties": {"n": {"type": "integer", "minimum": 0}},
            "required": ["n"],
            "additionalProperties": False,
        },
        handler,
    )
    value = await doubler.run({"n": 4}, ToolContext({"k": "v"}))
    assert value == {"ok": 8}
    assert doubler.convert_result(value) == '{"ok":8}'
    assert seen[0][1]["k"] == "v"
    bad_arguments: list[tuple[dict[str, Any], str]] = [
        ({}, "n: missing required argument"),
        ({"n": "4"}, "n: expected integer, got string"),
        ({"n": -1}, "n: must be >= 0"),
        ({"n": 1, "m": 2}, "m: unexpected argument"),
    ]
    for bad, message in bad_arguments:
        with pytest.raises(InvalidToolArguments, match=message):
            doubler.validate_arguments(bad)


@dataclasses.dataclass
class Receipt:
    order_id: str
    when: dt.datetime


class Customer(BaseModel):
    name: str
    email: str


def test_default_result_conversion() -> None:
    @tool
    def nothing() -> None:
        """Do it."""

    @tool
    def maybe() -> str | None:
        """Maybe."""
        return None

    @tool
    def receipt() -> Receipt:
        """Receipt."""
        return Receipt("o1", dt.datetime(2026, 1, 2, 3, 4, 5))

    assert nothing.convert_result(None) == "Done"
    assert maybe.convert_result(None) == "null"
    assert forecast.convert_result("plain text") == "plain text"
    assert receipt.convert_result(receipt()) == '{"order_id":"o1","when":"2026-01-02T03:04:05"}'
    assert receipt.convert_result(Customer(name="A", email="a@x.io")) == (
        '{"name":"A","email":"a@x.io"}'
    )


def mask_emails(value: Any) -> str:
    customer = Customer.model_validate(value)
    user, _, domain = customer.email.partition("@")
    return f"{customer.name} <{user[0]}***@{domain}>"


def test_custom_result_converter_masks_data() -> None:
    @tool(result_converter=mask_emails)
    def get_customer(customer_id: str) -> Customer:
        """Customer contact."""
        return Customer(name="Ada", email="ada.lovelace@example.com")

    assert get_customer.convert_result(get_customer("c1")) == "Ada <a***@example.com>"


def test_bad_declarations_are_clear_errors() -> None:
    def untyped(x):  # type: ignore[no-untyped-def]
        return x

    def variadic(*args: int) -> int:
        return 0

    async def agen() -> Any:
        yield 1

    with pytest.raises(ToolDefinitionError, match="needs a type annotation"):
        tool(untyped)
    with pytest.raises(ToolDefinitionError, match=r"\*args"):
        tool(variadic)
    with pytest.raises(ToolDefinitionError, match="generators"):
        tool(agen)
    with pytest.raises(ToolDefinitionError, match="invalid tool name"):
        Tool("has space", "x")


def test_reST_docstrings() -> None:
    @tool
    def greet(name: str, loud: bool = False) -> str:
        """Greet someone.

        :param name: Who to greet.
        :param loud: Shout it.
        :returns: The greeting.
        """
        return name

    props = greet.definition.parameters["properties"]
    assert greet.description == "Greet someone."
    assert props["name"]["description"] == "Who to greet."
    assert props["loud"]["description"] == "Shout it."


def test_tool_remains_callable_as_function() -> None:
    assert forecast("Oslo", dt.date(2026, 1, 1)) == "Oslo 2026-01-01 celsius short None"


_OPTION_VALUES: dict[str, Any] = {
    "return_direct": True,
    "requires_approval": True,
    "result_converter": lambda value: f"<{value}>",
    "timeout": 3.0,
    "run_inline": True,
    "metadata": {"owner": "billing"},
    "read_only": True,
    "idempotent": True,
    "sequential": True,
    "reports_progress": True,
    "idle_timeout": 2.0,
}


def test_tool_options_are_declared_once_and_taken_by_every_constructor() -> None:
    """`ToolOptions` is the one list: `Tool(...)`, `Tool.from_function` and `@tool(...)` take
    each of its keys to the attribute of the same name, and the defaults when left out."""
    assert set(ToolOptions.__optional_keys__) == set(_OPTION_VALUES)

    async def lookup(key: str) -> str:
        """Look a key up."""
        return key

    made = [
        Tool("lookup", "Look a key up.", handler=lambda args, ctx: "x", **_OPTION_VALUES),
        Tool.from_function(lookup, **_OPTION_VALUES),
        tool(**_OPTION_VALUES)(lookup),
    ]
    for t in made:
        for key, value in _OPTION_VALUES.items():
            assert getattr(t, key) == value, (t, key)
    for t in (Tool("plain", "Plain."), tool(lookup)):
        assert (t.return_direct, t.requires_approval, t.run_inline, t.read_only) == (
            False,
            False,
            False,
            False,
        )
        assert (t.idempotent, t.sequential, t.reports_progress) == (False, False, False)
        assert (t.timeout, t.idle_timeout, dict(t.metadata)) == (None, None, {})
        assert t.convert_result({"a": 1}) == '{"a":1}'


def test_an_unknown_tool_option_is_a_type_error_naming_it() -> None:
    async def lookup(key: str) -> str:
        """Look a key up."""
        return key

    typo: dict[str, Any] = {"read_ony": True}
    with pytest.raises(TypeError, match="read_ony"):
        Tool("lookup", "Look a key up.", **typo)
    with pytest.raises(TypeError, match="read_ony"):
        Tool.from_function(lookup, **typo)
    with pytest.raises(TypeError, match="read_ony"):
        tool(**typo)(lookup)
