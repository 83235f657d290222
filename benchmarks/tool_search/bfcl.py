"""The BFCL v4 single-turn data as one pooled tool catalog with search queries.

The data ships inside the `bfcl-eval` wheel on PyPI (Apache-2.0). It is fetched with
`pip download --no-deps` (the package itself is never installed: it pins heavy
dependencies) into the git-ignored `benchmarks/data/`, and `bfcl_eval/data/` is
extracted from it.
"""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from advisorchain import ToolDefinition

VERSION = "2026.3.23"
DATA = Path(__file__).resolve().parent.parent / "data"
CATEGORIES = (
    "simple_python",
    "multiple",
    "parallel",
    "parallel_multiple",
    "live_simple",
    "live_multiple",
    "live_parallel",
    "live_parallel_multiple",
)
# BFCL writes Python type names; models are sent JSON Schema.
_TYPES = {
    "dict": "object",
    "float": "number",
    "tuple": "array",
    "int": "integer",
    "bool": "boolean",
}


@dataclass(frozen=True)
class Query:
    """One BFCL entry: the user's words and the names of the tools the answer calls."""

    id: str
    text: str
    expected: frozenset[str]


def fetch() -> Path:
    """`bfcl_eval/data/` from the wheel, downloaded and extracted on first use."""
    data = DATA / "bfcl_eval" / "data"
    if (data / "possible_answer").is_dir():
        return data
    wheels = DATA / "wheels"
    wheel = next(wheels.glob(f"bfcl_eval-{VERSION}-*.whl"), None)
    if wheel is None:
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps"]
            + [f"bfcl-eval=={VERSION}", "-d", str(wheels)],
            check=True,
        )
        wheel = next(wheels.glob(f"bfcl_eval-{VERSION}-*.whl"))
    with zipfile.ZipFile(wheel) as archive:
        for name in archive.namelist():
            if name.startswith("bfcl_eval/data/") and "/unused_datasets/" not in name:
                archive.extract(name, DATA)
    return data


def json_schema(schema: Any) -> Any:
    """A BFCL parameter schema with its Python type names mapped to JSON Schema."""
    if isinstance(schema, list):
        return [json_schema(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: json_schema(v) for k, v in schema.items()}
    kind = out.get("type")
    if kind == "any":
        del out["type"]
    elif isinstance(kind, str):
        out["type"] = _TYPES.get(kind, kind)
    return out


def load() -> tuple[list[ToolDefinition], list[Query]]:
    """The pooled catalog (one definition per tool name, first seen) and every query."""
    data = fetch()
    catalog: dict[str, ToolDefinition] = {}
    queries: list[Query] = []
    for category in CATEGORIES:
        answers = {}
        with open(data / "possible_answer" / f"BFCL_v4_{category}.json", encoding="utf-8") as f:
            for line in f:
                entry = json.loads(line)
                answers[entry["id"]] = frozenset(
                    name for call in entry["ground_truth"] for name in call
                )
        with open(data / f"BFCL_v4_{category}.json", encoding="utf-8") as f:
            for line in f:
                entry = json.loads(line)
                for function in entry["function"]:
                    catalog.setdefault(
                        function["name"],
                        ToolDefinition(
                            function["name"],
                            function.get("description", ""),
                            json_schema(function.get("parameters", {})),
                        ),
                    )
                text = "\n".join(m["content"] for m in entry["question"][0] if m["role"] == "user")
                queries.append(Query(entry["id"], text, answers[entry["id"]]))
    return list(catalog.values()), queries
