"""The order assistant's chain, built in one place."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from ..advisors import (
    ApprovalAdvisor,
    Approver,
    LoggingAdvisor,
    ToolCallingAdvisor,
    ToolSearchAdvisor,
)
from ..core.advisor import Advisor
from ..core.chain import Chain
from ..core.model import ChatModel
from ..core.options import ChatOptions
from ..core.tools import Tool
from .rounds import AnswerAfterRounds
from .small_model import ToolResultsAsText
from .tools import OrderTools

SYSTEM_PROMPT = (
    "You are the order assistant of an online shop, talking to a logged-in customer. "
    "Use the tools to look up the customer's orders; never guess order data. "
    "Answer briefly, in plain sentences."
)
SMALL_MODEL_SYSTEM_PROMPT = (
    # Qwen's own default first sentence measurably helps the 0.5B model call tools.
    "You are Qwen, created by Alibaba Cloud. You are a helpful assistant. You are the order "
    "assistant of an online shop: call the tools to look up the customer's orders, never guess."
)


def build_chain(
    model: ChatModel,
    *,
    tools: OrderTools,
    approver: Approver,
    catalog: Sequence[Tool] = (),
    max_rounds: int = 3,
    small_model: bool = False,
    options: ChatOptions | None = None,
) -> Chain:
    """The demo's `Chain`: logging, the tool loop, approval and tool search around `model`.

    The read tools and the `catalog` are attached to every request; the cancellation
    tools are passed per request by the caller, for sessions that may cancel. Tool search
    shows the model `search_tools` plus the order tools (pinned) instead of the whole
    catalog. Log records go to the `advisorchain.demo` logger (`--log` shows them).
    `small_model` shows tool results to the model as text (`ToolResultsAsText`), which a
    0.5B model answers far more reliably.
    """
    pinned = [t.name for t in (*tools.read_tools, *tools.cancellation_tools)]
    advisors: list[Advisor] = [
        LoggingAdvisor(logging.getLogger("advisorchain.demo")),
        ToolCallingAdvisor(max_calls_per_tool=3, max_calls=12),
        ApprovalAdvisor(approver),
        AnswerAfterRounds(max_rounds),  # before tool search, which then knows tools are off
        ToolSearchAdvisor(pinned=pinned),
    ]
    if small_model:
        advisors.append(ToolResultsAsText())
    return Chain(advisors, model=model, tools=[*tools.read_tools, *catalog], options=options)
