"""`ChatResponse`: the answer of a model call, or of a whole turn through a chain."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from typing import TYPE_CHECKING, Literal, TypeAlias, TypeVar, cast, get_origin

from .messages import AssistantMessage, Message, ToolCall
from .usage import Usage

if TYPE_CHECKING:
    from .deferred import DeferredCall

T = TypeVar("T")

FinishReason: TypeAlias = (
    Literal[
        "stop",
        "length",
        "tool_calls",
        "content_filter",
        "return_direct",
        "deferred",
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

    `deferred` is set on a turn that ends waiting (`finish_reason="deferred"`): one
    `DeferredCall` per call that waits (a sub-chain's holds its own, nested). Then
    `messages` end with the assistant message whose calls wait (it records them) and the
    results of the round's finished calls: append them to the transcript and resume with
    `chain.call(transcript, decisions={call_id: ...})` (`core/deferred.py`). A resumed
    turn's `messages` start with the results of the calls it settled; when some calls
    still wait, `message` is an assistant message holding just those calls.
    `output` is the answer validated into a Python value, set by `StructuredOutputAdvisor`
    (`None` otherwise); `output_as(T)` returns it typed, after checking it is a `T`.
    """

    messages: tuple[Message, ...]
    finish_reason: FinishReason
    usage: Usage
    model: str | None
    id: str | None
    deferred: tuple[DeferredCall, ...]
    output: object

    def __init__(
        self,
        message: AssistantMessage | None = None,
        *,
        messages: Sequence[Message] = (),
        finish_reason: FinishReason = "stop",
        usage: Usage | None = None,
        model: str | None = None,
        id: str | None = None,
        deferred: tuple[DeferredCall, ...] = (),
        output: object = None,
    ) -> None:
        if not messages:  # a single answer (every model call): nothing to search
            if message is None:
                raise ValueError("a ChatResponse needs its message or its messages")
            messages = (message,)
            found = message
        else:
            last = _last_assistant(messages)
            if last is None and deferred:  # a resumed round whose other calls still wait
                last = AssistantMessage(tool_calls=tuple(d.call for d in deferred))
                message = None
            if last is None:
                raise ValueError("a ChatResponse's messages must contain an assistant message")
            if message is not None and message is not last and message != last:
                raise ValueError(
                    "message must be the last assistant message of messages (the answer is "
                    "held once); change it with response.with_message(...)"
                )
            found = last
        # Frozen: the fields are written straight into the instance, once, with the derived
        # `message` and `tool_calls`: read from the instance, as fields are. One dict update
        # instead of nine `object.__setattr__` calls saves 2.3% of the bare turn (measured
        # alone, `benchmarks.links_ab`); kept for the 10% allowance (architecture decision 29).
        self.__dict__.update(
            messages=tuple(messages),
            finish_reason=finish_reason,
            usage=usage if usage is not None else Usage(),
            model=model,
            id=id,
            deferred=tuple(deferred),
            output=output,
            message=found,
            tool_calls=found.tool_calls,
        )

    # Both are written by `__init__` into the instance, which shadows these (non-data)
    # descriptors: a read is an attribute read, not a call. They compute the value only
    # for an instance that bypassed `__init__`.
    @cached_property
    def message(self) -> AssistantMessage:
        """The answer: the last assistant message of `messages`."""
        found = _last_assistant(self.messages)
        if found is None:  # pragma: no cover - __init__ refuses such messages
            raise ValueError("a ChatResponse's messages must contain an assistant message")
        return found

    @property
    def text(self) -> str:
        """The final answer's text."""
        return self.message.text

    @cached_property
    def tool_calls(self) -> tuple[ToolCall, ...]:
        """The tool calls the final message asks for (empty once a tool loop has run them)."""
        return self.message.tool_calls

    def output_as(self, output_type: type[T]) -> T:
        """`output`, typed as `output_type` (what the `StructuredOutputAdvisor` was given).

        Checks the value's class (for `list[X]` that it is a list, for a TypedDict that it
        is a dict); raises `TypeError` when there is no output (no `StructuredOutputAdvisor`
        in the chain, or the turn ended without an answer to validate) or another type.
        """
        output = self.output
        if output is None:
            raise TypeError(
                "this response has no structured output (add a StructuredOutputAdvisor; a "
                "deferred turn, or one answered by tools directly, has none)"
            )
        if hasattr(output_type, "__required_keys__"):  # a TypedDict (typing's or the backport)
            expected: type = dict
        else:
            expected = get_origin(output_type) or output_type
        if not isinstance(output, expected):
            raise TypeError(
                f"the structured output is a {type(output).__name__}, not a "
                f"{getattr(output_type, '__name__', output_type)}"
            )
        return cast(T, output)  # checked as far as the runtime can

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
        if candidate.role == "assistant":  # `Message`'s tag
            return candidate
    return None


__all__ = ["ChatResponse", "FinishReason"]
