"""Standing rules and the texts of settled calls (what `ApprovalAdvisor` shares)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from typing import Any

from .store import ApprovalStore
from .types import ApprovalCall, Approve, StandingRule, rule_audit

UNKNOWN_OUTCOME = (
    "Error: the outcome of this call is unknown: it was started before a crash and is not "
    "run again. Check whether it took effect before trying again."
)
"""What the model reads for a call whose claim was taken over after it started."""


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


__all__ = ["UNKNOWN_OUTCOME", "allow", "remember"]
