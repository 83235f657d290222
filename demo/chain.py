"""The order assistant's chain, built in one place."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from ..advisors import (
    ApprovalAdvisor,
    ApprovalStore,
    Approver,
    KeywordIndex,
    LoggingAdvisor,
    SmallModelAdvisor,
    ToolCallingAdvisor,
    ToolSearchAdvisor,
)
from ..advisors.small_model import QWEN_SYSTEM_PREFIX
from ..core.advisor import Advisor
from ..core.chain import Chain
from ..core.model import ChatModel
from ..core.options import ChatOptions
from ..core.tools import Tool
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
LOOK_BEFORE_ACTING = ("search_tools", "prepare_cancellation")
"""Tool rounds the small-model mode does not count: finding a tool, checking a cancellation."""


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
    """The demo's `Chain`: logging, the tool loop, approval and tool search around `model`.

    The read tools and the `catalog` are attached to every request; the cancellation
    tools are passed per request by the caller, for sessions that may cancel. Tool search
    shows the model `search_tools` plus the order tools (pinned) instead of the whole
    catalog. Log records go to the `advisorchain.demo` logger (`--log` shows them).
    `small_model` adds the `SmallModelAdvisor` (tool results shown as text, the Qwen system
    prefix), which a 0.5B model answers far more reliably; either way a turn has at most
    `max_rounds` counted tool rounds before the model must answer (`LOOK_BEFORE_ACTING`
    rounds are not counted). `approval_store` is where approvals go (the advisor's
    default otherwise).
    """
    pinned = [t.name for t in (*tools.read_tools, *tools.cancellation_tools)]
    advisors: list[Advisor] = [
        LoggingAdvisor(logging.getLogger("advisorchain.demo")),
        ToolCallingAdvisor(max_calls_per_tool=3, max_calls=12),
        ApprovalAdvisor(approver, store=approval_store),
        # Keyword, whatever extras are installed: the demo's answers were measured with it,
        # and it needs no embedding model in memory next to the chat model.
        ToolSearchAdvisor(KeywordIndex(), pinned=pinned, max_results=3 if small_model else 5),
        SmallModelAdvisor(
            max_rounds=max_rounds,
            results_as_text=small_model,
            system_prefix=QWEN_SYSTEM_PREFIX if small_model else None,
            uncounted_tools=LOOK_BEFORE_ACTING,
        ),
    ]
    return Chain(advisors, model=model, tools=[*tools.read_tools, *catalog], options=options)
