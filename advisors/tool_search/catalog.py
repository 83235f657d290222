"""`CatalogIndexes`: built indexes cached by catalog fingerprint, each built only once."""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Sequence

import anyio
import anyio.to_thread

from ...core.tools import ToolDefinition
from .index import ToolIndex

_INLINE_FINGERPRINTS = 200


def catalog_fingerprint(definitions: Sequence[ToolDefinition]) -> str:
    """A digest of the definitions' own fingerprints, in order."""
    digest = hashlib.sha256()
    for definition in definitions:
        digest.update(definition.fingerprint().encode())
        digest.update(b"\0")
    return digest.hexdigest()


class CatalogIndexes:
    """A small LRU of built indexes keyed by the fingerprint of their catalog.

    `get(definitions)` returns the index built over exactly these definitions, building
    it on first use. Concurrent callers asking for one catalog wait for a single build
    (one lock per fingerprint); a catalog whose definitions changed gets a new
    fingerprint and a new build. Fingerprints are remembered by the identity of the
    definition objects, so an unchanged catalog is not serialized again on every call.
    """

    def __init__(self, template: ToolIndex, *, size: int = 8) -> None:
        if size < 1:
            raise ValueError("the index cache size must be at least 1")
        self.template = template
        self.size = size
        self._built: OrderedDict[str, ToolIndex] = OrderedDict()
        self._locks: dict[str, anyio.Lock] = {}
        self._fingerprints: OrderedDict[tuple[int, ...], tuple[tuple[ToolDefinition, ...], str]]
        self._fingerprints = OrderedDict()
        self.builds = 0

    async def fingerprint(self, definitions: Sequence[ToolDefinition]) -> str:
        """A digest of the definitions' own fingerprints, in order.

        Computed in a worker thread for large catalogs (10,000 definitions take a few
        hundred milliseconds), then remembered by the definitions' identity.
        """
        key = tuple(id(d) for d in definitions)
        known = self._fingerprints.get(key)
        if known is not None:
            self._fingerprints.move_to_end(key)
            return known[1]
        frozen = tuple(definitions)
        if len(frozen) > _INLINE_FINGERPRINTS:
            value = await anyio.to_thread.run_sync(catalog_fingerprint, frozen)
        else:
            value = catalog_fingerprint(frozen)
        # The tuple of definitions keeps the objects alive, so their ids stay unique.
        self._fingerprints[key] = (frozen, value)
        if len(self._fingerprints) > self.size * 4:
            self._fingerprints.popitem(last=False)
        return value

    async def get(self, definitions: Sequence[ToolDefinition]) -> ToolIndex:
        """The index over `definitions`, built now if no cached one fits."""
        key = await self.fingerprint(definitions)
        index = self._cached(key)
        if index is not None:
            return index
        lock = self._locks.setdefault(key, anyio.Lock())
        try:
            async with lock:
                index = self._cached(key)
                if index is None:
                    index = await self.template.build(tuple(definitions))
                    self.builds += 1
                    self._built[key] = index
                    if len(self._built) > self.size:
                        self._built.popitem(last=False)
                return index
        finally:
            if not lock.locked() and self._locks.get(key) is lock:
                del self._locks[key]

    def _cached(self, key: str) -> ToolIndex | None:
        index = self._built.get(key)
        if index is not None:
            self._built.move_to_end(key)
        return index


__all__ = ["CatalogIndexes", "catalog_fingerprint"]
