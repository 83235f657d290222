"""One module per framework under test, each exposing the same scenario.

Every module has `NAME`, `version()` and `async build(variant, tool_kind) -> Turn`, where
`Turn` runs one whole 3-round conversation turn and returns the final answer text.
`variant` is `"bare"` (tool loop only) or `"links"` (logging, tracing, tool search and
auto-approval, or the closest equivalent the framework has).
"""

from __future__ import annotations

PEERS = ("advisorchain", "handwritten", "langchain", "pydantic_ai", "openai_agents")
"""Framework names, in report order; each is a module `benchmarks.peers.<name>_agent`."""
