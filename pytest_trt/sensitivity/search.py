"""The sensitivity search: the smallest prefix of the error ranking whose nodes, left in float, pass the golden.

Candidates are prefixes of :meth:`~pytest_trt.sensitivity.tensor_errors.TensorErrors.ranked_nodes` (worst own
SQNR first).  Each candidate is a config with ``Calibration.exclude_nodes`` set, built and run for real and
judged against the golden snapshot with the given thresholds; evaluations are cached per candidate and counted
against the budget.  The order of evaluations:

1. no exclusion (the config as pinned): passing already ends the search with an empty set;
2. every ranked node excluded: failing ends it with "no exclusion helps" (leaving all of them in float does not
   pass, so no subset will);
3. ``greedy``: prefixes of 1, 2, 3 ... nodes, the first that passes ends the search; ``bisect``: the shortest
   passing prefix by bisection (assumes that a longer prefix passes when a shorter one does).

The budget (evaluations) ends the search where it stands: greedy reports no set, bisection the shortest passing
prefix it saw.
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

STRATEGIES = ("greedy", "bisect")
FOUND, ALREADY_PASSES, NO_EXCLUSION_HELPS, BUDGET = "found", "already passes", "no exclusion helps", "budget"


@dataclass(frozen=True)
class Evaluation:
    """One candidate built, run and judged."""

    nodes: tuple[str, ...]
    passed: bool
    checks: tuple[dict[str, Any], ...]  # MetricCheck.to_dict() of every evaluated check
    summary: str  # the failing checks' text, or the passing ones'
    seconds: float
    builds: int = 1
    runs: int = 1
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"nodes": list(self.nodes), "passed": self.passed, "checks": list(self.checks),
                "summary": self.summary, "seconds": self.seconds, "builds": self.builds, "runs": self.runs,
                "notes": list(self.notes)}


@dataclass(frozen=True)
class Step:
    """One line of the search: which prefix, what it gave."""

    index: int
    prefix: int  # how many ranked nodes are excluded
    evaluation: Evaluation
    cached: bool

    def line(self, ranked: Sequence[tuple[str, float]]) -> str:
        what = ("as pinned (no node excluded)" if self.prefix == 0 else
                f"all {self.prefix} ranked nodes excluded" if self.prefix == len(ranked) and self.prefix > 1 else
                f"exclude top {self.prefix} (+{ranked[self.prefix - 1][0]}, own SQNR "
                f"{_db(ranked[self.prefix - 1][1])})")
        verdict = "PASS" if self.evaluation.passed else "FAIL"
        cached = ", cached" if self.cached else f", {self.evaluation.seconds:.2f} s"
        notes = f" [{'; '.join(self.evaluation.notes)}]" if self.evaluation.notes else ""
        return f"step {self.index}: {what}: {verdict}{notes}: {self.evaluation.summary}{cached}"

    def to_dict(self) -> dict[str, Any]:
        return {"step": self.index, "prefix": self.prefix, "cached": self.cached, **self.evaluation.to_dict()}


def _db(v: float) -> str:
    return f"{v:.1f} dB" if v not in (float("inf"), float("-inf")) else ("error-free" if v > 0 else "no signal")


@dataclass
class SearchOutcome:
    """The steps taken and where the search stopped."""

    ranked: list[tuple[str, float]]
    strategy: str
    budget: int
    steps: list[Step] = field(default_factory=list)
    stopped: str = ""
    found: tuple[str, ...] | None = None
    seconds: float = 0.0

    @property
    def evaluations(self) -> int:
        return sum(1 for s in self.steps if not s.cached)

    @property
    def builds(self) -> int:
        return sum(s.evaluation.builds for s in self.steps if not s.cached)

    @property
    def runs(self) -> int:
        return sum(s.evaluation.runs for s in self.steps if not s.cached)

    @property
    def final(self) -> Evaluation | None:
        """The evaluation of the set found (None when none was)."""
        if self.found is None:
            return None
        return next(s.evaluation for s in reversed(self.steps) if s.evaluation.nodes == self.found)

    def to_dict(self) -> dict[str, Any]:
        return {"strategy": self.strategy, "budget": self.budget, "stopped": self.stopped,
                "exclude_nodes": list(self.found) if self.found is not None else None,
                "evaluations": self.evaluations, "builds": self.builds, "runs": self.runs, "seconds": self.seconds,
                "ranked": [{"node": n, "sqnr_db": s if abs(s) != float("inf") else None} for n, s in self.ranked],
                "steps": [s.to_dict() for s in self.steps]}


class _BudgetSpent(Exception):
    pass


def search(ranked: Sequence[tuple[str, float]], evaluate: Callable[[tuple[str, ...]], Evaluation], *,
           budget: int, strategy: str = "greedy",
           on_step: Callable[[Step], None] | None = None) -> SearchOutcome:
    """Run the search over ``ranked`` (node, own SQNR), worst first; ``evaluate`` builds, runs and judges a set."""
    if strategy not in STRATEGIES:
        raise ValueError(f"strategy {strategy!r}: choose one of {', '.join(STRATEGIES)}")
    if budget < 1:
        raise ValueError(f"budget must be at least 1, got {budget}")
    t0 = time.perf_counter()
    out = SearchOutcome(list(ranked), strategy, budget)
    names = [n for n, _ in ranked]
    cache: dict[frozenset[str], Evaluation] = {}

    def probe(prefix: int) -> bool:
        nodes = tuple(names[:prefix])
        key = frozenset(nodes)
        cached = key in cache
        if not cached:
            if out.evaluations >= budget:
                raise _BudgetSpent
            cache[key] = evaluate(nodes)
        step = Step(len(out.steps) + 1, prefix, cache[key], cached)
        out.steps.append(step)
        if on_step is not None:
            on_step(step)
        return cache[key].passed

    try:
        if probe(0):
            out.stopped, out.found = ALREADY_PASSES, ()
        elif not names or not probe(len(names)):
            out.stopped = NO_EXCLUSION_HELPS
        elif strategy == "greedy":
            for k in range(1, len(names) + 1):
                if probe(k):
                    out.stopped, out.found = FOUND, tuple(names[:k])
                    break
        else:
            out.stopped, out.found = FOUND, tuple(names[:_bisect(len(names), probe)])
    except _BudgetSpent:
        out.stopped = BUDGET
        if strategy == "bisect":
            passing = [s.prefix for s in out.steps if s.evaluation.passed]
            out.found = tuple(names[:min(passing)]) if passing else None
    out.seconds = time.perf_counter() - t0
    return out


def _bisect(n: int, passes: Callable[[int], bool]) -> int:
    """The shortest passing prefix in 1..n, ``n`` known to pass (``passes`` monotone in the prefix length)."""
    return 1 + bisect.bisect_left(range(1, n + 1), True, hi=n - 1, key=passes)
