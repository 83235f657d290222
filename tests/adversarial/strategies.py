"""Hypothesis strategies for what models, providers and gateways send."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

json_scalars = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20)
json_values: st.SearchStrategy[Any] = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
"""Any JSON value (floats include inf and nan, which `json.dumps` writes as Infinity/NaN)."""

ids = st.text(min_size=1, max_size=30) | st.sampled_from(
    ['call"1', "call'1", "a\x00b", "\u202eevil", "x" * 5000, "../../etc", "<script>", "\ud800"]
)
"""Tool-call ids as a hostile model or form sends them."""

names = st.sampled_from(["get_weather", "send_mail", "f"]) | st.text(min_size=1, max_size=12)
arguments = st.text(max_size=60) | json_values.map(lambda v: __import__("json").dumps(v))


def fragments(text: str, cuts: list[int]) -> list[str]:
    """`text` cut at `cuts` (positions, any order, duplicates allowed)."""
    points = sorted({c % (len(text) + 1) for c in cuts})
    bounds = [0, *points, len(text)]
    return [text[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]


def byte_fragments(data: bytes, cuts: list[int]) -> list[bytes]:
    """`data` cut at `cuts`."""
    points = sorted({c % (len(data) + 1) for c in cuts})
    bounds = [0, *points, len(data)]
    return [data[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]
