"""`ChatResponse`: the answer of a model call, or of a whole turn through a chain."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal, TypeAlias

from .messages import AssistantMessage, Message, ToolCall
from .suspension import PendingApproval, Suspension
from .usage import Usage

FinishReason: TypeAlias = (
    Literal[
        "stop",
        "length",
        "tool_calls",
        "content_filter",
        "return_direct",
        "approval_pending",
        "error",
    ]
    | str
)
"""Why a response ended. Providers map their own values to these names."""


@dataclass(frozen=True, init=False)
class ChatResponse:
    """A model's answer, or a whole turn's.

    `messages` holds every message the turn added (assistant tool-call messages, tool
    results, final answer); for a single model call it is just `(message,)`. `message` is
    not stored apart: it is the last assistant message of `messages`, so the answer exists
    once and the two can never disagree. `usage` is summed over every model call of the
    turn.

    Build one from a single answer, `ChatResponse(message=...)`, or from a turn,
    `ChatResponse(messages=...)` (ending with its answer). Giving both is allowed only when
    `message` is the last assistant message of `messages`; anything else is a `ValueError`.
    Change the answer with `with_message`, which replaces it inside
    `messages`; `dataclasses.replace(response, messages=...)` keeps working.

    `suspension` is set on a turn the tool loop suspended (`finish_reason=
    "approval_pending"`): the pending calls, the transcript so far and the results already
    finished (`core/suspension.py`); `pending_approval` is its `pending` part.
    """

    messages: tuple[Message, ...]
    finish_reason: FinishReason
    usage: Usage
    model: str | None
    id: str | None
    suspension: Suspension | None

    def __init__(
        self,
        message: AssistantMessage | None = None,
        *,
        messages: Sequence[Message] = (),
        finish_reason: FinishReason = "stop",
        usage: Usage | None = None,
        model: str | None = None,
        id: str | None = None,
        suspension: Suspension | None = None,
    ) -> None:
        found = _last_assistant(messages)
        if not messages:
            if message is None:
                raise ValueError("a ChatResponse needs its message or its messages")
            messages = (message,)
            found = message
        elif found is None:
            raise ValueError("a ChatResponse's messages must contain an assistant message")
        elif message is not None and message is not found and message != found:
            raise ValueError(
                "message must be the last assistant message of messages (the answer is held "
                "once); change it with response.with_message(...)"
            )
        # Frozen: the fields are written straight into the instance, once (a dict update
        # costs a fifth of seven object.__setattr__ calls, on a path taken every model call).
        self.__dict__.update(
            messages=messages if type(messages) is tuple else tuple(messages),
            finish_reason=finish_reason,
            usage=usage if usage is not None else Usage(),
            model=model,
            id=id,
            suspension=suspension,
            _message=found,
        )

    @property
    def message(self) -> AssistantMessage:
        """The answer: the last assistant message of `messages`."""
        found: AssistantMessage = self.__dict__["_message"]
        return found

    @property
    def pending_approval(self) -> PendingApproval | None:
        """The calls waiting for a decision and the id `Chain.resume` takes, when the turn
        was suspended (`suspension.pending`); else `None`."""
        suspension = self.suspension
        return suspension.pending if suspension is not None else None

    @property
    def text(self) -> str:
        """The final answer's text."""
        return self.message.text

    @property
    def tool_calls(self) -> tuple[ToolCall, ...]:
        """The tool calls the final message asks for (empty once a tool loop has run them)."""
        return self.message.tool_calls

    def with_message(self, message: AssistantMessage) -> ChatResponse:
        """A copy whose answer is `message`: it replaces the last assistant message of
        `messages`, so what a memory stores and what the caller reads stay one answer."""
        messages = self.messages
        for i in range(len(messages) - 1, -1, -1):
            if messages[i] is self.message:
                return replace(self, messages=(*messages[:i], message, *messages[i + 1 :]))
        raise AssertionError("unreachable: the answer is one of the messages")


def _last_assistant(messages: Sequence[Message]) -> AssistantMessage | None:
    for i in range(len(messages) - 1, -1, -1):
        candidate = messages[i]
        if isinstance(candidate, AssistantMessage):
            return candidate
    return None
