"""The order assistant's chain, built in one place."""

from __future__ import annotations

from collections.abc import Sequence

from ..advisors import ToolCallingAdvisor
from ..core.advisor import Advisor
from ..core.chain import Chain
from ..core.model import ChatModel
from ..core.options import ChatOptions
from ..core.tools import Tool
from .approval import Approver, DemoApprovalAdvisor
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
    """The demo's `Chain`: tool loop, approval and a round bound around `model`.

    The read tools are attached to every request; the cancellation tools are passed per
    request by the caller, for sessions that may cancel. `catalog` is for tool search
    and stays unattached until the `ToolSearchAdvisor` is wired in (its ~50 schemas
    would swamp a small model's prompt). `small_model` shows tool results to the model
    as text (`ToolResultsAsText`), which a 0.5B model answers far more reliably.
    """
    advisors: list[Advisor] = [
        # integration: LoggingAdvisor() goes here, outermost: one record per turn, model
        # call and tool call.
        ToolCallingAdvisor(max_calls_per_tool=3, max_calls=12),
        # integration: ApprovalAdvisor(ConsoleApprover()) replaces DemoApprovalAdvisor,
        # with the same three modes (ask, --yes, --no-input).
        DemoApprovalAdvisor(approver),
        # integration: ToolSearchAdvisor(catalog, pinned=tools.read_tools) goes here, so
        # the model sees `search_tools` plus the pinned tools instead of the whole catalog.
        AnswerAfterRounds(max_rounds),
    ]
    if small_model:
        advisors.append(ToolResultsAsText())
    return Chain(advisors, model=model, tools=tools.read_tools, options=options)
