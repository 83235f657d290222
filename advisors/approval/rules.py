"""Standing rules and the texts of settled and edited calls (what `ApprovalAdvisor` uses)."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from ...core.invocation import ToolResult
from ...core.parts import DocumentPart, ImagePart, TextPart
from ...core.tools import InvalidToolArguments, Tool
from .store import ApprovalStore
from .types import (
    ApprovalCall,
    Approve,
    StandingRule,
    arguments_fingerprint,
    json_arguments,
    rule_audit,
)

UNKNOWN_OUTCOME = (
    "Error: the outcome of this call is unknown: it was started before a crash and is not "
    "run again. Check whether it took effect before trying again."
)
"""What the model reads for a call whose claim was taken over after it started."""


EDITED_NOTE = (
    "Note: the approver changed the arguments of this call to {arguments} (not those you sent)."
)
"""What the model reads before the result of a call an approver edited: the arguments it
ran with (or was refused with), in JSON."""

EDITED_ARGUMENTS = "approval_edited_arguments"
"""`ToolResult.metadata` key of an edited call's result: the arguments it ran with (JSON)."""


def edited_result(
    result: ToolResult, asked: Mapping[str, Any], ran: Mapping[str, Any]
) -> ToolResult:
    """`result` of a call an approver edited from `asked` to `ran`, as the model reads it:
    led by a note with the arguments that ran (`EDITED_NOTE`), so the transcript, memory
    and the model's next request tell what ran while the assistant message (and any
    provider reasoning signed with it) stays as the model wrote it. Unchanged when `ran`
    has the fingerprint of `asked` or the result is deferred."""
    if result.outcome == "deferred" or arguments_fingerprint(ran) == arguments_fingerprint(asked):
        return result
    shown = json_arguments(ran)
    note = EDITED_NOTE.format(
        arguments=json.dumps(shown, ensure_ascii=False, sort_keys=True, default=str)
    )
    content: str | tuple[TextPart | ImagePart | DocumentPart, ...]
    if isinstance(result.content, str):
        content = f"{note}\n{result.content}"
    else:
        content = (TextPart(text=note), *result.content)
    metadata = {**result.metadata, EDITED_ARGUMENTS: shown}
    return replace(result, content=content, metadata=metadata)


def remembered_arguments(tool: Tool | None, decision: Approve) -> Approve:
    """`decision` with its edited arguments validated by `tool` (the values a standing
    rule made from it is matched against), when they fit; else as it is."""
    if decision.arguments is None or tool is None:
        return decision
    try:
        checked = tool.check_arguments(decision.arguments)
    except InvalidToolArguments:
        return decision
    return replace(decision, arguments=json_arguments(checked))


async def allow(
    store: ApprovalStore,
    conversation_id: str,
    name: str,
    *,
    arguments: Mapping[str, Any] | None,
    by: str,
    call_id: str = "",
) -> StandingRule:
    """Make and store a standing rule, audited as `allowed`."""
    rule = StandingRule(
        id=f"rule_{uuid.uuid4().hex}",
        conversation_id=conversation_id,
        name=name,
        arguments=None if arguments is None else dict(arguments),
        created_by=by,
        created_at=time.time(),
    )
    await store.add_rule(rule, rule_audit(rule, "allowed", by, call_id))
    return rule


async def remember(
    store: ApprovalStore,
    call: ApprovalCall,
    decision: Approve,
    conversation_id: str | None,
    default_by: str,
) -> StandingRule | None:
    """The standing rule an `Approve(remember=...)` asks for, stored; else `None`."""
    if decision.remember is None or conversation_id is None:
        return None
    arguments = None
    if decision.remember == "arguments":
        arguments = decision.arguments if decision.arguments is not None else call.arguments
    by = decision.by or default_by
    return await allow(
        store, conversation_id, call.name, arguments=arguments, by=by, call_id=call.id
    )


__all__ = [
    "EDITED_ARGUMENTS",
    "EDITED_NOTE",
    "UNKNOWN_OUTCOME",
    "allow",
    "edited_result",
    "remember",
    "remembered_arguments",
]
