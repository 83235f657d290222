"""`BudgetAdvisor`: per-turn limits on tokens, model calls, wall time and cost."""

from __future__ import annotations

import copy
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Literal, NamedTuple, Protocol, runtime_checkable

from ..core.advisor import Advisor, CallNext, Placement, StreamNext, ToolNext
from ..core.checks import require_number
from ..core.errors import AdvisorChainError, ChainConfigurationError
from ..core.events import ResponseCompleted, StreamEvent, ToolCallDelta
from ..core.invocation import ToolInvocation, ToolResult
from ..core.messages import Message, ToolMessage, UserMessage
from ..core.request import ChatRequest
from ..core.response import ChatResponse
from ..core.streams import closing_stream
from ..core.usage import Usage
from ..core.watchers import watched_by
from .memory import ConversationIdError

if TYPE_CHECKING:
    pass

DEFAULT_WRAP_UP = (
    "[budget] This turn's budget is used up ({reason}). Do not call any tool; answer the "
    "user now with what you have, and say briefly what is left undone."
)


@dataclass(frozen=True, slots=True)
class ModelPrice:
    """A model's prices per million tokens: `input` (not cached), `output`, and
    `cached_input` (cache reads; `None`: the `input` price)."""

    input: float
    output: float
    cached_input: float | None = None

    def cost(self, usage: Usage) -> float:
        """What `usage` costs (`usage.cached_tokens` are part of `usage.input_tokens`)."""
        cached = min(usage.cached_tokens, usage.input_tokens)
        cached_price = self.input if self.cached_input is None else self.cached_input
        return (
            (usage.input_tokens - cached) * self.input
            + cached * cached_price
            + usage.output_tokens * self.output
        ) / 1_000_000


class ConversationSpend(NamedTuple):
    """What a conversation has spent over all its turns so far."""

    usage: Usage
    cost: float


@runtime_checkable
class BudgetStore(Protocol):
    """Per-conversation totals for `BudgetAdvisor`; `add` must be atomic per conversation
    (several turns of one conversation may run at once, in several processes)."""

    async def spent(self, conversation_id: str) -> ConversationSpend:
        """The conversation's totals (zero for a conversation never seen)."""
        ...

    async def add(self, conversation_id: str, usage: Usage, cost: float) -> ConversationSpend:
        """Add one model call's usage and cost; the new totals."""
        ...


class InMemoryBudgetStore:
    """A `BudgetStore` in this process's memory (tests, single-process apps)."""

    def __init__(self) -> None:
        self._spent: dict[str, ConversationSpend] = {}

    def __repr__(self) -> str:
        return f"InMemoryBudgetStore(conversations={len(self._spent)})"

    async def spent(self, conversation_id: str) -> ConversationSpend:
        return self._spent.get(conversation_id, _NOTHING)

    async def add(self, conversation_id: str, usage: Usage, cost: float) -> ConversationSpend:
        before = self._spent.get(conversation_id, _NOTHING)
        after = self._spent[conversation_id] = ConversationSpend(
            before.usage + usage, before.cost + cost
        )
        return after


_NOTHING = ConversationSpend(Usage(), 0.0)


class BudgetExceeded(AdvisorChainError):
    """A turn went over a `BudgetAdvisor` limit (`on_exceed="raise"`).

    `limit` names the limit (`input_tokens`, `output_tokens`, `total_tokens`,
    `model_calls`, `seconds`, `cost`, `conversation_tokens`, `conversation_cost`);
    `messages` is what the turn added until then,
    valid: every tool call of it is answered (calls the model asked for in the call
    that went over are answered with an error, not executed). `usage`, `cost` (`None`
    without prices) and `elapsed` are the turn's spend.
    """

    def __init__(
        self,
        message: str,
        *,
        limit: str,
        messages: Sequence[Message],
        usage: Usage,
        cost: float | None,
        elapsed: float,
    ) -> None:
        super().__init__(message)
        self.limit = limit
        self.messages: tuple[Message, ...] = tuple(messages)
        self.usage = usage
        self.cost = cost
        self.elapsed = elapsed


class _Spend:
    __slots__ = (
        "base",
        "cached",
        "calls",
        "cost",
        "input",
        "output",
        "reported",
        "requests",
        "start",
        "unpriced",
    )

    def __init__(self, start: float, base: int) -> None:
        self.start = start
        self.base = base
        self.calls = 0
        self.input = self.output = self.cached = self.requests = 0
        self.cost = 0.0
        self.unpriced: str | None = None
        self.reported = False

    @property
    def usage(self) -> Usage:
        return Usage(self.input, self.output, self.cached, self.requests)


class BudgetAdvisor(Advisor):
    """Limits what one turn may spend: tokens, model calls, wall time, cost.

    Control flow (`call_model`/`stream_model`, so it sees every model call of the turn
    wherever it sits): before each model call, a limit already used up (tokens or cost
    at or over it, `max_model_calls` calls made, `max_seconds` since the turn's first
    model call) stops the turn; after each call its usage (and cost, from `prices`) is
    added, and a limit now exceeded stops the turn. The turn's spend lives in the turn's
    `request.context`, so one advisor serves any number of concurrent turns.

    Stopping, with `on_exceed="raise"`: `BudgetExceeded` with the turn's messages so far
    (tool calls of the call that went over answered with an error, not run). With
    `on_exceed="report"`: once per turn, the model is asked for one final answer with
    `tool_choice="none"` and a note (`wrap_up`, sent only in that request, never stored)
    saying the budget is used up; tool calls of the call that went over are answered
    with an error first, and tool calls the final answer still makes are dropped, so
    the transcript stays valid. That call is allowed to go over; after it, a further
    model call of the turn raises `BudgetExceeded`. A final answer (no tool calls) that
    goes over is returned as it is in `report` mode.

    `prices` maps model names to `ModelPrice`; a response's model is looked up exactly,
    then by the longest key it starts with (`gpt-4o` prices `gpt-4o-2024-08-06`), then
    under `"*"`. With `max_cost`, a model without a price counts as over budget (never
    as free), and a chain whose model has no price is refused. `clock` is injectable.
    Wall time is checked between model calls; a call in flight is not interrupted (give
    the provider a timeout).

    Per conversation, over all its turns: with a `store` (`BudgetStore`, e.g.
    `InMemoryBudgetStore`), every model call's usage and cost is added to the request's
    `conversation_id` totals, and `max_conversation_tokens` (total tokens) and
    `max_conversation_cost` are checked like the per-turn limits (before each call: used
    up; after it: exceeded). A turn without a conversation id raises
    `ConversationIdError`.

    Sub-chains (`chain_tool`), and any chain a tool runs: while one of the turn's
    tool calls runs (`call_tool`), every model call made inside it counts against this
    turn's spend as it happens, the same limits checked the same way. A call that would
    find a limit used up raises `BudgetExceeded` inside the child (whatever `on_exceed`
    says: the wrap-up is this turn's), which makes the tool call an error result; the
    turn's next model call then stops the turn as above.
    """

    def __init__(
        self,
        *,
        max_input_tokens: int | None = None,
        max_output_tokens: int | None = None,
        max_total_tokens: int | None = None,
        max_model_calls: int | None = None,
        max_seconds: float | None = None,
        max_cost: float | None = None,
        prices: Mapping[str, ModelPrice] | None = None,
        on_exceed: Literal["raise", "report"] = "raise",
        wrap_up: str = DEFAULT_WRAP_UP,
        clock: Callable[[], float] = time.monotonic,
        store: BudgetStore | None = None,
        max_conversation_tokens: int | None = None,
        max_conversation_cost: float | None = None,
    ) -> None:
        if on_exceed not in ("raise", "report"):
            raise ValueError("on_exceed must be 'raise' or 'report'")
        limits = (
            max_input_tokens,
            max_output_tokens,
            max_total_tokens,
            max_model_calls,
            max_seconds,
            max_cost,
            max_conversation_tokens,
            max_conversation_cost,
        )
        for label, value in zip(
            (
                "max_input_tokens",
                "max_output_tokens",
                "max_total_tokens",
                "max_model_calls",
                "max_seconds",
                "max_cost",
                "max_conversation_tokens",
                "max_conversation_cost",
            ),
            limits,
            strict=True,
        ):
            require_number(value, label, optional=True)
        if any(v is not None and v < 0 for v in limits):
            raise ValueError("budget limits cannot be negative")
        if max_model_calls == 0:
            raise ValueError("max_model_calls must be at least 1")
        if (max_cost is not None or max_conversation_cost is not None) and not prices:
            raise ChainConfigurationError("a cost limit needs prices (model name -> ModelPrice)")
        if store is None and (max_conversation_tokens, max_conversation_cost) != (None, None):
            raise ChainConfigurationError("per-conversation limits need a store")
        self.max_input_tokens = max_input_tokens
        self.max_output_tokens = max_output_tokens
        self.max_total_tokens = max_total_tokens
        self.max_model_calls = max_model_calls
        self.max_seconds = max_seconds
        self.max_cost = max_cost
        self.prices: dict[str, ModelPrice] = dict(prices or {})
        self.on_exceed = on_exceed
        self.wrap_up = wrap_up
        self.clock = clock
        self.store = store
        self.max_conversation_tokens = max_conversation_tokens
        self.max_conversation_cost = max_conversation_cost
        self._model_name: str | None = None
        self._price_cache: dict[str | None, ModelPrice | None] = {}
        self._key = f"advisorchain.budget.{id(self)}"

    def __repr__(self) -> str:
        return f"BudgetAdvisor(on_exceed={self.on_exceed!r})"

    def bind(self, placement: Placement) -> Advisor:
        """This advisor for one chain: a copy that knows the chain's model name (refused,
        with a cost limit, when that model has no price)."""
        name = placement.chain.model_name
        model_name = name if isinstance(name, str) and name else None
        priced = self.max_cost is not None or self.max_conversation_cost is not None
        if priced and model_name is not None and self.price_of(model_name) is None:
            raise ChainConfigurationError(
                f"BudgetAdvisor has no price for the chain's model {model_name!r}"
            )
        if model_name == self._model_name:
            return self
        bound = copy.copy(self)
        bound._model_name = model_name
        return bound

    def price_of(self, model: str | None) -> ModelPrice | None:
        """The price of `model`: exact name, longest matching prefix, then `"*"`."""
        prices = self.prices
        if model:
            found = prices.get(model)
            if found is not None:
                return found
            prefixes = [k for k in prices if k != "*" and model.startswith(k)]
            if prefixes:
                return prices[max(prefixes, key=len)]
        return prices.get("*")

    # -- the hooks --------------------------------------------------------------------

    async def call_model(self, request: ChatRequest, next: CallNext) -> ChatResponse:
        spend = self._spend(request)
        over = self._used_up(spend)
        if over is None and self.store is not None:
            over = await self._conversation_used_up(request)
        if over is not None:
            self._stop_unless_reporting(over, request, spend, ())
            return await self._wrap_up_call(request, next, spend, over, (), Usage())
        spend.calls += 1
        response = await next(request)
        over = await self._after_call(spend, request, response)
        if over is None:
            return response
        answered = _answered(response)
        self._stop_unless_reporting(over, request, spend, answered)
        if not response.tool_calls:
            return response
        follow_up = request.appended(*answered)
        return await self._wrap_up_call(follow_up, next, spend, over, answered, response.usage)

    async def stream_model(
        self, request: ChatRequest, next: StreamNext
    ) -> AsyncIterator[StreamEvent]:
        spend = self._spend(request)
        over = self._used_up(spend)
        if over is None and self.store is not None:
            over = await self._conversation_used_up(request)
        if over is not None:
            self._stop_unless_reporting(over, request, spend, ())
            async for event in self._wrap_up_stream(request, next, spend, over, (), Usage()):
                yield event
            return
        spend.calls += 1
        response: ChatResponse | None = None
        async with closing_stream(next(request)) as events:
            async for event in events:
                if isinstance(event, ResponseCompleted):
                    response = event.response  # held back until the budget is checked
                else:
                    yield event
        if response is None:
            return
        over = await self._after_call(spend, request, response)
        if over is None or not response.tool_calls:
            if over is not None:
                self._stop_unless_reporting(over, request, spend, _answered(response))
            yield ResponseCompleted(response)
            return
        answered = _answered(response)
        self._stop_unless_reporting(over, request, spend, answered)
        follow_up = request.appended(*answered)
        async for event in self._wrap_up_stream(
            follow_up, next, spend, over, answered, response.usage
        ):
            yield event

    async def call_tool(self, invocation: ToolInvocation, next: ToolNext) -> ToolResult:
        """Run the call with this turn's budget bounding every model call inside it."""
        limit = _EnclosingBudget(self, self._spend(invocation.request), invocation.request)
        with watched_by(limit):
            return await next(invocation)

    # -- the final answer of a turn over budget (on_exceed="report") -------------------

    def _wrap_up_request(
        self, request: ChatRequest, spend: _Spend, over: tuple[str, str]
    ) -> ChatRequest:
        spend.reported = True
        spend.calls += 1
        note = UserMessage(content=self.wrap_up.format(reason=over[1]))
        return request.appended(note).with_options(tool_choice="none")

    async def _wrap_up_call(
        self,
        request: ChatRequest,
        next: CallNext,
        spend: _Spend,
        over: tuple[str, str],
        answered: tuple[Message, ...],
        earlier: Usage,
    ) -> ChatResponse:
        wrapped = self._wrap_up_request(request, spend, over)
        response = await next(wrapped)
        await self._record(wrapped, response.usage, self._account(spend, wrapped, response))
        return _final(response, answered, earlier)

    async def _wrap_up_stream(
        self,
        request: ChatRequest,
        next: StreamNext,
        spend: _Spend,
        over: tuple[str, str],
        answered: tuple[Message, ...],
        earlier: Usage,
    ) -> AsyncIterator[StreamEvent]:
        wrapped = self._wrap_up_request(request, spend, over)
        async with closing_stream(next(wrapped)) as events:
            async for event in events:
                if isinstance(event, ResponseCompleted):
                    cost = self._account(spend, wrapped, event.response)
                    await self._record(wrapped, event.response.usage, cost)
                    yield ResponseCompleted(_final(event.response, answered, earlier))
                elif not isinstance(event, ToolCallDelta):  # tool calls are dropped
                    yield event

    # -- accounting -------------------------------------------------------------------

    def _spend(self, request: ChatRequest) -> _Spend:
        spend: _Spend | None = request.context.get(self._key)
        if spend is None:
            spend = request.context[self._key] = _Spend(self.clock(), len(request.messages))
        return spend

    def _account(self, spend: _Spend, request: ChatRequest, response: ChatResponse) -> float:
        """Add a model call's usage and cost to the turn's spend; the call's cost."""
        usage = response.usage
        spend.input += usage.input_tokens
        spend.output += usage.output_tokens
        spend.cached += usage.cached_tokens
        spend.requests += usage.requests
        if self.prices:
            model = response.model or request.options.model or self._model_name
            try:
                price = self._price_cache[model]
            except KeyError:
                price = self._price_cache[model] = self.price_of(model)
                if len(self._price_cache) > 256:
                    self._price_cache.clear()
            if price is None:
                spend.unpriced = model or "unknown"
            else:
                cost = price.cost(usage)
                spend.cost += cost
                return cost
        return 0.0

    async def _after_call(
        self, spend: _Spend, request: ChatRequest, response: ChatResponse
    ) -> tuple[str, str] | None:
        """Account for a model call; the limit it made the turn (or conversation) exceed."""
        cost = self._account(spend, request, response)
        over = self._exceeded(spend)
        if self.store is not None:
            totals = await self._record(request, response.usage, cost)
            if over is None and totals is not None:
                over = self._conversation_check(totals, at_limit=False)
        return over

    def _conversation_id(self, request: ChatRequest) -> str:
        if not request.conversation_id:
            raise ConversationIdError(
                "BudgetAdvisor with a store needs a conversation_id on every turn"
            )
        return request.conversation_id

    async def _record(
        self, request: ChatRequest, usage: Usage, cost: float
    ) -> ConversationSpend | None:
        if self.store is None:
            return None
        return await self.store.add(self._conversation_id(request), usage, cost)

    async def _conversation_used_up(self, request: ChatRequest) -> tuple[str, str] | None:
        assert self.store is not None
        totals = await self.store.spent(self._conversation_id(request))
        return self._conversation_check(totals, at_limit=True)

    def _conversation_check(
        self, totals: ConversationSpend, *, at_limit: bool
    ) -> tuple[str, str] | None:
        if self.max_conversation_tokens is not None:
            over = _over(
                "conversation_tokens",
                totals.usage.total_tokens,
                self.max_conversation_tokens,
                at_limit,
            )
            if over is not None:
                return over
        limit = self.max_conversation_cost
        if limit is not None and (totals.cost > limit or (at_limit and totals.cost == limit)):
            return "conversation_cost", f"conversation cost: {totals.cost:.6g} of {limit:g}"
        return None

    def _used_up(self, spend: _Spend) -> tuple[str, str] | None:
        """The limit that leaves nothing for another model call, if any."""
        if self.max_model_calls is not None and spend.calls >= self.max_model_calls:
            return "model_calls", f"model calls: {spend.calls} of {self.max_model_calls}"
        return self._check(spend, at_limit=True)

    def _exceeded(self, spend: _Spend) -> tuple[str, str] | None:
        """The limit the turn has gone over, if any."""
        return self._check(spend, at_limit=False)

    def _check(self, spend: _Spend, *, at_limit: bool) -> tuple[str, str] | None:
        if self.max_input_tokens is not None:
            over = _over("input_tokens", spend.input, self.max_input_tokens, at_limit)
            if over is not None:
                return over
        if self.max_output_tokens is not None:
            over = _over("output_tokens", spend.output, self.max_output_tokens, at_limit)
            if over is not None:
                return over
        if self.max_total_tokens is not None:
            total = spend.input + spend.output
            over = _over("total_tokens", total, self.max_total_tokens, at_limit)
            if over is not None:
                return over
        if spend.unpriced is not None:
            if self.max_cost is not None:
                return "cost", f"cost: no price for model {spend.unpriced!r}"
            if self.max_conversation_cost is not None:
                return "conversation_cost", f"cost: no price for model {spend.unpriced!r}"
        if self.max_cost is not None:
            cost = spend.cost
            if cost > self.max_cost or (at_limit and cost == self.max_cost):
                return "cost", f"cost: {cost:.6g} of {self.max_cost:g}"
        if self.max_seconds is not None:
            elapsed = self.clock() - spend.start
            if elapsed > self.max_seconds or (at_limit and elapsed == self.max_seconds):
                return "seconds", f"wall time: {elapsed:.3g} s of {self.max_seconds:g} s"
        return None

    def _stop_unless_reporting(
        self,
        over: tuple[str, str],
        request: ChatRequest,
        spend: _Spend,
        answered: tuple[Message, ...],
    ) -> None:
        if self.on_exceed == "report" and not spend.reported:
            return
        limit, reason = over
        raise BudgetExceeded(
            f"the turn's budget is exceeded: {reason}",
            limit=limit,
            messages=(*request.messages[spend.base :], *answered),
            usage=spend.usage,
            cost=spend.cost if self.prices else None,
            elapsed=self.clock() - spend.start,
        )


class _EnclosingBudget:
    """A turn's budget watching the model calls made inside one of its tool calls (a
    sub-chain's, a chain a tool runs by hand: `core.watchers.ModelCallWatcher`): checked
    before each, charged with each response."""

    __slots__ = ("advisor", "request", "spend")

    def __init__(self, advisor: BudgetAdvisor, spend: _Spend, request: ChatRequest) -> None:
        self.advisor = advisor
        self.spend = spend
        self.request = request  # the enclosing turn's: its conversation id

    async def before_model_call(self, request: ChatRequest) -> None:
        advisor, spend = self.advisor, self.spend
        over = advisor._used_up(spend)
        if over is None and advisor.store is not None:
            over = await advisor._conversation_used_up(self.request)
        if over is not None:
            limit, reason = over
            raise BudgetExceeded(
                f"the enclosing turn's budget is used up: {reason}",
                limit=limit,
                messages=(),
                usage=spend.usage,
                cost=spend.cost if advisor.prices else None,
                elapsed=advisor.clock() - spend.start,
            )
        spend.calls += 1

    async def after_model_call(self, request: ChatRequest, response: ChatResponse) -> None:
        cost = self.advisor._account(self.spend, request, response)
        await self.advisor._record(self.request, response.usage, cost)


def _over(name: str, value: int, limit: int, at_limit: bool) -> tuple[str, str] | None:
    if value > limit or (at_limit and value == limit):
        return name, f"{name.replace('_', ' ')}: {value} of {limit}"
    return None


def _answered(response: ChatResponse) -> tuple[Message, ...]:
    """The response's messages, each of its tool calls answered with a refusal."""
    refusals = [
        ToolMessage(
            tool_call_id=call.id,
            name=call.name,
            content="Error: not executed, the turn's budget is used up.",
            is_error=True,
        )
        for call in response.tool_calls
    ]
    return (*response.messages, *refusals)


def _final(response: ChatResponse, answered: tuple[Message, ...], earlier: Usage) -> ChatResponse:
    """The wrap-up answer, without tool calls, after the messages answered before it."""
    message = response.message
    if message.tool_calls:
        message = message.model_copy(
            update={"tool_calls": (), "content": message.content or "(the budget ran out)"}
        )
    return replace(
        response,
        finish_reason="stop" if response.tool_calls else response.finish_reason,
        usage=earlier + response.usage,
        messages=(*answered, *response.messages[:-1], message),
    )


__all__ = [
    "DEFAULT_WRAP_UP",
    "BudgetAdvisor",
    "BudgetExceeded",
    "BudgetStore",
    "ConversationSpend",
    "InMemoryBudgetStore",
    "ModelPrice",
]
