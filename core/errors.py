"""The exceptions advisorchain raises; every one derives from `AdvisorChainError`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .messages import Message


class AdvisorChainError(Exception):
    """Base class of every error raised by advisorchain."""


class ChainConfigurationError(AdvisorChainError, ValueError):
    """A chain, tool set or advisor was put together in a way that cannot work."""


class ToolDefinitionError(AdvisorChainError, TypeError):
    """A function cannot be turned into a tool (unsupported signature, bad annotation)."""


class ToolCallLimitExceeded(AdvisorChainError):
    """A turn asked for more tool calls than its limits allow.

    `messages` is the transcript the turn had produced when it stopped: the assistant
    message that asked for the calls and one tool message per call, so the history stays
    valid if the caller stores it.
    """

    def __init__(self, message: str, *, tool_name: str | None, messages: Sequence[Message]) -> None:
        super().__init__(message)
        self.tool_name = tool_name
        self.messages: tuple[Message, ...] = tuple(messages)


class ToolExecutionError(AdvisorChainError):
    """A tool raised, and the tool loop was configured to raise (`on_tool_error="raise"`)."""

    def __init__(self, message: str, *, tool_name: str, call_id: str) -> None:
        super().__init__(message)
        self.tool_name = tool_name
        self.call_id = call_id


class ServerReportedError(AdvisorChainError):
    """An error a tool's server reported about itself (an MCP `isError` result or
    JSON-RPC error), as opposed to an exception raised in this process.

    `server_text` is what the model may read: the server's own words (bounded, with the
    values this process gave the server scrubbed), shown as is, because the paths in it
    are the server's, not this machine's; `None` means "a local failure": the tool loop
    redacts file paths from the message as for any other exception.
    """

    server_text: str | None = None


class ToolIdleTimeoutError(AdvisorChainError):
    """A tool with an `idle_timeout` reported no progress for that long and was abandoned.

    Not a `TimeoutError`: the tool loop reports it as an error result with this message
    (how long the tool stayed silent), not as the tool's overall `timeout`.
    """


class ResumeConflict(AdvisorChainError):
    """A resume found the calls it settles taken by another resume (racing it, or done).

    Never reported to a model as a tool's error: raised through every tool call, a
    sub-chain's included, so the losing resume stops as a whole."""


class InvalidDecisions(AdvisorChainError, ValueError):
    """A resume's decisions do not fit the calls that wait: an unknown id, a call that
    does not wait, something that is no decision, a decision of a kind the call does not
    accept, or the same inside a nested (sub-chain) mapping. Raised before anything runs
    or is written: fix the decisions and resume again."""


class StreamInterruptedError(AdvisorChainError):
    """A stream ended before its final event, or delivered something that cannot be parsed."""


class OutputSchemaRefused(AdvisorChainError):
    """A model refused the request's output schema (`ChatOptions.output_schema`) as such:
    the request, not the model, is at fault, and the same schema fails again. Providers
    raise it as `providers.OutputSchemaRefusedError` (a `BadRequestError` too);
    `StructuredOutputAdvisor(mode="auto")` catches it here, in core, and states the schema
    in the prompt instead."""


class TurnReplayError(AdvisorChainError, RuntimeError):
    """A `TurnAdvisor` called `proceed` again on the stream path after events of an earlier
    attempt were streamed: a caller cannot unsee them, so that retry is refused."""


__all__ = [
    "AdvisorChainError",
    "ChainConfigurationError",
    "InvalidDecisions",
    "ResumeConflict",
    "ServerReportedError",
    "StreamInterruptedError",
    "ToolCallLimitExceeded",
    "ToolDefinitionError",
    "ToolExecutionError",
    "ToolIdleTimeoutError",
    "TurnReplayError",
]
