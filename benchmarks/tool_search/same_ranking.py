"""Whether two checkouts' keyword indexes rank alike on every benchmark query.

Run: `.venv/bin/python benchmarks/tool_search/same_ranking.py TREE` (TREE: another
checkout of the package, e.g. `git worktree add /tmp/base <commit>`). Compares this
checkout's `KeywordIndex` with TREE's on the pooled BFCL catalog (all 2,351 queries),
on 10,000 tools (400 queries), on NESTFUL alone and on the BFCL multi-turn pool, for
k = 1, 5, 10, 50 and three weightings; prints the number of differing rankings (0 means
quality.py's keyword and hybrid numbers carry over unchanged).
"""

from __future__ import annotations

import argparse
import random
from pathlib import Path

import bfcl
import multistep
from latency import load_tree  # type: ignore[import-not-found]  # a sibling script
from run import renamed

from advisorchain.advisors.tool_search import KeywordIndex


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("tree", help="the other checkout")
    baseline = load_tree(Path(parser.parse_args().tree).resolve()).KeywordIndex
    pool, queries = bfcl.load()
    mt_tools, mt_requests = multistep.bfcl_multi_turn()
    nf_tools, nf_requests = multistep.nestful()
    sample = random.Random(3).sample(queries, 400)
    sets = [
        ("BFCL pool", pool, [q.text for q in queries]),
        ("BFCL 10,000", renamed(pool, 10_000), [q.text for q in sample]),
        ("NESTFUL", nf_tools, [r.text for r in nf_requests]),
        (
            "BFCL multi-turn pool",
            list({d.name: d for d in [*mt_tools, *pool]}.values()),
            [r.text for r in mt_requests],
        ),
    ]
    differing = 0
    for weights in ((2.0, 1.0, 0.5), (1.0, 1.0, 1.0), (3.0, 1.0, 0.3)):
        for label, catalog, texts in sets:
            ours = KeywordIndex(weights=weights).build_sync(catalog)
            theirs = baseline(weights=weights).build_sync(catalog)
            count = sum(
                ours.search_sync(t, k) != theirs.search_sync(t, k)
                for k in (1, 5, 10, 50)
                for t in texts
            )
            print(f"{weights} {label}: {count} of {4 * len(texts)} rankings differ")
            differing += count
    return 1 if differing else 0


if __name__ == "__main__":
    raise SystemExit(main())
