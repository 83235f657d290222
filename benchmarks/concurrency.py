"""Concurrency: 1, 100, 1,000 and 5,000 conversations at once on one event loop, over HTTP.

Each conversation streams a two-round turn from the local OpenAI-compatible server
(`benchmarks.openai_server`, its own process on 127.0.0.1, so its CPU is not the
client's): the model asks for `get_weather`, the tool runs, the model streams a text
answer. All N conversations of a batch start together (one task group).

Clients run the same conversations, each in its own worker process: advisorchain
(`Chain([ToolCallingAdvisor()])` around `OpenAIChatModel`, consuming `Chain.stream`), a
hand-written floor (plain httpx, SSE parsed by hand into dicts), and optionally
advisorchain from another source tree (`--base TREE`: before/after in one run).

Both clients exchange the same bytes with the server: the floor sends the body
`OpenAIChatModel` sends (`tool_choice: "auto"`, `stream_options.include_usage`, the
`Authorization` header) and reads the usage chunk that asks for, as a client that
reports token usage must. (An earlier floor asked for no usage, so the
server sent it one chunk fewer per answer than advisorchain: 20 events per conversation
against 22, which alone made advisorchain's conversations about 3% more instructions.)

The HTTP setup is the same for every client: conversations are spread over httpx
clients of `SHARD` connections each (conversation i uses client i mod k), with a long
keep-alive. One shared `httpx.AsyncClient` for all N would measure httpcore's pool
instead of the clients: its bookkeeping walks every pooled connection and waiting request
on each request and each response close (quadratic in N per batch, cubic for the idle
check), which at 5,000 takes minutes for either client; and its 5 s keep-alive expiry
closes connections whenever a loaded machine stretches a batch past it.

Per N, each worker first runs one batch to open its connections (not measured); then
`rounds` measured batches per worker, the workers taking turns in a rotating order (load
from other processes hits all alike); a batch of N runs `ceil(min_conversations / N)`
times in a row so that small N are measured over enough conversations, and a round of fewer
than `SHORT_ROUND` conversations is run `SHORT_ROUNDS` times as often (such rounds take a
second or two, and a single conversation's CPU swings most with the machine's load; the
median over more rounds is steadier, for every client alike). Reported: wall
time, throughput, latency percentiles, the worker's CPU time per conversation (median
over rounds), and memory: the `tracemalloc` peak of one more batch, divided by N.

    python -m benchmarks.concurrency [--ns 1,100,1000,5000] [--rounds 3] [--base TREE]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import anyio
import httpx

from advisorchain import Chain, TextDelta, ToolCallingAdvisor, tool

from .stats import percentile, table

PROMPT = "What's the weather in Paris?"
SHARD = 10
"""Connections per httpx client: at most this many conversations share one pool."""
KEEPALIVE_S = 600.0
"""Keep-alive expiry of the pooled connections (httpx's default, 5 s, is shorter than a
batch on a loaded machine)."""
SHORT_ROUND = 1000
"""Conversations per round below which a round is short (N = 1 and 100, by default)."""
SHORT_ROUNDS = 5
"""How many times as many rounds short rounds get."""
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
Conversation = Callable[[], Awaitable[str]]


@tool
async def get_weather(city: str) -> str:
    """Current weather in a city."""
    return f"Sunny in {city}, 21 C"


@contextlib.contextmanager
def server(latency_ms: float = 0.0) -> Any:
    """Start the test server in a subprocess; yields its base URL."""
    env = dict(os.environ, PYTHONPATH=ROOT)
    process = subprocess.Popen(
        [sys.executable, "-m", "benchmarks.openai_server", "--latency", str(latency_ms)],
        stdout=subprocess.PIPE,
        env=env,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        if not line.startswith("PORT "):
            raise RuntimeError(f"test server did not start: {line!r}")
        yield f"http://127.0.0.1:{int(line.split()[1])}/v1"
    finally:
        process.terminate()
        process.wait(timeout=10)
        if process.stdout is not None:
            process.stdout.close()


def advisorchain_client(base_url: str, http: httpx.AsyncClient) -> Conversation | str:
    """A conversation through `OpenAIChatModel`, or why it cannot run."""
    try:
        from advisorchain.providers import OpenAIChatModel
    except ImportError as exc:
        return f"advisorchain.providers.OpenAIChatModel is not available ({exc})"
    model = OpenAIChatModel("bench", base_url=base_url, api_key="bench-key", http_client=http)
    chain = Chain([ToolCallingAdvisor()], model=model, tools=[get_weather])

    async def conversation() -> str:
        parts = []
        async for event in chain.stream(PROMPT):
            if isinstance(event, TextDelta):
                parts.append(event.text)
        return "".join(parts)

    return conversation


def handwritten_client(base_url: str, http: httpx.AsyncClient) -> Conversation:
    """The same conversation with plain httpx and dicts: the floor (the same request
    bodies as `OpenAIChatModel`'s, usage read and summed as `ChatResponse.usage` is)."""
    url = f"{base_url}/chat/completions"
    tools = [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "Current weather in a city.",
                "parameters": {
                    "type": "object",
                    "properties": {"city": {"type": "string"}},
                    "required": ["city"],
                },
            },
        }
    ]

    headers = {"Authorization": "Bearer bench-key"}

    async def events(messages: list[dict[str, Any]]) -> AsyncIterator[dict[str, Any]]:
        body = {
            "model": "bench",
            "messages": messages,
            "tools": tools,
            "tool_choice": "auto",
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        async with http.stream("POST", url, json=body, headers=headers) as response:
            response.raise_for_status()
            async for line in response.aiter_lines():
                if line.startswith("data: ") and line != "data: [DONE]":
                    yield json.loads(line[6:])

    async def conversation() -> str:
        messages: list[dict[str, Any]] = [{"role": "user", "content": PROMPT}]
        usage = {"prompt_tokens": 0, "completion_tokens": 0}
        while True:
            text: list[str] = []
            calls: dict[int, dict[str, Any]] = {}
            async for chunk in events(messages):
                if chunk.get("usage"):
                    for key in usage:
                        usage[key] += chunk["usage"].get(key) or 0
                for choice in chunk.get("choices", []):
                    delta = choice["delta"]
                    if delta.get("content"):
                        text.append(delta["content"])
                    for c in delta.get("tool_calls") or []:
                        call = calls.setdefault(c["index"], {"id": "", "name": "", "arguments": ""})
                        call["id"] = c.get("id") or call["id"]
                        function = c.get("function") or {}
                        call["name"] = function.get("name") or call["name"]
                        call["arguments"] += function.get("arguments") or ""
            if not calls:
                return "".join(text)
            messages.append(
                {
                    "role": "assistant",
                    "content": "",
                    "tool_calls": [
                        {
                            "id": c["id"],
                            "type": "function",
                            "function": {"name": c["name"], "arguments": c["arguments"]},
                        }
                        for c in calls.values()
                    ],
                }
            )
            for c in calls.values():
                city = json.loads(c["arguments"])["city"]
                messages.append(
                    {"role": "tool", "tool_call_id": c["id"], "content": f"Sunny in {city}, 21 C"}
                )

    return conversation


def http_clients(n: int, *, shard: int = SHARD) -> list[httpx.AsyncClient]:
    """The httpx clients N conversations share: `ceil(n / shard)` pools, one TLS context."""
    count = math.ceil(n / shard)
    per = math.ceil(n / count)
    limits = httpx.Limits(
        max_connections=per, max_keepalive_connections=per, keepalive_expiry=KEEPALIVE_S
    )
    context = ssl.create_default_context()
    return [httpx.AsyncClient(limits=limits, timeout=120, verify=context) for _ in range(count)]


async def _batch(conversations: list[Conversation], n: int) -> tuple[float, list[float], int]:
    """N conversations at once (conversation i on `conversations[i % k]`)."""
    latencies: list[float] = []
    failures = 0

    async def one(conversation: Conversation) -> None:
        nonlocal failures
        start = time.perf_counter()
        try:
            answer = await conversation()
        except Exception:
            failures += 1
            return
        latencies.append(time.perf_counter() - start)
        if not answer.startswith("It is sunny"):
            failures += 1

    start = time.perf_counter()
    async with anyio.create_task_group() as group:
        for i in range(n):
            group.start_soon(one, conversations[i % len(conversations)])
    return time.perf_counter() - start, latencies, failures


async def _worker(client: str, base_url: str) -> None:
    """A worker's loop: commands on stdin (JSON lines), results on stdout."""
    factory = handwritten_client if client == "handwritten" else advisorchain_client
    clients: list[httpx.AsyncClient] = []
    conversations: list[Conversation] = []
    size = 0

    def reply(value: dict[str, Any]) -> None:
        print(json.dumps(value), flush=True)

    async with httpx.AsyncClient() as http:
        probe = factory(base_url, http)
    if isinstance(probe, str):
        reply({"skipped": probe})
        return
    reply({"ready": True})
    try:
        while True:
            line = await anyio.to_thread.run_sync(sys.stdin.readline)
            if not line.strip():
                return
            command = json.loads(line)
            n = int(command["n"])
            if n != size:
                for http in clients:
                    await http.aclose()
                clients = http_clients(n)
                made = [factory(base_url, http) for http in clients]
                conversations = [c for c in made if not isinstance(c, str)]
                size = n
                _, _, failures = await _batch(conversations, n)  # opens the connections
                reply({"failures": failures})
                continue
            if command.get("memory"):
                tracemalloc.start()
                try:
                    _, _, failures = await _batch(conversations, n)
                    peak = tracemalloc.get_traced_memory()[1]
                finally:
                    tracemalloc.stop()
                reply({"peak": peak, "failures": failures})
                continue
            walls, latencies, failures = [], [], 0
            cpu = time.process_time()
            for _ in range(int(command.get("repeat", 1))):
                wall, lat, failed = await _batch(conversations, n)
                walls.append(wall)
                latencies += lat
                failures += failed
            cpu = time.process_time() - cpu
            reply({"cpu": cpu, "walls": walls, "latencies": latencies, "failures": failures})
    finally:
        for http in clients:
            await http.aclose()


class _Worker:
    """One client's worker process; `tree` (a source tree) is the advisorchain it imports."""

    def __init__(self, name: str, client: str, base_url: str, tree: str = ROOT) -> None:
        self.name = name
        self._dir = tempfile.TemporaryDirectory(prefix="concurrency-")
        os.symlink(os.path.realpath(tree), os.path.join(self._dir.name, "advisorchain"))
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([self._dir.name, ROOT]))
        self.process = subprocess.Popen(
            [sys.executable, "-m", "benchmarks.concurrency", "--worker", client, base_url],
            cwd=ROOT,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.skipped: str | None = self.read().get("skipped")

    def read(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"the {self.name} worker ended")
        result: dict[str, Any] = json.loads(line)
        return result

    def ask(self, **command: Any) -> dict[str, Any]:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(command) + "\n")
        self.process.stdin.flush()
        return self.read()

    def close(self) -> None:
        if self.process.stdin is not None and self.process.poll() is None:
            self.process.stdin.write("\n")
            self.process.stdin.close()
        self.process.wait(timeout=60)
        if self.process.stdout is not None:
            self.process.stdout.close()
        self._dir.cleanup()


def _row(n: int, samples: list[dict[str, Any]], repeat: int, peak: int) -> dict[str, Any]:
    walls = [w for s in samples for w in s["walls"]]
    latencies = [x for s in samples for x in s["latencies"]]
    wall = statistics.median(walls)
    return {
        "n": n,
        "wall_s": wall,
        "throughput_per_s": n / wall,
        "p50_ms": statistics.median(latencies) * 1000 if latencies else None,
        "p90_ms": percentile(latencies, 90) * 1000,
        "p99_ms": percentile(latencies, 99) * 1000,
        "cpu_ms_per_conversation": statistics.median(s["cpu"] for s in samples)
        / (n * repeat)
        * 1000,
        "cpu_ms_per_round": [s["cpu"] / (n * repeat) * 1000 for s in samples],
        "peak_mib": peak / 2**20,
        "kib_per_conversation": peak / n / 1024,
        "failures": sum(s["failures"] for s in samples),
        "conversations_measured": len(samples) * repeat * n,
    }


def run(
    *,
    ns: tuple[int, ...] = (1, 100, 1000, 5000),
    latency_ms: float = 0.0,
    rounds: int = 3,
    min_conversations: int = 200,
    base: str | None = None,
) -> dict[str, Any]:
    """Start the server and one worker per client, measure every N interleaved, stop."""
    results: dict[str, list[dict[str, Any]]] = {}
    skipped: dict[str, str] = {}
    with server(latency_ms) as base_url:
        specs = [("handwritten", "handwritten", ROOT), ("advisorchain", "advisorchain", ROOT)]
        if base is not None:
            specs.append(("advisorchain (base)", "advisorchain", base))
        workers: list[_Worker] = []
        try:
            for name, client, tree in specs:
                worker = _Worker(name, client, base_url, tree)
                if worker.skipped is not None:
                    skipped[name] = worker.skipped
                    worker.close()
                else:
                    workers.append(worker)
            load_start = os.getloadavg()
            started = time.perf_counter()
            for n in ns:
                repeat = max(1, math.ceil(min_conversations / n))
                samples: dict[str, list[dict[str, Any]]] = {w.name: [] for w in workers}
                warm_failures = {w.name: w.ask(n=n)["failures"] for w in workers}
                for r in range(rounds * (SHORT_ROUNDS if n * repeat < SHORT_ROUND else 1)):
                    for k in range(len(workers)):
                        worker = workers[(r + k) % len(workers)]
                        samples[worker.name].append(worker.ask(n=n, repeat=repeat))
                for worker in workers:
                    memory = worker.ask(n=n, memory=True)
                    row = _row(n, samples[worker.name], repeat, memory["peak"])
                    row["failures"] += memory["failures"] + warm_failures[worker.name]
                    results.setdefault(worker.name, []).append(row)
                    print(f"{worker.name}: {json.dumps(row)}", file=sys.stderr, flush=True)
            elapsed = time.perf_counter() - started
            load_end = os.getloadavg()
        finally:
            for worker in workers:
                worker.close()
    return {
        "results": results,
        "skipped": skipped,
        "server_latency_ms": latency_ms,
        "shard": SHARD,
        "rounds": rounds,
        "load": [load_start, load_end],
        "elapsed_s": elapsed,
        "base": base,
    }


def render(report: dict[str, Any]) -> str:
    """The report as a Markdown table (with each client's CPU next to the hand-written's)."""
    floor = {r["n"]: r["cpu_ms_per_conversation"] for r in report["results"].get("handwritten", [])}
    rows = []
    for name, rs in report["results"].items():
        for r in rs:
            ratio = r["cpu_ms_per_conversation"] / floor[r["n"]] if r["n"] in floor else math.nan
            rows.append(
                [
                    name,
                    r["n"],
                    r["wall_s"] * 1000,
                    r["throughput_per_s"],
                    r["p50_ms"],
                    r["p99_ms"],
                    r["cpu_ms_per_conversation"],
                    f"{ratio:.2f}",
                    r["peak_mib"],
                    r["kib_per_conversation"],
                    r["failures"],
                ]
            )
    text = table(
        [
            "client",
            "N",
            "wall ms",
            "conv/s",
            "p50 ms",
            "p99 ms",
            "client CPU ms/conv",
            "vs hand-written",
            "peak MiB",
            "KiB/conv",
            "failures",
        ],
        rows,
    )
    load = report.get("load")
    if load:
        text += (
            f"\n\n{report['rounds']} interleaved rounds per N ({SHORT_ROUNDS}x as many of fewer "
            f"than {SHORT_ROUND} conversations), {report['shard']} connections "
            f"per httpx client; {report['elapsed_s']:.0f} s; load average "
            f"{load[0][0]:.2f} at the start, {load[1][0]:.2f} at the end"
        )
    if report.get("base"):
        text += f"\n\nadvisorchain (base): {report['base']}"
    for name, why in report["skipped"].items():
        text += f"\n\n_{name} skipped: {why}_"
    return text


def main(argv: list[str] | None = None) -> None:
    """Command-line entry point (also the workers')."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worker", nargs=2, metavar=("CLIENT", "URL"), help=argparse.SUPPRESS)
    parser.add_argument("--ns", default="1,100,1000,5000", help="comma-separated N")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--min-conversations", type=int, default=200, help="per round and N")
    parser.add_argument("--base", help="another source tree of advisorchain to compare")
    parser.add_argument("--json", help="also write the report here")
    args = parser.parse_args(argv)
    if args.worker:
        anyio.run(_worker, *args.worker, backend="asyncio")
        return
    ns = tuple(int(n) for n in args.ns.split(","))
    report = run(
        ns=ns, rounds=args.rounds, min_conversations=args.min_conversations, base=args.base
    )
    print(render(report))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)


if __name__ == "__main__":
    main()
