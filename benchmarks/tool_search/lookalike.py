"""A third catalog with hard negatives: real multi-tool requests beside look-alike tools.

No registry package ships ToolBench's or API-Bank's tool lists (the PyPI names found are
unrelated products), so the pool is built from the two sources the benchmark already has,
of different origins:

- the real tools: NESTFUL's 133 (RapidAPI, Schema-Guided Dialogue and Glaive specs) and
  BFCL multi-turn's `TravelAPI` (18 functions: `book_flight`, `get_flight_cost`, ...);
- the requests: NESTFUL's 299 needing 2-6 tools and the 36 BFCL multi-turn user turns
  whose 2-4 reference functions are all `TravelAPI`'s (335 in all);
- the look-alikes: the 112 BFCL single-turn tools whose names say hotel, flight, car
  rental, restaurant, booking, ticket, trip, travel, reservation, airport, event, exchange
  rate or currency (`hotel_booking`, `flight.book`, `RentalCars_3_GetCarsAvailable`,
  `convert_currency`, ...): the same tasks from other authors, never expected.

`pool("lookalikes")` is the real tools and the look-alikes (about 260 tools);
`pool("bfcl")` the real tools and every BFCL single-turn tool (about 1,440). A look-alike
whose name equals a real tool's is renamed with a `_2` suffix (the real one keeps its
name).
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from typing import Literal

import bfcl
import multistep

from advisorchain import ToolDefinition

__all__ = ["LOOKALIKE", "pool"]

LOOKALIKE = re.compile(
    r"hotel|flight|car_?rent|rental|restaurant|booking|book_|ticket|trip|travel|reserv"
    r"|airport|airline|vacation|tour|cruise|event|exchange_rate|currency|insurance"
)
"""Names of BFCL single-turn tools taken as look-alikes (matched on the lowercased name)."""


def pool(
    distractors: Literal["lookalikes", "bfcl"],
) -> tuple[list[ToolDefinition], list[multistep.Request]]:
    """The catalog (real tools first) and the requests (NESTFUL's, then TravelAPI's)."""
    nestful_tools, nestful_requests = multistep.nestful()
    data = bfcl.fetch()
    with open(data / "multi_turn_func_doc" / "travel_booking.json", encoding="utf-8") as f:
        travel = [
            ToolDefinition(
                e["name"], e.get("description", ""), bfcl.json_schema(e.get("parameters", {}))
            )
            for e in map(json.loads, f)
        ]
    travel_names = {t.name for t in travel}
    _, turns = multistep.bfcl_multi_turn()
    requests = [
        *nestful_requests,
        *(multistep.Request(r.id, r.text, r.expected) for r in turns if r.expected <= travel_names),
    ]
    real = [*nestful_tools, *travel]
    taken = {t.name for t in real}
    single, _ = bfcl.load()
    others = [t for t in single if distractors == "bfcl" or LOOKALIKE.search(t.name.lower())]
    renamed = [replace(t, name=f"{t.name}_2") if t.name in taken else t for t in others]
    return [*real, *renamed], requests
