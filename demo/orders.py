"""The demo's in-memory order service: the business logic behind the tools.

The service itself enforces tenant isolation: every method takes the tenant and the
customer, and an order of another tenant or customer is reported exactly like one that
does not exist, so nothing leaks through error messages either.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

OrderStatus = Literal["processing", "shipped", "delivered", "cancelled"]


class OrderNotFound(LookupError):
    """No such order for this customer (also raised for other tenants' orders)."""


class CancellationRefused(ValueError):
    """The order cannot be cancelled any more."""


@dataclass(frozen=True, slots=True)
class Order:
    """One order of one customer of one tenant."""

    id: str
    tenant_id: str
    customer_id: str
    items: tuple[str, ...]
    total: float
    currency: str
    status: OrderStatus
    carrier: str | None = None
    eta: str | None = None

    def describe(self) -> str:
        """A sentence about the order, for the model (no tenant or customer ids)."""
        items = ", ".join(self.items)
        money = f"{self.total:.2f} {self.currency}"
        if self.status == "shipped":
            state = f"shipped with {self.carrier}, arriving {self.eta}"
        elif self.status == "processing":
            state = f"being prepared, shipping by {self.eta}"
        else:
            state = self.status
        return f"Order {self.id} ({items}; total {money}) is {state}."


@dataclass(frozen=True, slots=True)
class Customer:
    """A customer's contact details."""

    tenant_id: str
    id: str
    name: str
    email: str
    phone: str


@dataclass(frozen=True, slots=True)
class CancellationQuote:
    """What cancelling an order would do."""

    order_id: str
    refund: float
    currency: str


class OrderService:
    """Orders and customers of several tenants, in memory."""

    def __init__(self, orders: list[Order], customers: list[Customer]) -> None:
        self._orders = {(o.tenant_id, o.id): o for o in orders}
        self._customers = {(c.tenant_id, c.id): c for c in customers}

    @classmethod
    def sample(cls) -> OrderService:
        """Two tenants with a few orders each: the demo's data."""
        acme, globex = "tenant-acme-7f3a", "tenant-globex-51d0"
        ada, bob, eve = "user-ada-91c2", "user-bob-04e7", "user-eve-3b88"
        return cls(
            [
                Order(
                    "A-1001", acme, ada, ("USB-C dock",), 89.90, "EUR", "shipped", "DHL", "Dec 2"
                ),
                Order(
                    "A-1002",
                    acme,
                    ada,
                    ("desk lamp", "2 bulbs"),
                    34.50,
                    "EUR",
                    "processing",
                    None,
                    "Dec 1",
                ),
                Order("A-1003", acme, ada, ("ergonomic chair",), 249.00, "EUR", "delivered"),
                Order(
                    "A-1004", acme, bob, ("monitor arm",), 59.00, "EUR", "processing", eta="Dec 3"
                ),
                Order(
                    "B-2001",
                    globex,
                    eve,
                    ("coffee beans",),
                    18.00,
                    "USD",
                    "shipped",
                    "UPS",
                    "Dec 4",
                ),
            ],
            [
                Customer(acme, ada, "Ada Lovelace", "ada.lovelace@example.com", "+44 20 7946 0001"),
                Customer(acme, bob, "Bob Byron", "bob@example.org", "+44 20 7946 0002"),
                Customer(globex, eve, "Eve Noether", "eve@globex.example", "+1 555 0100"),
            ],
        )

    def order(self, tenant_id: str, customer_id: str, order_id: str) -> Order:
        """The customer's order `order_id`; `OrderNotFound` for anyone else's."""
        order = self._orders.get((tenant_id, order_id.strip().upper()))
        if order is None or order.customer_id != customer_id:
            raise OrderNotFound(f"no order {order_id!r} for this customer")
        return order

    def orders(self, tenant_id: str, customer_id: str) -> list[Order]:
        """All orders of the customer, by id."""
        return sorted(
            (
                o
                for (t, _), o in self._orders.items()
                if t == tenant_id and o.customer_id == customer_id
            ),
            key=lambda o: o.id,
        )

    def customer(self, tenant_id: str, customer_id: str) -> Customer:
        """The customer's contact details."""
        customer = self._customers.get((tenant_id, customer_id))
        if customer is None:
            raise OrderNotFound("no such customer")
        return customer

    def quote_cancellation(
        self, tenant_id: str, customer_id: str, order_id: str
    ) -> CancellationQuote:
        """What cancelling would refund; `CancellationRefused` once the order has shipped."""
        order = self.order(tenant_id, customer_id, order_id)
        if order.status != "processing":
            raise CancellationRefused(f"order {order.id} is {order.status} and cannot be cancelled")
        return CancellationQuote(order.id, order.total, order.currency)

    def cancel(self, tenant_id: str, customer_id: str, order_id: str) -> Order:
        """Cancel the order (only while it is processing); returns the cancelled order."""
        self.quote_cancellation(tenant_id, customer_id, order_id)
        key = (tenant_id, order_id.strip().upper())
        cancelled = replace(self._orders[key], status="cancelled")
        self._orders[key] = cancelled
        return cancelled


__all__ = [
    "CancellationQuote",
    "CancellationRefused",
    "Customer",
    "Order",
    "OrderNotFound",
    "OrderService",
    "OrderStatus",
]
