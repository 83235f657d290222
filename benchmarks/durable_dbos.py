"""Durable turns on DBOS: CPU and wall time per turn, in process vs on DBOS (issue 33).

The same scripted three-round turn everywhere: round 1 asks for `balance` (read-only),
round 2 for `transfer` (has effects: on DBOS it goes through the effects ledger), round 3
answers with text. Clients, each measured in this process over `turns` sequential turns
after a warm-up (CPU: `time.process_time`, which includes DBOS's own threads):

- `in-process`: `chain.call` on the chain as built;
- `dbos`: `DBOSRunner.call` on a SQLite system database (start on the queue, wait for the
  result), the ledger in SQLite;
- `dbos-floor`: a hand-written DBOS workflow doing the same three model calls and two
  tool calls as DBOS steps (the model called directly, no chain, no ledger), started on the
  same kind of queue: what DBOS itself costs;
- `pydantic-ai on dbos`: PydanticAI (pydantic-ai-slim, when installed) with its
  `DBOSDurability` capability, its tools DBOS steps, in a workflow on the same queue;
- with `--postgres DSN`, all of them again on a PostgreSQL system database.

`--ledger memory` puts the runner's effects ledger in memory, to tell what the SQLite
ledger's two commits per call with effects cost from what the runner costs.

DBOS's queue and result polling set a floor on wall time (`--polling`, seconds, the same
for the runner and the floor). One run prints a Markdown table.

    python -m benchmarks.durable_dbos [--turns 30] [--polling 0.01] [--postgres DSN]
                                      [--ledger sqlite|memory]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Coroutine
from pathlib import Path
from typing import Any

from dbos import DBOS

from advisorchain import AssistantMessage, Chain, ToolCall, ToolCallingAdvisor, tool
from advisorchain.core.request import ChatRequest
from advisorchain.durable.dbos import DBOSRunner
from advisorchain.durable.ledger import MemoryLedger, SQLiteLedger
from advisorchain.providers import ScriptedChatModel

EFFECTS: list[str] = []


@tool(read_only=True)
def balance(who: str) -> str:
    """The balance of an account."""
    return f"{who} has 10"


@tool
def transfer(to: str, amount: int) -> str:
    """Send money."""
    EFFECTS.append(to)
    return f"sent {amount} to {to}"


def script(request: ChatRequest) -> AssistantMessage:
    done = sum(1 for m in request.messages if m.role == "tool")
    if done == 0:
        call = ToolCall(id="c1", name="balance", arguments='{"who": "me"}')
        return AssistantMessage(tool_calls=(call,))
    if done == 1:
        call = ToolCall(id="c2", name="transfer", arguments='{"to": "bob", "amount": 5}')
        return AssistantMessage(tool_calls=(call,))
    return AssistantMessage(content="Done.")


def bank_chain() -> Chain:
    return Chain([ToolCallingAdvisor()], model=ScriptedChatModel(script), tools=[balance, transfer])


async def measure(turn: Callable[[], Awaitable[Any]], turns: int) -> tuple[float, float]:
    """Median CPU and wall seconds per turn, after two warm-up turns."""
    for _ in range(2):
        await turn()
    cpu: list[float] = []
    wall: list[float] = []
    for _ in range(turns):
        c0, w0 = time.process_time(), time.perf_counter()
        await turn()
        cpu.append(time.process_time() - c0)
        wall.append(time.perf_counter() - w0)
    return statistics.median(cpu), statistics.median(wall)


async def on_dbos(
    system_db: str, folder: Path, turns: int, polling: float, ledger: str
) -> dict[str, Any]:
    DBOS(
        config={
            "name": "bench",
            "system_database_url": system_db,
            "notification_listener_polling_interval_sec": polling,
            "log_level": "ERROR",
        }
    )
    runner = DBOSRunner(
        bank_chain(),
        ledger=MemoryLedger()
        if ledger == "memory"
        else SQLiteLedger(folder / f"l{uuid.uuid4().hex}.db"),
        name="bench",
        polling_interval=polling,
    )
    model = ScriptedChatModel(script)

    @DBOS.step(name="floor.model")
    async def model_step(messages: str) -> str:
        from advisorchain.core.messages import dump_messages, load_messages

        response = await model.call(ChatRequest(messages=load_messages(messages)))
        return dump_messages(response.messages).decode()

    @DBOS.step(name="floor.tool")
    async def tool_step(name: str) -> str:
        return str(balance("me") if name == "balance" else transfer("bob", 5))

    @DBOS.workflow(name="floor.turn")
    async def floor(prompt: str) -> str:
        from advisorchain.core.messages import (
            ToolMessage,
            UserMessage,
            dump_messages,
            load_messages,
        )

        messages: list[Any] = [UserMessage(content=prompt)]
        for _ in range(3):
            answer = load_messages(await model_step(dump_messages(messages).decode()))
            messages.extend(answer)
            calls = answer[-1].tool_calls  # type: ignore[union-attr]
            if not calls:
                break
            for call in calls:
                text = await tool_step(call.name)
                messages.append(ToolMessage(tool_call_id=call.id, name=call.name, content=text))
        return str(messages[-1].text)

    pydantic_ai_turn = pydantic_ai_on_dbos()
    DBOS.launch()
    try:
        await runner.ready()
        queue = await DBOS.register_queue_async("floor_turns", polling_interval_sec=polling)

        async def runner_turn() -> None:
            response = await runner.call("Pay bob 5")
            assert response.message.text == "Done."

        async def floor_turn() -> None:
            handle = await queue.enqueue_async(floor, "Pay bob 5")
            assert await handle.get_result(polling_interval_sec=polling) == "Done."

        found = {
            "dbos": await measure(runner_turn, turns),
            "dbos-floor": await measure(floor_turn, turns),
        }
        if pydantic_ai_turn is not None:
            workflow = pydantic_ai_turn

            async def peer_turn() -> None:
                handle = await queue.enqueue_async(workflow, "Pay bob 5")
                assert await handle.get_result(polling_interval_sec=polling) == "Done."

            found["pydantic-ai on dbos"] = await measure(peer_turn, turns)
        return found
    finally:
        DBOS.destroy(destroy_registry=True)


def pydantic_ai_on_dbos() -> Callable[[str], Coroutine[Any, Any, str]] | None:
    """PydanticAI's agent with its `DBOSDurability` capability, run in a DBOS workflow, on
    the same turn (its tools made DBOS steps, as PydanticAI's guide says for tools with
    I/O); `None` when pydantic-ai-slim is not installed."""
    try:
        from pydantic_ai import Agent
        from pydantic_ai.durable_exec.dbos import DBOSDurability
        from pydantic_ai.messages import (
            ModelMessage,
            ModelRequest,
            ModelResponse,
            TextPart,
            ToolCallPart,
            ToolReturnPart,
        )
        from pydantic_ai.models.function import AgentInfo, FunctionModel
    except ImportError:
        return None

    def reply(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        done = sum(
            isinstance(p, ToolReturnPart)
            for m in messages
            if isinstance(m, ModelRequest)
            for p in m.parts
        )
        if done == 0:
            return ModelResponse(parts=[ToolCallPart("pai_balance", '{"who": "me"}', "c1")])
        if done == 1:
            arguments = '{"to": "bob", "amount": 5}'
            return ModelResponse(parts=[ToolCallPart("pai_transfer", arguments, "c2")])
        return ModelResponse(parts=[TextPart("Done.")])

    @DBOS.step(name="pai.balance")
    async def pai_balance(who: str) -> str:
        """The balance of an account."""
        return f"{who} has 10"

    @DBOS.step(name="pai.transfer")
    async def pai_transfer(to: str, amount: int) -> str:
        """Send money."""
        EFFECTS.append(to)
        return f"sent {amount} to {to}"

    agent = Agent(
        FunctionModel(reply),
        name="bench_agent",
        tools=[pai_balance, pai_transfer],
        capabilities=[DBOSDurability()],
    )

    @DBOS.workflow(name="pai.turn")
    async def pai_turn(prompt: str) -> str:
        return str((await agent.run(prompt)).output)

    return pai_turn


async def main(args: argparse.Namespace) -> None:
    chain = bank_chain()

    async def in_process() -> None:
        response = await chain.call("Pay bob 5")
        assert response.message.text == "Done."

    rows: list[tuple[str, str, tuple[float, float]]] = [
        ("in-process", "-", await measure(in_process, args.turns))
    ]
    with tempfile.TemporaryDirectory() as folder:
        found = await on_dbos(
            f"sqlite:///{folder}/dbos.sqlite", Path(folder), args.turns, args.polling, args.ledger
        )
        rows += [(name, "SQLite", value) for name, value in found.items()]
        if args.postgres:
            found = await on_dbos(
                args.postgres, Path(folder), args.turns, args.polling, args.ledger
            )
            rows += [(name, "PostgreSQL", value) for name, value in found.items()]
    print(
        f"\n{args.turns} turns each, median per turn; DBOS polling {args.polling} s; "
        f"{args.ledger} ledger\n"
    )
    print("| runner | system database | CPU ms / turn | wall ms / turn |")
    print("|---|---|---:|---:|")
    for name, database, (cpu, wall) in rows:
        print(f"| {name} | {database} | {cpu * 1000:.2f} | {wall * 1000:.1f} |")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=30)
    parser.add_argument("--polling", type=float, default=0.01)
    parser.add_argument("--postgres")
    parser.add_argument("--ledger", choices=["sqlite", "memory"], default="sqlite")
    asyncio.run(main(parser.parse_args()))
