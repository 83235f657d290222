"""Elicitation: an MCP server asks the user a question (`elicitation/create`).

Opt-in: a toolset without an `ElicitationHandler` does not advertise the capability, and
the SDK refuses such requests. The handlers this package offers (a console prompt,
deferred calls) are in `_elicitors`.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

from ._answers import check_answer

if TYPE_CHECKING:
    from mcp.client.session import ClientRequestContext
    from mcp_types import ElicitRequestParams, ElicitResult, ErrorData


@dataclass(frozen=True, slots=True)
class ElicitationRequest:
    """A server's question to the user: a form (`schema`, a flat JSON schema) or a URL
    to open (`url`).

    `call_id` is the id of the tool call the server asked during, when the toolset can
    tell (exactly one of its calls was running); else `None`.
    """

    server: str
    message: str
    schema: Mapping[str, Any] | None = None
    url: str | None = None
    call_id: str | None = None


@dataclass(frozen=True, slots=True)
class ElicitationAnswer:
    """The user's answer: `accept` (with `content` fitting the schema), `decline`, `cancel`."""

    action: Literal["accept", "decline", "cancel"]
    content: Mapping[str, Any] | None = None


ElicitationHandler: TypeAlias = Callable[
    [ElicitationRequest], ElicitationAnswer | Awaitable[ElicitationAnswer]
]
"""Answers a server's elicitation (sync or async): a callback, a console prompt, a UI."""

_MAX_MESSAGE_CHARS = 10_000


def elicitation_callback(
    handler: ElicitationHandler,
    server: str,
    running_call: Callable[[], str | None] = lambda: None,
) -> Any:
    """The SDK callback that routes `elicitation/create` to `handler`, checking that an
    accepted answer fits the requested schema before it goes back to the server.
    `running_call()` names the one tool call running on the connection, if there is one."""

    async def answer(
        context: ClientRequestContext, params: ElicitRequestParams
    ) -> ElicitResult | ErrorData:
        from mcp_types import INVALID_PARAMS, ElicitResult, ErrorData

        schema = getattr(params, "requested_schema", None)
        url = getattr(params, "url", None)
        request = ElicitationRequest(
            server=server,
            message=str(params.message)[:_MAX_MESSAGE_CHARS],
            schema=dict(schema) if schema is not None else None,
            url=None if url is None else str(url)[:_MAX_MESSAGE_CHARS],
            call_id=running_call(),
        )
        reply = handler(request)
        if inspect.isawaitable(reply):
            reply = await reply
        if not isinstance(reply, ElicitationAnswer):
            return ErrorData(code=INVALID_PARAMS, message="the elicitation handler gave no answer")
        if reply.action != "accept":
            return ElicitResult(action=reply.action)
        content = dict(reply.content or {})
        if request.schema is not None:
            errors = check_answer(content, request.schema)
            if errors:
                return ErrorData(
                    code=INVALID_PARAMS,
                    message="the answer does not fit the requested schema: " + "; ".join(errors),
                )
        return ElicitResult(action="accept", content=content if request.url is None else None)

    return answer


__all__ = [
    "ElicitationAnswer",
    "ElicitationHandler",
    "ElicitationRequest",
    "elicitation_callback",
]
