"""The structure of a transcript that compaction must respect: groups, waiting calls,
repair, and the cheap measures (token estimates, prefix digests) it decides with.

A *group* is the unit nothing ever splits: a user message alone, or an assistant message
with all the results of its calls (or an assistant message without calls alone). A
*waiting call* is an assistant tool call with no result in the transcript, in the last
group, with nothing but tool results after it: the tool loop (or a deferred turn's resume)
has yet to answer it. Every other unanswered call is *orphaned*: `repair` answers it with
an "interrupted" error result; a result that answers no call of its group is dropped.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

from ...core.messages import AssistantMessage, Message, SystemMessage, ToolMessage, UserMessage
from ...core.parts import DocumentPart, ImagePart
from ..memory.store import message_json

INTERRUPTED = (
    "[interrupted] This call never returned a result (the turn that made it was interrupted); "
    "do not assume it ran."
)
"""The text of the error result `repair` gives an orphaned call."""


@dataclass(frozen=True, slots=True)
class Group:
    """Messages `[start, stop)` of a transcript that stay together."""

    start: int
    stop: int
    is_user: bool


def groups(messages: Sequence[Message]) -> list[Group]:
    """The groups of a transcript without system messages (repaired: every tool result
    follows its call's assistant message)."""
    found: list[Group] = []
    i = 0
    while i < len(messages):
        message = messages[i]
        stop = i + 1
        if isinstance(message, AssistantMessage) and message.tool_calls:
            while stop < len(messages) and isinstance(messages[stop], ToolMessage):
                stop += 1
        found.append(Group(i, stop, isinstance(message, UserMessage)))
        i = stop
    return found


def waiting_calls(messages: Sequence[Message]) -> tuple[str, ...]:
    """The ids of the calls that wait: calls of the last assistant message without a
    result, when only tool results follow that message."""
    for i in range(len(messages) - 1, -1, -1):
        message = messages[i]
        if isinstance(message, ToolMessage):
            continue
        if not isinstance(message, AssistantMessage) or not message.tool_calls:
            return ()
        answered = {m.tool_call_id for m in messages[i + 1 :] if isinstance(m, ToolMessage)}
        return tuple(c.id for c in message.tool_calls if c.id not in answered)
    return ()


def repair(messages: Sequence[Message]) -> tuple[Message, ...]:
    """`messages` with every orphaned call answered and every orphan result dropped.

    A result is kept when it directly follows (among results) the assistant message that
    made its call and is that call's first result; every other result is dropped. A call
    without a kept result gets an `INTERRUPTED` error result after its group's results,
    unless it waits (`waiting_calls`). Returns `messages` itself (as a tuple) when nothing
    needed repair.
    """
    out: list[Message] = []
    changed = False
    open_calls: dict[str, str] = {}  # id -> name, the calls of the current group
    answered: set[str] = set()
    order: list[str] = []

    def close() -> None:
        nonlocal changed
        for call_id in order:
            if call_id not in answered:
                changed = True
                out.append(
                    ToolMessage(
                        tool_call_id=call_id,
                        name=open_calls[call_id],
                        content=INTERRUPTED,
                        is_error=True,
                    )
                )
        open_calls.clear()
        answered.clear()
        order.clear()

    waiting = set(waiting_calls(messages))
    for message in messages:
        if isinstance(message, ToolMessage):
            if message.tool_call_id in open_calls and message.tool_call_id not in answered:
                answered.add(message.tool_call_id)
                out.append(message)
            else:
                changed = True  # an orphan or a second result: dropped
            continue
        close()
        out.append(message)
        if isinstance(message, AssistantMessage):
            for call in message.tool_calls:
                if call.id not in open_calls:
                    open_calls[call.id] = call.name
                    order.append(call.id)
    for call_id in waiting:
        answered.add(call_id)
    close()
    return tuple(messages) if not changed else tuple(out)


def split_system(messages: Sequence[Message]) -> tuple[list[Message], list[Message]]:
    """The system messages and the others, each in order."""
    system: list[Message] = [m for m in messages if isinstance(m, SystemMessage)]
    others: list[Message] = [m for m in messages if not isinstance(m, SystemMessage)]
    return system, others


IMAGE_TOKENS = 800
"""What `estimate_tokens` counts for an image or a document part."""


def estimate_tokens(messages: Sequence[Message]) -> int:
    """A quick estimate of the input tokens of `messages`: four characters a token,
    `IMAGE_TOKENS` an image or document, a few tokens a message and a call."""
    total = 0
    for message in messages:
        total += 4 + len(message.text) // 4
        if not isinstance(message.content, str) and message.content is not None:
            for part in message.content:
                if isinstance(part, (ImagePart, DocumentPart)):
                    total += IMAGE_TOKENS
                elif part.type == "reasoning":
                    total += len(part.text) // 4
        if isinstance(message, AssistantMessage):
            for call in message.tool_calls:
                total += 4 + (len(call.name) + len(call.arguments)) // 4
    return total


def prefix_digests(messages: Sequence[Message]) -> list[str]:
    """`digests[k]` identifies `messages[:k]`: a hash chain over each message's JSON."""
    digest = hashlib.sha256(b"advisorchain-compaction")
    found = [digest.hexdigest()]
    for message in messages:
        digest = digest.copy()
        digest.update(message_json(message).encode("utf-8", "surrogatepass"))
        digest.update(b"\x00")
        found.append(digest.hexdigest())
    return found


__all__ = [
    "IMAGE_TOKENS",
    "INTERRUPTED",
    "Group",
    "estimate_tokens",
    "groups",
    "prefix_digests",
    "repair",
    "split_system",
    "waiting_calls",
]
