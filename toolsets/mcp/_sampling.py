"""Sampling: an MCP server asks the client's model for a completion
(`sampling/createMessage`). Opt-in: a toolset without a `SamplingPolicy` does not
advertise the capability, and the SDK refuses such requests.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ...advisors.approval import ApprovalCall, ApprovalRequest, Approve, Approver
from ...core.messages import AssistantMessage, Message, SystemMessage, UserMessage
from ...core.model import ChatModel
from ...core.options import ChatOptions
from ...core.request import ChatRequest
from ._content import ContentLimits, _Mapper

if TYPE_CHECKING:
    from mcp.client.session import ClientRequestContext
    from mcp_types import (
        CreateMessageRequestParams,
        CreateMessageResult,
        ErrorData,
    )


logger = logging.getLogger("advisorchain.mcp")


@dataclass(frozen=True, slots=True)
class SamplingRequest:
    """A server's request for a model answer, as `SamplingPolicy.approve` sees it."""

    server: str
    messages: tuple[Message, ...]
    max_tokens: int
    system_prompt: str | None = None


@dataclass(frozen=True, slots=True)
class SamplingPolicy:
    """Lets a server ask `model` (a provider or a `Chain`) for completions.

    Give it only to the toolsets of servers you allow to sample. Each request's
    `maxTokens` is capped at `max_tokens`, at most `max_messages` messages are taken, and
    at most `max_requests` are answered per connection (then each is refused). With
    `approve` (sync or async, given a `SamplingRequest`), a request runs only when it
    returns true. With `approver` (the approval machinery's `Approver`: a
    `ConsoleApprover`, a `CallbackApprover`), a person sees the request as one call of
    the pseudo-tool `mcp_sampling` (server, messages, token cap) and it runs only on
    `Approve()`; anything else refuses it.
    """

    model: ChatModel
    max_tokens: int = 1024
    max_messages: int = 50
    max_requests: int = 100
    approve: Callable[[SamplingRequest], bool | Awaitable[bool]] | None = None
    approver: Approver | None = None
    limits: ContentLimits = field(default_factory=ContentLimits)


_MAX_MESSAGE_CHARS = 10_000


def sampling_callback(policy: SamplingPolicy, server: str) -> Any:
    """The SDK callback that answers `sampling/createMessage` under `policy`."""
    answered = 0

    async def answer(
        context: ClientRequestContext, params: CreateMessageRequestParams
    ) -> CreateMessageResult | ErrorData:
        nonlocal answered
        from mcp_types import INVALID_REQUEST, CreateMessageResult, ErrorData, TextContent

        if answered >= policy.max_requests:
            return ErrorData(
                code=INVALID_REQUEST,
                message=f"sampling refused: at most {policy.max_requests} requests",
            )
        answered += 1
        messages = _sampling_messages(params, policy)
        max_tokens = max(1, min(int(params.max_tokens), policy.max_tokens))
        system = str(params.system_prompt)[:_MAX_MESSAGE_CHARS] if params.system_prompt else None
        request = SamplingRequest(server, messages, max_tokens, system)
        if not await _approved(policy, request, answered):
            return ErrorData(code=INVALID_REQUEST, message="sampling refused by the user")
        chat = ((SystemMessage(content=system),) if system else ()) + messages
        options = ChatOptions(max_tokens=max_tokens, temperature=params.temperature)
        try:
            response = await policy.model.call(ChatRequest(messages=chat, options=options))
        except Exception as exc:
            logger.warning("MCP server %r: sampling failed: %s", server, type(exc).__name__)
            return ErrorData(code=INVALID_REQUEST, message="sampling failed")
        return CreateMessageResult(
            role="assistant",
            content=TextContent(type="text", text=response.text),
            model=response.model or "advisorchain",
            stop_reason="maxTokens" if response.finish_reason == "length" else "endTurn",
        )

    return answer


async def _approved(policy: SamplingPolicy, request: SamplingRequest, number: int) -> bool:
    if policy.approve is not None:
        verdict = policy.approve(request)
        if inspect.isawaitable(verdict):
            verdict = await verdict
        if not verdict:
            return False
    if policy.approver is None:
        return True
    call = ApprovalCall(
        id=f"mcp-sampling-{number}",
        name="mcp_sampling",
        description=f"The MCP server {request.server!r} asks your model for a completion.",
        arguments={
            "system_prompt": request.system_prompt,
            "messages": [f"{m.role}: {m.text}" for m in request.messages],
            "max_tokens": request.max_tokens,
        },
    )
    decisions = await policy.approver.decide(ApprovalRequest(calls=(call,)))
    decision = (
        decisions.get(call.call_id)
        if isinstance(decisions, Mapping)
        else next(iter(decisions), None)
    )
    return isinstance(decision, Approve)


def _sampling_messages(
    params: CreateMessageRequestParams, policy: SamplingPolicy
) -> tuple[Message, ...]:
    converted: list[Message] = []
    for message in params.messages[-policy.max_messages :]:
        blocks = message.content if isinstance(message.content, list) else [message.content]
        mapper = _Mapper(policy.limits)
        for block in blocks:
            mapper.add(block)
        if message.role == "assistant":
            text = "\n".join(getattr(p, "text", f"[{p.type}]") for p in mapper.parts)
            converted.append(AssistantMessage(content=text))
        else:
            parts = tuple(mapper.parts)
            if all(p.type == "text" for p in parts):
                converted.append(
                    UserMessage(content="\n".join(getattr(p, "text", "") for p in parts))
                )
            else:
                converted.append(UserMessage(content=parts))
    return tuple(converted)


__all__ = [
    "SamplingPolicy",
    "SamplingRequest",
    "sampling_callback",
]
