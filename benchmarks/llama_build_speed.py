"""Prompt and generation speed of llama.cpp builds, side by side in one run.

Usage: `python -m benchmarks.llama_build_speed NAME=PYTHON[@DIR] ... [--rounds 3]`, each
PYTHON an interpreter whose environment has a llama-cpp-python build (the portable one in
`.venv`, a runtime-dispatched one elsewhere); `@DIR` runs it in DIR (a dispatched build
looks for its `libggml-cpu-*.so` variants in the working directory, and llama-cpp-python's
wheel puts them in `site-packages/bin/`, where nothing else looks). Each round runs every
build once, in turn, in its own process: load the demo model, evaluate a 512-token prompt,
generate 64 tokens greedily; medians are printed as a Markdown table. The same threads
for every build.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

_CHILD = r"""
import json, sys, time
from llama_cpp import Llama
path, threads = sys.argv[1], int(sys.argv[2])
llm = Llama(model_path=path, n_ctx=1024, n_threads=threads, verbose=False)
text = "List the open orders of the customer with their carriers and delivery dates. " * 60
tokens = llm.tokenize(text.encode())[:512]
start = time.perf_counter()
llm.eval(tokens)
prompt_s = time.perf_counter() - start
start = time.perf_counter()
for _ in range(64):
    token = llm.sample(temp=0.0)
    llm.eval([token])
gen_s = time.perf_counter() - start
print(json.dumps({"prompt_tps": len(tokens) / prompt_s, "gen_tps": 64 / gen_s}))
"""


def measure(python: str, model: str, threads: int) -> dict[str, float]:
    python, _, cwd = python.partition("@")
    out = subprocess.run(
        [python, "-c", _CHILD, model, str(threads)],
        capture_output=True,
        text=True,
        check=True,
        cwd=cwd or None,
    ).stdout
    result: dict[str, float] = json.loads(out.strip().splitlines()[-1])
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("builds", nargs="+", metavar="NAME=PYTHON")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--model", default=None, help="GGUF path (default: the demo model)")
    args = parser.parse_args(argv)
    if args.model is None:
        from advisorchain.providers.local.weights import ensure_local_model

        args.model = str(ensure_local_model())
    builds = [b.split("=", 1) for b in args.builds]
    samples: dict[str, list[dict[str, float]]] = {name: [] for name, _ in builds}
    for _ in range(args.rounds):
        for name, python in builds:
            samples[name].append(measure(python, args.model, args.threads))
    print(f"| build | prompt tokens/s | generation tokens/s | ({args.rounds} rounds, medians) |")
    print("|---|---|---|---|")
    for name, runs in samples.items():
        prompt = statistics.median(r["prompt_tps"] for r in runs)
        gen = statistics.median(r["gen_tps"] for r in runs)
        print(f"| {name} | {prompt:.0f} | {gen:.1f} | |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
