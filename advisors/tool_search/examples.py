"""Example requests per tool: what a user might type that a tool answers.

An index given examples also matches a request against them (doc2query): `KeywordIndex`
reads them as a fourth field, `EmbeddingIndex` mixes their vectors into the tool's. They
come from a plain mapping (written by hand, or kept from an earlier run) or from an
`ExampleWriter`, which asks a chat model for them and keeps them in an `ExampleCache`.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Protocol, TypeAlias, runtime_checkable

import anyio
import anyio.to_thread

from ...core.loop_lock import LoopLock
from ...core.messages import UserMessage
from ...core.model import ChatModel
from ...core.options import ChatOptions
from ...core.request import ChatRequest
from ...core.tools import ToolDefinition
from ._cache import default_cache_path
from ._store import KeyedBlobs
from .index import parameter_texts

MAX_EXAMPLES = 8
"""Examples kept per tool, whatever a source gives."""
MAX_EXAMPLE_CHARS = 160
"""Characters kept of each example."""
PROMPT_VERSION = "1"
"""Part of every cache key: a changed prompt or parser writes new examples."""

ToolExamples: TypeAlias = Mapping[str, Sequence[str]]
"""Tool name -> example requests."""

_MAX_ANSWER_CHARS = 4000
_NUMBERING = re.compile(r"^\s*(?:[-*\u2022]|\d+[.)]|Request\s*\d*:)\s*")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


@runtime_checkable
class ExampleSource(Protocol):
    """Gives example requests for the tools of a catalog (`ExampleWriter` is one)."""

    async def examples(self, definitions: Sequence[ToolDefinition]) -> ToolExamples:
        """Example requests by tool name; a tool may have none."""
        ...


Examples: TypeAlias = ToolExamples | ExampleSource
"""What an index accepts as `examples`: a mapping, or a source asked at each build."""


_NOT_EXAMPLES = "examples must be a mapping of tool names to requests or an ExampleSource"


def check_examples(examples: object, weight: float) -> None:
    """What an index checks of its `examples` and `examples_weight` when configured:
    `TypeError` unless examples is None, a mapping or an `ExampleSource`; `ValueError`
    unless the weight is a finite non-negative number."""
    if not (isinstance(weight, int | float) and math.isfinite(weight) and weight >= 0):
        raise ValueError("examples_weight is a non-negative number")
    if examples is not None and not isinstance(examples, Mapping | ExampleSource):
        raise TypeError(_NOT_EXAMPLES)


async def examples_for(
    examples: Examples, definitions: Sequence[ToolDefinition]
) -> dict[str, tuple[str, ...]]:
    """Each tool's examples from `examples`, cleaned: strings only, one line each, at
    most `MAX_EXAMPLES` of `MAX_EXAMPLE_CHARS`, no duplicates, only tools of
    `definitions`. A source that is neither a mapping nor an `ExampleSource` raises
    `TypeError`."""
    if isinstance(examples, Mapping):
        found: ToolExamples = examples
    elif isinstance(examples, ExampleSource):
        found = await examples.examples(definitions)
    else:
        raise TypeError(_NOT_EXAMPLES)
    return cleaned_examples(found, definitions)


def cleaned_examples(
    examples: ToolExamples, definitions: Sequence[ToolDefinition]
) -> dict[str, tuple[str, ...]]:
    """`examples_for` of a mapping, synchronously."""
    out: dict[str, tuple[str, ...]] = {}
    for definition in definitions:
        given = examples.get(definition.name, ())
        kept = _cleaned((given,) if isinstance(given, str) else given)
        if kept:
            out[definition.name] = kept
    return out


def _cleaned(texts: Sequence[object]) -> tuple[str, ...]:
    kept: list[str] = []
    for text in texts:
        if not isinstance(text, str):
            continue
        line = " ".join(_CONTROL.sub(" ", text).split())[:MAX_EXAMPLE_CHARS]
        if line and line not in kept:
            kept.append(line)
        if len(kept) == MAX_EXAMPLES:
            break
    return tuple(kept)


def example_prompt(definition: ToolDefinition, count: int) -> str:
    """What `ExampleWriter` asks the model for one tool: its name, the first 400
    characters of its description and up to 12 parameter names, never a user's words."""
    params = [name for name, _ in parameter_texts(definition.parameters)][:12]
    description = " ".join(definition.description.split())[:400]
    return (
        f"Tool name: {definition.name}\nDescription: {description}\n"
        f"Parameters: {', '.join(params) or 'none'}\n\n"
        f"Write {count} different short requests a user might type to an assistant that "
        "this tool would answer. One request per line, no numbering, no explanations."
    )


def parse_examples(answer: str, count: int) -> tuple[str, ...]:
    """The requests of a model's answer: one per line, numbering and quotes removed,
    lines under 8 characters or ending in `:` dropped, at most `count`."""
    lines: list[str] = []
    for line in answer[:_MAX_ANSWER_CHARS].splitlines():
        line = _NUMBERING.sub("", line).strip().strip("\"'` ")
        if len(line) >= 8 and not line.endswith(":"):
            lines.append(line)
    return _cleaned(lines)[:count]


class ExampleCache:
    """Examples kept in a SQLite file, keyed by the model and the prompt.

    The key of a tool's examples is the SHA-256 of `model`, `PROMPT_VERSION` and the
    prompt (built from the definition), so a changed definition gets new examples and an
    unchanged one never asks the model again. Safe to share between threads and
    processes; an unusable file is treated as empty (`_store.KeyedBlobs`).
    """

    def __init__(self, path: str | Path, *, model: str) -> None:
        self.path = Path(path)
        self.model = model
        self._blobs = KeyedBlobs(self.path, "examples")

    def __repr__(self) -> str:
        return f"ExampleCache({str(self.path)!r}, model={self.model!r})"

    def key(self, prompt: str) -> str:
        """The cache key of one prompt."""
        return hashlib.sha256(f"{self.model}\0{PROMPT_VERSION}\0{prompt}".encode()).hexdigest()

    def get_many(self, prompts: Sequence[str]) -> dict[str, tuple[str, ...]]:
        """The kept examples of those prompts that have some (an empty tuple is kept too:
        the model wrote nothing usable)."""
        keys = {self.key(p): p for p in prompts}
        found: dict[str, tuple[str, ...]] = {}
        for key, blob in (self._blobs.get_many(list(keys)) or {}).items():
            try:
                value = json.loads(blob)
            except (ValueError, RecursionError):
                continue
            if isinstance(value, list):
                found[keys[key]] = _cleaned(value)
        return found

    def put_many(self, examples: Mapping[str, Sequence[str]]) -> None:
        """Keep examples by their prompts."""
        self._blobs.put_many(
            (self.key(p), json.dumps(list(e)).encode()) for p, e in examples.items()
        )


def default_examples_path() -> Path:
    """Where `ExampleWriter` keeps examples by default: beside the embeddings cache
    (`$ADVISORCHAIN_CACHE_DIR`, else `$XDG_CACHE_HOME/advisorchain`, else
    `~/.cache/advisorchain`), in `examples.sqlite3`."""
    return default_cache_path().with_name("examples.sqlite3")


class ExampleWriter:
    """An `ExampleSource` that asks `model` for `per_tool` example requests per tool.

    `examples(definitions)` reads each tool's examples from `cache` (`True`: an
    `ExampleCache` at `default_examples_path()` named by the model's `model_name`;
    `None`: only this object's memory) and asks the model, `concurrency` tools at a
    time (`example_prompt`, temperature 0, at most `max_tokens` tokens), for the tools
    it lacks, keeping each answer as soon as it is parsed. A failing model call raises
    its error once the calls under way have ended (no new one starts); the examples
    written before are kept, so the next call resumes there.
    Concurrent calls (a `HybridIndex` building two indexes that both read examples)
    take turns, and the second finds the first's examples. The answer is the model's
    text, untrusted: it is cut to `_MAX_ANSWER_CHARS` and parsed into at most
    `per_tool` lines of `MAX_EXAMPLE_CHARS`; nothing of it reaches a model's prompt.

    Writing takes a model call per tool: with the local Qwen2.5-Coder-0.5B, about 3-4 s
    per tool on one core (`benchmarks/tool_search/doc2query.py`; a local model answers
    one call at a time, so `concurrency` is for remote ones); call `examples` once ahead
    (`await writer.examples(tools)`) so that no conversation waits for it.
    """

    def __init__(
        self,
        model: ChatModel,
        *,
        per_tool: int = 2,
        cache: ExampleCache | None | bool = True,
        max_tokens: int = 60,
        concurrency: int = 1,
    ) -> None:
        if per_tool < 1 or per_tool > MAX_EXAMPLES:
            raise ValueError(f"per_tool must be between 1 and {MAX_EXAMPLES}")
        if max_tokens < 1:
            raise ValueError("max_tokens must be at least 1")
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        self.concurrency = concurrency
        self.model = model
        self.per_tool = per_tool
        self.max_tokens = max_tokens
        if cache is True:
            name = str(getattr(model, "model_name", None) or type(model).__name__)
            cache = ExampleCache(default_examples_path(), model=name)
        self.cache: ExampleCache | None = cache or None
        self.asked = 0  # model calls made, for tests and reports
        self._memory: dict[str, tuple[str, ...]] = {}
        self._exclusive = LoopLock()  # concurrent calls take turns

    def __repr__(self) -> str:
        return f"ExampleWriter({self.model!r}, per_tool={self.per_tool})"

    async def examples(self, definitions: Sequence[ToolDefinition]) -> ToolExamples:
        """Example requests by tool name (see the class)."""
        prompts = {d.name: example_prompt(d, self.per_tool) for d in definitions}
        async with self._exclusive():
            missing = [p for p in dict.fromkeys(prompts.values()) if p not in self._memory]
            if missing and self.cache is not None:
                self._memory.update(await anyio.to_thread.run_sync(self.cache.get_many, missing))
            await self._write_all([p for p in missing if p not in self._memory])
        return {name: self._memory[prompt] for name, prompt in prompts.items()}

    async def _write_all(self, prompts: Sequence[str]) -> None:
        # `concurrency` workers take the prompts in order (one worker: strictly in order).
        failures: list[Exception] = []
        pending = iter(prompts)

        async def worker() -> None:
            for prompt in pending:
                if failures:
                    return  # a call failed: start no new one
                try:
                    written = await self._write(prompt)
                except Exception as exc:
                    failures.append(exc)
                    return
                self._memory[prompt] = written
                if self.cache is not None:
                    await anyio.to_thread.run_sync(self.cache.put_many, {prompt: written})

        async with anyio.create_task_group() as group:
            for _ in range(min(self.concurrency, len(prompts))):
                group.start_soon(worker)
        if failures:
            raise failures[0]

    async def _write(self, prompt: str) -> tuple[str, ...]:
        request = ChatRequest(
            messages=(UserMessage(content=prompt),),
            options=ChatOptions(temperature=0.0, max_tokens=self.max_tokens),
        )
        self.asked += 1
        response = await self.model.call(request)
        return parse_examples(response.text, self.per_tool)


__all__ = [
    "MAX_EXAMPLES",
    "MAX_EXAMPLE_CHARS",
    "PROMPT_VERSION",
    "ExampleCache",
    "ExampleSource",
    "ExampleWriter",
    "Examples",
    "ToolExamples",
    "check_examples",
    "cleaned_examples",
    "default_examples_path",
    "example_prompt",
    "examples_for",
    "parse_examples",
]
