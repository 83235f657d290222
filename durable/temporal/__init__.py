"""Durable turns on Temporal (extra `temporal`): a conversation is a workflow, each turn a
validated update, every model and tool call an activity named after its step
(`advisorchain.durable.steps`). See docs/durable.md.

- `create_worker(client, task_queue, factory, ledger=...)`: the worker that serves a chain.
- `TemporalConversation(client, conversation_id, task_queue=...)`: `start()`, then
  `call`/`stream` turns and resumes (`decisions=`), `events(from_offset=...)` to reconnect.
- `data_converter()`: what the client and the workers connect with.
"""

from ._client import (
    FilePayloadStore,
    LiveDelta,
    SharedPayloadConverter,
    StreamedEvent,
    TemporalConversation,
    data_converter,
)
from ._tracing import ReplaySafeSpanProcessor
from ._worker import StepActivities, create_worker, deterministic_workflow_code
from ._workflow import (
    DECIDE_UPDATE,
    EVENTS_TOPIC,
    LIVE_TOPIC,
    TURN_UPDATE,
    WORKFLOW_NAME,
    ConversationInput,
    ConversationWorkflow,
    DecideInput,
    DurableOptions,
    TemporalStepRunner,
    TurnInput,
    TurnOutput,
)

__all__ = [
    "DECIDE_UPDATE",
    "EVENTS_TOPIC",
    "LIVE_TOPIC",
    "TURN_UPDATE",
    "WORKFLOW_NAME",
    "ConversationInput",
    "ConversationWorkflow",
    "DecideInput",
    "DurableOptions",
    "FilePayloadStore",
    "LiveDelta",
    "ReplaySafeSpanProcessor",
    "SharedPayloadConverter",
    "StepActivities",
    "StreamedEvent",
    "TemporalConversation",
    "TemporalStepRunner",
    "TurnInput",
    "TurnOutput",
    "create_worker",
    "data_converter",
    "deterministic_workflow_code",
]
