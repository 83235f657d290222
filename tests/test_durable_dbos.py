"""The DBOS runner in one process: the same turn as in-process, decisions, streams, payloads.

The bank chain (tests/durable_bank.py) runs its three-round turn with a deferred
approval in-process and as a DBOS workflow on a SQLite system database; transcript, usage
and stream events must match. DBOS runs on asyncio only, so these tests do too. The
crash tests are in test_durable_dbos_crash.py.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("dbos")

from dbos import DBOS  # noqa: E402

from advisorchain import Chain  # noqa: E402
from advisorchain.core.deferred import Approve, Decision, DeferredCall, Reject, Result  # noqa: E402
from advisorchain.core.errors import InvalidDecisions  # noqa: E402
from advisorchain.core.events import (  # noqa: E402
    ResponseCompleted,
    StreamEvent,
    TextDelta,
    ToolCallFinished,
)
from advisorchain.core.messages import ToolCall, UserMessage, dump_messages  # noqa: E402
from advisorchain.core.response import ChatResponse  # noqa: E402
from advisorchain.durable.dbos import (  # noqa: E402
    DECISIONS_TOPIC,
    REFUSED_EVENT,
    DBOSRunner,
    Waiting,
    check_decisions,
    dump_decisions,
    load_decisions,
    read_payload,
)
from advisorchain.durable.ledger import MemoryLedger, SQLiteLedger  # noqa: E402
from advisorchain.durable.steps import UnsupportedPayloadVersion  # noqa: E402

from durable_bank import bank_chain, transfers  # noqa: E402

PROMPT = "Pay bob 5"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # DBOS runs on asyncio only


@pytest.fixture
def effects(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "bank.db"
    monkeypatch.setenv("BANK_EFFECTS", str(path))
    return path


Launch = Callable[..., DBOSRunner]


@pytest.fixture
def launch(tmp_path: Path, effects: Path) -> Iterator[Launch]:
    """`launch(chain, **options)`: a DBOS app on a fresh SQLite system database, with a
    runner for `chain`, launched."""
    DBOS(
        config={
            "name": "bank",
            "system_database_url": f"sqlite:///{tmp_path / 'dbos.sqlite'}",
            "notification_listener_polling_interval_sec": 0.02,
            "log_level": "WARNING",
        }
    )

    def start(chain: Chain, **options: Any) -> DBOSRunner:
        options.setdefault("ledger", SQLiteLedger(tmp_path / "ledger.db"))
        runner = DBOSRunner(
            chain, name=f"t{uuid.uuid4().hex[:8]}", polling_interval=0.02, **options
        )
        DBOS.launch()
        return runner

    yield start
    DBOS.destroy(destroy_registry=True)


def normalized(messages: Any) -> bytes:
    """Messages as JSON, the approval's id (random in every run) left out."""
    return re.sub(rb"approval_[0-9a-f]{32}", b"approval_<id>", dump_messages(list(messages)))


async def in_process_call() -> ChatResponse:
    chain = bank_chain()
    first = await chain.call(PROMPT)
    assert first.finish_reason == "deferred"
    second = await chain.call(
        [UserMessage(content=PROMPT), *first.messages], decisions={"c2": Approve()}
    )
    return ChatResponse(
        messages=[*first.messages, *second.messages],
        finish_reason=second.finish_reason,
        usage=first.usage + second.usage,
    )


async def in_process_stream() -> list[StreamEvent]:
    chain = bank_chain()
    events = [e async for e in chain.stream(PROMPT)]
    first = events[-1]
    assert isinstance(first, ResponseCompleted)
    transcript = [UserMessage(content=PROMPT), *first.response.messages]
    events += [e async for e in chain.stream(transcript, decisions={"c2": Approve()})]
    return events


async def approve(runner: DBOSRunner, turn: str) -> None:
    waiting = await runner.waiting(turn)
    assert waiting is not None
    await runner.decide(turn, {"c2": Approve()}, shown=waiting.calls)


@pytest.mark.anyio
async def test_a_turn_on_dbos_equals_the_turn_in_process(launch: Launch, effects: Path) -> None:
    expected = await in_process_call()
    assert transfers() == 1
    runner = launch(bank_chain())
    turn = await runner.start(PROMPT)
    await approve(runner, turn)
    response = await runner.result(turn)
    assert transfers() == 2
    assert normalized(response.messages) == normalized(expected.messages)
    assert response.usage == expected.usage
    assert response.message.text == "Done: sent 5 to bob"
    assert response.finish_reason == "stop"


def _comparable(events: list[StreamEvent]) -> list[Any]:
    out: list[Any] = []
    for event in events:
        if isinstance(event, ToolCallFinished):
            out.append(("finished", event.call.id, event.result.text, event.outcome))
        elif isinstance(event, ResponseCompleted):
            out.append(("completed", normalized(event.response.messages), event.response.usage))
        else:
            out.append(event)
    return out


@pytest.mark.anyio
async def test_a_streamed_turn_on_dbos_yields_the_in_process_events(launch: Launch) -> None:
    expected = await in_process_stream()
    runner = launch(bank_chain())
    events: list[StreamEvent] = []
    async for event in runner.stream(PROMPT):
        events.append(event)
        if isinstance(event, ResponseCompleted) and event.response.finish_reason == "deferred":
            turn = (await DBOS.list_workflows_async())[0].workflow_id
            await approve(runner, turn)
    assert _comparable(events) == _comparable(expected)
    assert any(isinstance(e, TextDelta) for e in events)  # deltas, live from the step


@pytest.mark.anyio
async def test_events_reconnect_from_an_offset(launch: Launch) -> None:
    runner = launch(bank_chain())
    turn = await runner.start(PROMPT, stream=True)
    await approve(runner, turn)
    everything = [item async for item in runner.events(turn)]
    offsets = [o for o, _ in everything]
    assert offsets == sorted(offsets) and len(set(offsets)) == len(offsets)
    cut = everything[len(everything) // 2][0]
    rest = [item async for item in runner.events(turn, offset=cut)]
    assert _comparable([e for _, e in rest]) == _comparable([e for o, e in everything if o >= cut])


@pytest.mark.anyio
async def test_decisions_are_checked_before_they_are_sent(launch: Launch) -> None:
    runner = launch(bank_chain())
    turn = await runner.start(PROMPT)
    waiting = await runner.waiting(turn)
    assert waiting is not None and waiting.round == 1
    with pytest.raises(InvalidDecisions, match="'c9'"):
        await runner.decide(turn, {"c9": Approve()})
    forged = DeferredCall(
        call=ToolCall(id="c2", name="transfer", arguments='{"to": "mallory", "amount": 1000000}'),
        kind="approval",
    )
    with pytest.raises(InvalidDecisions, match="other arguments"):
        await runner.decide(turn, {"c2": Approve()}, shown=[forged])
    with pytest.raises(InvalidDecisions):
        await runner.decide(turn, {"c2": "yes"})  # type: ignore[dict-item]
    with pytest.raises(InvalidDecisions, match="approve or reject, not result"):
        await runner.decide(turn, {"c2": Result("done")})
    assert transfers() == 0  # nothing was sent: the turn still waits
    await runner.decide(turn, {"c2": Reject("not today")})
    response = await runner.result(turn)
    assert transfers() == 0
    assert "not today" in [m for m in response.messages if m.role == "tool"][-1].text


@pytest.mark.anyio
async def test_the_workflow_refuses_decisions_that_slip_past_the_door(launch: Launch) -> None:
    runner = launch(bank_chain())
    turn = await runner.start(PROMPT)
    waiting = await runner.waiting(turn)
    assert waiting is not None
    wrong = {"v": 1, "round": waiting.round, "decisions": dump_decisions({"c2": Result("x")})}
    await DBOS.send_async(turn, wrong, DECISIONS_TOPIC)  # not through `decide`
    refused = await DBOS.get_event_async(turn, REFUSED_EVENT, timeout_seconds=60)
    assert refused["round"] == 1 and "c2" in refused["error"]
    assert transfers() == 0  # refused before anything ran; the turn still waits
    stale = {"v": 1, "round": 0, "decisions": dump_decisions({"c2": Approve()})}
    await DBOS.send_async(turn, stale, DECISIONS_TOPIC)  # for another wait: dropped
    await runner.decide(turn, {"c2": Reject("no")})
    response = await runner.result(turn)
    assert response.finish_reason == "stop" and transfers() == 0


@pytest.mark.anyio
async def test_a_turn_without_decisions_in_time_ends_deferred(launch: Launch) -> None:
    runner = launch(bank_chain(), decision_timeout=0.2)
    response = await runner.call(PROMPT)
    assert response.finish_reason == "deferred"
    assert [d.call.id for d in response.deferred] == ["c2"]
    assert transfers() == 0


@pytest.mark.anyio
async def test_starting_a_turn_id_twice_runs_it_once(
    launch: Launch, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "model.log"
    monkeypatch.setenv("BANK_MODEL_LOG", str(log))
    runner = launch(bank_chain())
    first = await runner.start("look at my balance", turn_id="t-1")
    second = await runner.start("look at my balance", turn_id="t-1")
    assert first == second == "t-1"
    response = await runner.result("t-1")
    assert response.message.text == "You have: me has 10"
    assert len(log.read_text().splitlines()) == 2  # two rounds, once


def test_the_runner_refuses_bad_arguments(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="Chain"):
        DBOSRunner("chain", ledger=MemoryLedger())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="EffectLedger"):
        DBOSRunner(bank_chain(), ledger="ledger.db")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="runner name"):
        DBOSRunner(bank_chain(), ledger=MemoryLedger(), name="a b")
    with pytest.raises(ValueError, match="decision_timeout"):
        DBOSRunner(bank_chain(), ledger=MemoryLedger(), decision_timeout=0)


def test_check_decisions_without_shown_calls_checks_ids() -> None:
    call = DeferredCall(
        call=ToolCall(id="c2", name="transfer", arguments="{}"),
        kind="approval",
        accepts=("approve", "reject"),
    )
    waiting = Waiting(round=1, calls=(call,), fingerprints={})
    check_decisions(waiting, {"c2": Approve()})
    with pytest.raises(InvalidDecisions):
        check_decisions(waiting, {"c1": Approve()})


# -- payloads ----------------------------------------------------------------------------


def test_decisions_round_trip() -> None:
    decisions: dict[str, Decision] = {
        "a": Approve(arguments={"to": "bob"}, by="ann", remember="tool"),
        "b": Reject("no", by="ann"),
        "c": Result({"job": [1, 2]}),
        "d": {"inner": Approve()},
    }
    assert load_decisions(dump_decisions(decisions)) == decisions
    with pytest.raises(InvalidDecisions, match="cannot be sent"):
        dump_decisions({"c": Result(object())})
    with pytest.raises(InvalidDecisions, match="cannot be sent"):
        dump_decisions({"c": "yes"})  # type: ignore[dict-item]


def test_a_newer_payload_is_refused() -> None:
    assert read_payload({"v": 1, "x": 2}, "turn") == {"v": 1, "x": 2}
    with pytest.raises(UnsupportedPayloadVersion, match="newer|upgrade"):
        read_payload({"v": 99}, "turn")
    with pytest.raises(UnsupportedPayloadVersion, match="versioned"):
        read_payload({"type": "text"}, "stream event")
