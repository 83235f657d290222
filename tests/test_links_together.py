"""The links of issue 14 in one chain: fallback, budget, tracing, cache, retry, barrier."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from advisorchain import (
    Chain,
    ChatRequest,
    ChatResponse,
    StreamEvent,
    ToolCall,
    ToolCallingAdvisor,
    ToolMessage,
    TracingAdvisor,
    tool,
)
from advisorchain.advisors import (
    BudgetAdvisor,
    ExponentialBackoff,
    ModelPrice,
    ToolResultCacheAdvisor,
    ToolRetryAdvisor,
)
from advisorchain.providers import FallbackModel, ProviderUnavailableError, ScriptedChatModel

from path_support import answer


class Down:
    model_name = "primary"

    async def call(self, request: ChatRequest) -> ChatResponse:
        raise ProviderUnavailableError("down", status_code=503)

    async def stream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        raise ProviderUnavailableError("down", status_code=503)
        yield  # pragma: no cover


@pytest.mark.anyio
@pytest.mark.parametrize("path", ["call", "stream"])
async def test_all_links_in_one_chain(path: str) -> None:
    log: list[str] = []

    @tool(read_only=True)
    def price(item: str) -> str:
        """Price of an item (flaky the first time)."""
        log.append(f"price {item}")
        if log.count(f"price {item}") == 1:
            raise ConnectionError("flaky")
        return "3 EUR"

    @tool(sequential=True)
    def order(item: str) -> str:
        """Order an item."""
        log.append(f"order {item}")
        return "ordered"

    def calls(*names: tuple[str, str, str]) -> list[ToolCall]:
        return [ToolCall.from_arguments(n, {"item": i}, id=c) for c, n, i in names]

    secondary = ScriptedChatModel(
        [
            calls(("1", "price", "tea"), ("2", "order", "tea"), ("3", "price", "tea")),
            "Tea ordered, 3 EUR.",
        ],
        model_name="secondary",
    )
    chain = Chain(
        [
            BudgetAdvisor(max_model_calls=5, max_cost=1.0, prices={"*": ModelPrice(1, 1)}),
            TracingAdvisor(),
            ToolCallingAdvisor(),
            ToolResultCacheAdvisor(),
            ToolRetryAdvisor(backoff=ExponentialBackoff(initial=0)),
        ],
        model=FallbackModel([Down(), secondary]),
        tools=[price, order],
    )
    response = await answer(path, chain, "Order tea")
    assert response.text == "Tea ordered, 3 EUR."
    assert response.model == "secondary"
    # the first price call failed once and was retried; the order ran after it, alone;
    # the second price call (after the barrier) came from the cache
    assert log == ["price tea", "price tea", "order tea"]
    results: list[Any] = [m.content for m in response.messages if isinstance(m, ToolMessage)]
    assert results == ["3 EUR", "ordered", "3 EUR"]
