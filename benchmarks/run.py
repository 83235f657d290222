"""Run every benchmark, print Markdown tables, write JSON to benchmarks/results/.

    python -m benchmarks.run                 # everything (about 5 minutes on 2 vCPU)
    python -m benchmarks.run --quick         # fewer samples (about 1 minute)
    python -m benchmarks.run --only overhead,streaming

Sections: overhead (bare tool loop, all frameworks), links (logging, tracing, tool search,
auto-approval), link_costs (what each advisorchain link adds), sync_tools, parallel,
streaming, concurrency, providers (each HTTP provider against raw httpx), profile. Needs
the `bench` extra (`pip install -e '.[bench]'`); `bash benchmarks/bench.sh` sets everything up.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import functools
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

if __package__ in (None, ""):  # `python benchmarks/run.py`: make `benchmarks` importable
    sys.path[0] = str(Path(__file__).resolve().parent.parent)  # not benchmarks/ itself

if TYPE_CHECKING:  # mypy reads benchmarks/ as `advisorchain.benchmarks` (see .ci/typecheck)
    from advisorchain.benchmarks import (
        concurrency,
        links,
        overhead,
        parallel,
        profiling,
        provider_overhead,
        streaming,
        sync_tools,
    )
else:
    from benchmarks import (  # noqa: E402
        concurrency,
        links,
        overhead,
        parallel,
        profiling,
        provider_overhead,
        streaming,
        sync_tools,
    )

SECTIONS = (
    "overhead",
    "links",
    "link_costs",
    "sync_tools",
    "parallel",
    "streaming",
    "concurrency",
    "providers",
    "profile",
)
RESULTS = Path(__file__).resolve().parent / "results"


def machine() -> dict[str, Any]:
    """What the numbers were measured on."""
    model = platform.processor() or "unknown"
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
        for line in out.splitlines():
            if line.startswith("Model name:"):
                model = line.split(":", 1)[1].strip()
                break
    except (OSError, subprocess.CalledProcessError):
        pass
    return {
        "cpu": model,
        "vcpus": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "load_average": os.getloadavg(),
    }


def _run_section(name: str, quick: bool) -> tuple[dict[str, Any], str]:
    turns = 300 if quick else 2000
    if name == "overhead":
        warmup = 100 if quick else 300
        report = asyncio.run(overhead.run(variant="bare", turns=turns, warmup=warmup))
        on_trio = anyio.run(
            functools.partial(
                overhead.run, frameworks=("advisorchain",), turns=turns, warmup=warmup
            ),
            backend="trio",
        )
        report["advisorchain_on_trio"] = on_trio["results"]["advisorchain"]
        trio = report["advisorchain_on_trio"]
        text = overhead.render(report) + (
            f"\n\nadvisorchain on trio (the peers need asyncio): turn median "
            f"{trio['turn']['median_ms']:.3f} ms, p99 {trio['turn']['p99_ms']:.3f} ms, "
            f"CPU median {trio['cpu']['median_ms']:.3f} ms"
        )
        return report, text
    if name == "links":
        report = asyncio.run(overhead.run(variant="links", turns=turns // 2, warmup=100))
        return report, overhead.render(report)
    if name == "link_costs":
        report = asyncio.run(links.run(turns=turns // 2, warmup=100))
        return report, links.render(report)
    if name == "sync_tools":
        report = asyncio.run(sync_tools.run(calls=500 if quick else 3000, turns=turns // 2))
        return report, sync_tools.render(report)
    if name == "parallel":
        report = parallel.run(repeat=5 if quick else 20, backends=("asyncio", "trio"))
        return report, parallel.render(report)
    if name == "streaming":
        report = asyncio.run(streaming.run(repeat=50 if quick else 300))
        return report, streaming.render(report)
    if name == "concurrency":
        report = concurrency.run(ns=(1, 100) if quick else (1, 100, 1000, 5000))
        return report, concurrency.render(report)
    if name == "providers":
        report = asyncio.run(provider_overhead.run(calls=300 if quick else 2000))
        return report, provider_overhead.render(report)
    if name == "profile":
        report = asyncio.run(profiling.run(turns=500 if quick else 3000))
        return report, profiling.render(report)
    raise ValueError(f"unknown section {name!r}")


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description="advisorchain benchmarks")
    parser.add_argument("--quick", action="store_true", help="fewer samples, N up to 100")
    parser.add_argument("--only", default=",".join(SECTIONS), help="comma-separated sections")
    parser.add_argument("--output", type=Path, default=RESULTS, help="where JSON goes")
    args = parser.parse_args(argv)
    sections = [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = [s for s in sections if s not in SECTIONS]
    if unknown:
        parser.error(f"unknown sections {unknown}; choose from {', '.join(SECTIONS)}")
    started = datetime.datetime.now(datetime.UTC)
    report: dict[str, Any] = {"started": started.isoformat(), "machine": machine()}
    print(f"# advisorchain benchmarks, {started:%Y-%m-%d %H:%M} UTC")
    print(
        f"{report['machine']['cpu']}, {report['machine']['vcpus']} vCPU, "
        f"Python {report['machine']['python']}, load {report['machine']['load_average']}"
    )
    for name in sections:
        began = time.perf_counter()
        print(f"\n## {name}\n", flush=True)
        section, text = _run_section(name, args.quick)
        section["seconds"] = time.perf_counter() - began
        report[name] = section
        print(text, flush=True)
    report["machine"]["load_average_end"] = os.getloadavg()
    args.output.mkdir(parents=True, exist_ok=True)
    path = args.output / f"bench-{started:%Y%m%dT%H%M%S}.json"
    data = json.dumps(report, indent=2, default=str)
    path.write_text(data)
    (args.output / "latest.json").write_text(data)
    print(f"\nJSON: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
