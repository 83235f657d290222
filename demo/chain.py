"""The order assistant's chain, built in one place."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from ..advisors import (
    ApprovalAdvisor,
    ApprovalStore,
    Approver,
    KeywordIndex,
    LoggingAdvisor,
    ProactiveSearch,
    SmallModelAdvisor,
    ToolCallingAdvisor,
    ToolSearchAdvisor,
)
from ..advisors.small_model import QWEN_SYSTEM_PREFIX
from ..core.advisor import Advisor
from ..core.chain import Chain
from ..core.context import ToolContext
from ..core.invocation import ToolInvocation, ToolNext, ToolResult
from ..core.messages import Message, ToolMessage, UserMessage
from ..core.model import ChatModel
from ..core.options import ChatOptions
from ..core.scrub import safe_str, scrub_error_text
from ..core.tools import Tool
from .catalog import NotInDemoShop
from .lookups import FirstLookUps, latest_question
from .orders import CancellationRefused, OrderNotFound
from .tools import OrderTools

SYSTEM_PROMPT = (
    "You are the order assistant of an online shop, talking to a logged-in customer. "
    "Use the tools to look up the customer's orders; never guess order data. "
    "Answer briefly, in plain sentences."
)
SMALL_MODEL_SYSTEM_PROMPT = (
    # SmallModelAdvisor puts Qwen's own first sentence before it.
    "You are the order assistant of an online shop: call the tools to look up the customer's "
    "orders, never guess."
)
LOGGER_NAME = "advisorchain.demo"
"""The logger of the demo chain's `LoggingAdvisor` (`--log` shows its records)."""
LOOK_BEFORE_ACTING = ("search_tools", "prepare_cancellation")
"""Tool rounds the small-model mode does not count: finding a tool, checking a cancellation."""


class GivenIdsOnly(Advisor):
    """Stops calls with an order id nobody gave: the model guessed it.

    Asked "what did I pay for the ergonomic chair?", small models call
    `get_order_status("A-1001")`, an id from the prompt's examples, and answer from the
    wrong order. A call whose `order_id` appears neither in the user's messages nor in a
    tool result of the conversation is not run: a look-up (`read_only`) is answered with
    `lookup(question, context)` instead (the demo: the customer's orders whose items the
    question names, else all of them), any other call with an error saying the id was
    never given.

    Control flow: only the `call_tool` hook; a call with a given id, or without the
    argument, is passed on unchanged.
    """

    def __init__(
        self, lookup: Callable[[str, ToolContext], str], *, argument: str = "order_id"
    ) -> None:
        self.lookup = lookup
        self.argument = argument

    async def call_tool(self, invocation: ToolInvocation, next: ToolNext) -> ToolResult:
        """Pass the call on, unless its id was never given (see the class)."""
        value = invocation.arguments.get(self.argument)
        messages = invocation.request.messages
        if not isinstance(value, str) or _given(value, messages):
            return await next(invocation)
        if not invocation.tool.read_only:
            return ToolResult(
                content=f"Error: the customer never gave the order id {value}; nothing was "
                "done. Ask which order they mean.",
                outcome="error",
            )
        question = latest_question(messages)
        found = self.lookup(question, invocation.context)
        return ToolResult(content=f"(No order id was given; the matching orders.) {found}")


def _plain(text: str) -> str:
    return "".join(c for c in text.upper() if c.isalnum())


def _given(value: str, messages: Sequence[Message]) -> bool:
    wanted = _plain(value)
    if not wanted:
        return True
    return any(
        isinstance(m, (UserMessage, ToolMessage)) and wanted in _plain(m.text) for m in messages
    )


EXPECTED_ERRORS = (OrderNotFound, CancellationRefused, NotInDemoShop, PermissionError)
"""The tools' own refusals, whose messages are written for the customer."""


def tool_error_text(exc: BaseException, invocation: ToolInvocation) -> str:
    """What the model reads when a tool fails: `Error: <reason>`, never the exception's
    class name (a model repeats what it reads, and the customer should not see
    `OrderNotFound`); an unexpected failure reads only that the tool failed."""
    message = scrub_error_text(safe_str(exc)).strip()[:300]
    if isinstance(exc, EXPECTED_ERRORS) and message:
        return f"Error: {message}"
    return f"Error: {invocation.name} failed; nothing was done."


def build_chain(
    model: ChatModel,
    *,
    tools: OrderTools,
    approver: Approver,
    catalog: Sequence[Tool] = (),
    max_rounds: int = 3,
    small_model: bool = False,
    options: ChatOptions | None = None,
    approval_store: ApprovalStore | None = None,
) -> Chain:
    """The demo's `Chain`: logging, the tool loop, guessed-id guard, approval and tool
    search around `model`.

    The read tools and the `catalog` are attached to every request; the cancellation
    tools are passed per request by the caller, for sessions that may cancel. Tool search
    shows the model `search_tools` plus the order tools (pinned) instead of the whole
    catalog, and attaches the best few catalog tools for each question before the model is
    asked (`ProactiveSearch`). A tool that fails reads `Error: <reason>` without its
    exception's class (`tool_error_text`); a call with an order id nobody gave is not run
    (`GivenIdsOnly`). Log records go to the `advisorchain.demo` logger (`--log` shows them).
    `small_model` adds the `SmallModelAdvisor` (tool results shown as text, the Qwen system
    prefix, what a question names looked up before the model is asked:
    `demo.lookups.FirstLookUps`), which a 0.5B model answers far more reliably; either way
    a turn has at most `max_rounds` counted tool rounds before the model must answer
    (`LOOK_BEFORE_ACTING` rounds are not counted). `approval_store` is where approvals go
    (the advisor's default otherwise).
    """
    pinned = [t.name for t in (*tools.read_tools, *tools.cancellation_tools)]
    advisors: list[Advisor] = [
        LoggingAdvisor(logging.getLogger(LOGGER_NAME)),
        ToolCallingAdvisor(max_calls_per_tool=3, max_calls=12, on_tool_error=tool_error_text),
        GivenIdsOnly(tools.orders_about),
        ApprovalAdvisor(approver, store=approval_store),
        # Keyword, whatever extras are installed: the demo's answers were measured with it,
        # and it needs no embedding model in memory next to the chat model.
        # Proactive: the catalog is searched with each question before the model is asked
        # and the best few tools attached (a tool that needs approval only when the question
        # asks for its action): small models never call search_tools themselves.
        ToolSearchAdvisor(
            KeywordIndex(),
            pinned=pinned,
            max_results=3 if small_model else 5,
            # One for a small model: each extra tool is one more it may call instead.
            proactive=ProactiveSearch(top_k=1 if small_model else 3),
        ),
        SmallModelAdvisor(
            max_rounds=max_rounds,
            results_as_text=small_model,
            system_prefix=QWEN_SYSTEM_PREFIX if small_model else None,
            uncounted_tools=LOOK_BEFORE_ACTING,
            look_first=FirstLookUps(tools, own=[*pinned, "search_tools"]) if small_model else None,
        ),
    ]
    return Chain(advisors, model=model, tools=[*tools.read_tools, *catalog], options=options)


__all__ = [
    "EXPECTED_ERRORS",
    "LOGGER_NAME",
    "LOOK_BEFORE_ACTING",
    "SMALL_MODEL_SYSTEM_PROMPT",
    "SYSTEM_PROMPT",
    "GivenIdsOnly",
    "build_chain",
    "tool_error_text",
]
