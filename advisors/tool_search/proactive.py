"""`ProactiveSearch`: tools attached from the user's request before the model asks.

Small models often never call the search tool; `ToolSearchAdvisor(proactive=...)`
searches the catalog with each user message itself and shows the best few tools
from the first model call on. This module holds the option and the rules it applies
(which tools may be attached, in which order); the advisor does the searching.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, TypeAlias

from ...core.tools import Tool
from ._fts5_terms import shared_terms
from .hybrid import fuse
from .index import MAX_QUERY_CHARS, split_identifier
from .intents import split_intents
from .keyword import STOP_WORDS

__all__ = [
    "NOUN_MARKERS",
    "Effect",
    "MutatingPolicy",
    "ProactiveSearch",
    "action_word",
    "asks_for",
    "choose",
    "fused_ranking",
    "request_stems",
    "tool_effect",
]

Effect: TypeAlias = Literal["read_only", "mutating", "undeclared"]
"""What a tool's declared effects say: `read_only` (`Tool(read_only=True)`), `mutating`
(`requires_approval=True`, or destructive: MCP's `destructiveHint`, kept as
`metadata["mcp_destructive"]`, or `metadata["destructive"]`), or neither."""

MutatingPolicy: TypeAlias = Literal["asked", "never", "always"]
"""When a mutating tool may be attached: when the request asks for its action, never, or
like any other tool."""


@dataclass(frozen=True)
class ProactiveSearch:
    """Attach the best few tools for each user message before the model call.

    Given to `ToolSearchAdvisor(proactive=ProactiveSearch(...))`. For every user message
    of the transcript (only the latest with `keep="turn"`) the advisor searches the
    catalog with the message's text (`depth` names; with `split=True` the whole text and
    each sub-request `split_intents` finds, fused by reciprocal rank with the whole text
    counted twice) and keeps the first `top_k` names that `choose` allows: pinned tools
    take no place, and a mutating tool (see `Effect`) only with `mutating="always"`, or
    with `"asked"` (the default) when the request contains the tool's action word, not
    right after an article, possessive or `on`/`of`/`in` ("on file" asks for no filing:
    `asks_for`, `NOUN_MARKERS`). The chosen tools are shown read-only ones first, each group in rank
    order, right where that user message stands in the transcript's order of found
    tools: a later search or a later message appends after them, so every model call's
    tool list extends the previous one's. Searches are remembered per catalog and text
    (`cache_size` of them), and the picks are derived from the transcript again on every
    call, so they survive memory, stored conversations and resumes without being stored.
    """

    top_k: int = 3
    split: bool = False
    mutating: MutatingPolicy = "asked"
    depth: int = 20
    cache_size: int = 1024

    def __post_init__(self) -> None:
        if self.top_k < 1:
            raise ValueError("ProactiveSearch.top_k must be at least 1")
        if self.depth < self.top_k:
            raise ValueError("ProactiveSearch.depth must be at least top_k")
        if self.mutating not in ("asked", "never", "always"):
            raise ValueError('ProactiveSearch.mutating must be "asked", "never" or "always"')
        if self.cache_size < 1:
            raise ValueError("ProactiveSearch.cache_size must be at least 1")

    def queries(self, text: str) -> list[str]:
        """The texts searched for one request: the request, then its sub-requests if
        `split` finds more than one."""
        whole = text.strip()[:MAX_QUERY_CHARS]
        if not whole:
            return []
        parts = split_intents(whole) if self.split else []
        return [whole, *parts] if len(parts) > 1 else [whole]


def fused_ranking(rankings: Sequence[Sequence[str]]) -> list[str]:
    """The ranking of one request from the rankings of `ProactiveSearch.queries`: the
    first alone, or all fused (`rrf_k=5`, the whole request weighted 2)."""
    if len(rankings) == 1:
        return list(rankings[0])
    return fuse(rankings, [2.0, *([1.0] * (len(rankings) - 1))], 5)


def tool_effect(tool: Tool) -> Effect:
    """The tool's declared effect (see `Effect`); destructive or approval-gated wins over
    `read_only`."""
    metadata = tool.metadata
    if tool.requires_approval or metadata.get("mcp_destructive") or metadata.get("destructive"):
        return "mutating"
    return "read_only" if tool.read_only else "undeclared"


NOUN_MARKERS = frozenset(
    "a an the my your our their his her its this that these those any no each every "
    "on of in".split()
)
"""Words after which a word is read as a noun, not an action asked for: "the phone number
you have *on file*", "the status of *my return*"."""


def request_stems(text: str, *, actions_only: bool = False) -> set[str]:
    """The stemmed words of `text`, as `KeywordIndex` stems them; with `actions_only`, not
    those right after a `NOUN_MARKERS` word (the ones a request can ask for as actions)."""
    words = [w for w in split_identifier(text[:MAX_QUERY_CHARS]) if w.isalnum()]
    if actions_only:
        before = ["", *words[:-1]]
        words = [w for b, w in zip(before, words, strict=True) if b not in NOUN_MARKERS]
    found: set[str] = set()
    for terms in shared_terms().cached(words).values():
        found.update(terms)
    return found


def action_word(tool: Tool) -> str | None:
    """The word a request must contain for a mutating tool: the first word of its name
    that is not a stop word (`delete` of `delete_file`, `send` of `sendEmail`); an MCP
    tool is read by its server name (`metadata["mcp_tool"]`), without the toolset's
    prefix. `None` for a name with no such word."""
    name = tool.metadata.get("mcp_tool")
    words = split_identifier(name if isinstance(name, str) and name else tool.name)
    return next((w for w in words if w not in STOP_WORDS and not w.isdigit()), None)


def asks_for(tool: Tool, stems: set[str]) -> bool:
    """Whether a request (its stemmed words, as `KeywordIndex` stems them) asks for the
    tool's action: it contains the stem of `action_word(tool)` (`deleting`, `deleted`
    and `deletes` all ask for `delete_file`)."""
    word = action_word(tool)
    if word is None:
        return False
    return any(stem in stems for stem in request_stems(word))


def choose(
    ranking: Sequence[str],
    tools: dict[str, Tool],
    request: str,
    option: ProactiveSearch,
    skip: set[str],
) -> list[str]:
    """The tools to attach for one request, from its ranking: the first `top_k` allowed
    names (not in `skip`, attached, and passing the mutating rule), read-only first."""
    picked: list[tuple[bool, str]] = []
    stems: set[str] | None = None
    for name in ranking:
        tool = tools.get(name)
        if tool is None or name in skip:
            continue
        effect = tool_effect(tool)
        if effect == "mutating" and option.mutating != "always":
            if option.mutating == "never":
                continue
            if stems is None:
                stems = request_stems(request, actions_only=True)
            if not asks_for(tool, stems):
                continue
        picked.append((effect != "read_only", name))
        if len(picked) == option.top_k:
            break
    return [name for _, name in sorted(picked, key=lambda p: p[0])]
