"""The link costs of two source trees in one run: `benchmarks.links`' chains, A/B.

    python -m benchmarks.links_ab /path/to/old-tree /path/to/new-tree [--rounds 30]

Each tree (a checkout of advisorchain, e.g. `git worktree add /tmp/base <commit>`) gets
its own worker process that imports `advisorchain` from that tree (a symlink in a
temporary directory put first on `sys.path`) and builds the chains of that tree's
`benchmarks/links.py` configurations with that tree's `benchmarks/peers` (so each tree
measures its own chains). Then the driver alternates: each round, every worker in turn
(the order rotating) runs one block of turns of every chain while the other waits idle;
CPU time of the worker's event-loop thread per turn. The report is the median over all
turns, per tree and chain, and the ratio new/old: load from other processes hits both
trees alike.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from typing import Any

from .stats import percentile, table

CONFIGS = [
    "bare loop",
    "+ LoggingAdvisor",
    "+ TracingAdvisor",
    "+ ApprovalAdvisor",
    "+ ToolSearchAdvisor",
    "all four",
]

# Runs inside the worker, with the tree as the working directory: only names that both
# old and new trees have (the peers module, the scenario, Chain, ToolCallingAdvisor).
_WORKER = r"""
import asyncio, gc, json, sys, time
from advisorchain import Chain, ToolCallingAdvisor
from advisorchain.core.messages import UserMessage
from advisorchain.providers import ScriptedChatModel
from benchmarks import scenario
from benchmarks.peers import advisorchain_agent as agent

def chains():
    outside, inside = agent.links()
    configs = {
        "bare loop": ([], [], False),
        "+ LoggingAdvisor": ([outside[0]], [], False),
        "+ TracingAdvisor": ([outside[1]], [], False),
        "+ ApprovalAdvisor": ([outside[2]], [], True),
        "+ ToolSearchAdvisor": ([], inside, False),
        "all four": (outside, inside, True),
    }
    prompt = (UserMessage(content=scenario.PROMPT),)
    turns = {}
    for name, (before, after, approval) in configs.items():
        model = ScriptedChatModel(agent.reply)
        chain = Chain([*before, ToolCallingAdvisor(), *after], model=model,
                      tools=agent.make_tools("async", requires_approval=approval))
        async def turn(chain=chain, model=model):
            response = await chain.call(prompt)
            model.requests.clear()
            return response.text
        turns[name] = turn
    return turns

async def main():
    turns = chains()
    for name, turn in turns.items():
        if await turn() != scenario.ANSWER:
            raise AssertionError(name)
        for _ in range(int(sys.argv[1])):
            await turn()
    gc.collect()
    gc.freeze()
    print(json.dumps({"ready": True}), flush=True)
    loop = asyncio.get_running_loop()
    while True:
        line = await loop.run_in_executor(None, sys.stdin.readline)
        if not line.strip():
            return
        block = int(line)
        out = {}
        for name, turn in turns.items():
            values = out[name] = []
            for _ in range(block):
                start = time.thread_time()
                await turn()
                values.append(time.thread_time() - start)
        print(json.dumps(out), flush=True)

asyncio.run(main())
"""


class _Worker:
    def __init__(self, tree: str, warmup: int) -> None:
        self.tree = os.path.realpath(tree)
        self._dir = tempfile.TemporaryDirectory(prefix="links-ab-")
        os.symlink(self.tree, os.path.join(self._dir.name, "advisorchain"))
        env = dict(os.environ, PYTHONPATH=self._dir.name)
        self.process = subprocess.Popen(
            [sys.executable, "-c", _WORKER, str(warmup)],
            cwd=self.tree,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.samples: dict[str, list[float]] = {name: [] for name in CONFIGS}

    def read(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"worker for {self.tree} ended")
        result: dict[str, Any] = json.loads(line)
        return result

    def block(self, turns: int) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(f"{turns}\n")
        self.process.stdin.flush()
        for name, values in self.read().items():
            self.samples[name].extend(values)

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.write("\n")
            self.process.stdin.close()
        self.process.wait(timeout=60)
        if self.process.stdout is not None:
            self.process.stdout.close()
        self._dir.cleanup()


def run(
    trees: list[str], *, rounds: int = 30, block: int = 40, warmup: int = 200
) -> dict[str, Any]:
    """Median CPU us per turn of each configuration in each tree, interleaved."""
    workers = [_Worker(tree, warmup) for tree in trees]
    try:
        for worker in workers:
            worker.read()  # ready
        load_start = os.getloadavg()
        for r in range(rounds):
            for k in range(len(workers)):
                workers[(r + k) % len(workers)].block(block)
        load_end = os.getloadavg()
    finally:
        for worker in workers:
            worker.close()
    results = {
        w.tree: {name: statistics.median(v) * 1e6 for name, v in w.samples.items()} for w in workers
    }
    # The 10th percentile: the turns least disturbed by other processes (a shared machine).
    low = {
        w.tree: {name: percentile(v, 10) * 1e6 for name, v in w.samples.items()} for w in workers
    }
    return {
        "trees": [w.tree for w in workers],
        "results": results,
        "p10": low,
        "turns_per_chain": rounds * block,
        "load": [load_start, load_end],
    }


def render(report: dict[str, Any], statistic: str = "results") -> str:
    """One row per chain: us per turn per tree, added to the bare loop, new/old (medians,
    or with `statistic="p10"` the 10th percentiles)."""
    trees = report["trees"]
    res = report[statistic]
    headers = ["chain"]
    for i, _ in enumerate(trees):
        headers += [f"tree {i} us", f"tree {i} added"]
    if len(trees) == 2:
        headers.append("tree 1 / tree 0")
    rows = []
    for name in CONFIGS:
        row: list[object] = [name]
        for tree in trees:
            value = res[tree][name]
            row += [value, f"{value - res[tree]['bare loop']:+.1f}"]
        if len(trees) == 2:
            row.append(f"{res[trees[1]][name] / res[trees[0]][name]:.2f}")
        rows.append(row)
    ratios = "; ".join(
        f"tree {i}: all four / bare = {res[t]['all four'] / res[t]['bare loop']:.2f}"
        for i, t in enumerate(trees)
    )
    load = report["load"]
    lines = [f"tree {i}: {t}" for i, t in enumerate(trees)]
    lines += [
        f"{'median' if statistic == 'results' else '10th percentile'} CPU us per turn; "
        f"{report['turns_per_chain']} turns per chain and tree; load average "
        f"{', '.join(f'{x:.2f}' for x in load[0])} at start, "
        f"{', '.join(f'{x:.2f}' for x in load[1])} at end",
        "",
        table(headers, rows),
        "",
        ratios,
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("trees", nargs="+", help="source trees of advisorchain")
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--block", type=int, default=40)
    parser.add_argument("--warmup", type=int, default=200)
    args = parser.parse_args()
    report = run(args.trees, rounds=args.rounds, block=args.block, warmup=args.warmup)
    print(render(report))
    print()
    print(render(report, "p10"))


if __name__ == "__main__":
    main()
