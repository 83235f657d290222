"""The providers' fast paths give what their general paths give.

Each hot-path shortcut in `providers/` (exact-type dispatch, inlined parsing) has a
general path it must agree with; these tests run both on the same inputs, including
the odd ones the shortcut hands over to the general path.
"""

from __future__ import annotations

import enum
import random
from collections import OrderedDict
from collections.abc import Iterator, Mapping, Sequence
from types import MappingProxyType
from typing import Any

from advisorchain.providers.http import plain


def _reference_plain(value: Any) -> Any:
    """`plain` as 0.1 wrote it: by the ABCs alone."""
    if isinstance(value, Mapping):
        return {str(k): _reference_plain(v) for k, v in value.items()}
    if isinstance(value, Sequence) and not isinstance(value, (str, bytes)):
        return [_reference_plain(v) for v in value]
    return value


class _Color(enum.StrEnum):
    RED = "red"


class _Frozen(Mapping[str, Any]):
    def __init__(self, data: dict[str, Any]) -> None:
        self._data = data

    def __getitem__(self, key: str) -> Any:
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)


def _random_value(rng: random.Random, depth: int = 0) -> Any:
    scalars: list[Any] = [
        "text",
        "",
        "ünï",
        _Color.RED,
        0,
        -3,
        True,
        False,
        None,
        1.5,
        b"raw",
        bytearray(b"ba"),
    ]
    if depth > 3 or rng.random() < 0.3:
        return rng.choice(scalars)
    items = [_random_value(rng, depth + 1) for _ in range(rng.randrange(4))]
    keys: list[Any] = ["a", "type", 1, True, None, _Color.RED, 2.5]
    pairs = {rng.choice(keys): v for v in items}
    return rng.choice(
        [
            lambda: items,
            lambda: tuple(items),
            lambda: pairs,
            lambda: OrderedDict(pairs),
            lambda: MappingProxyType(pairs),
            lambda: _Frozen({str(k): v for k, v in pairs.items()}),
            lambda: range(len(items)),
        ]
    )()


def _same(a: Any, b: Any) -> bool:
    """Equal, and of the same types all the way down (a dict is not an OrderedDict)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def test_plain_agrees_with_the_abc_walk_on_random_values() -> None:
    rng = random.Random(16)
    for _ in range(3000):
        value = _random_value(rng)
        assert _same(plain(value), _reference_plain(value)), value


def test_plain_copies_every_container_of_a_schema() -> None:
    schema: dict[str, Any] = {"type": "object", "properties": {"a": {"enum": ("x", "y")}}}
    out = plain(schema)
    assert out == {"type": "object", "properties": {"a": {"enum": ["x", "y"]}}}
    assert out is not schema and out["properties"] is not schema["properties"]
    out["properties"]["a"]["enum"].append("z")
    assert schema["properties"]["a"]["enum"] == ("x", "y")
