"""A catalog writer process for the concurrency test: ``python writer.py DB SEED BUNDLE...``.

Adds the bundles one transaction each, in an order shuffled by SEED, to
maximise interleaving with the other writers.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

if __name__ == "__main__":
    from pytest_trt.catalog.store import Catalog

    db, seed, *paths = sys.argv[1:]
    order = [Path(p) for p in paths]
    random.Random(int(seed)).shuffle(order)
    with Catalog(Path(db)) as cat:
        statuses = [r.status for p in order for r in cat.add_paths([p])]
    print(" ".join(statuses))
