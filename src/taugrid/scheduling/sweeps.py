"""A sweep's decisions, pure: each trial's parameters, which trials stop early, the ranking.

Owns the rules of ``spec.sweep`` over plain data (the hub's ``hub.runs.sweeps`` applies them
every scheduling cycle; nothing here reads a store or a clock):

- ``trial_params``: trial ``i``'s values. A grid enumerates combinations in the
  parameters' declared order, the last varying fastest; a random sweep draws trial ``i``
  from its own generator seeded with ``(seed, i)``, so a hub that restarts mid-sweep
  draws the same trials again.
- ``judge``: the *median* rule stops an active trial whose best value up to its latest
  step is worse than the median of the other trials' best values up to that step
  (among those that reached it, at least ``min_trials``); *asha* (asynchronous successive
  halving) judges a trial once at each rung ``grace_steps * eta**k`` it reaches: it goes
  on only if its best value there is not worse than the ``1 - 1/eta`` quantile of the
  values recorded at that rung so far, its own included (Li et al. 2020, as Ray Tune's
  ``ASHAScheduler`` does).
- ``ranking``: trials with a value first, best first, then the rest by index.
"""

from __future__ import annotations

import bisect
import dataclasses
import itertools
import math
import random
import statistics
from collections.abc import Sequence

from taugrid.spec import sweep as ss

__all__ = ["Decision", "Trial", "best_up_to", "judge", "ranking", "rungs", "trial_params"]

Point = tuple[int, float]  # (step, value)


def trial_params(spec: ss.SweepSpec, index: int) -> dict[str, ss.Scalar]:
    """The parameter values of trial ``index`` (0-based)."""
    if spec.method is ss.SweepMethod.GRID:
        return _grid(spec, index)
    rng = random.Random(f"{spec.seed}/{index}")
    return {name: _draw(p, rng) for name, p in spec.parameters.items()}


def _grid(spec: ss.SweepSpec, index: int) -> dict[str, ss.Scalar]:
    out: dict[str, ss.Scalar] = {}
    for name, p in reversed(spec.parameters.items()):
        values = p.values or []
        index, k = divmod(index, len(values))
        out[name] = values[k]
    return dict(reversed(out.items()))


def _draw(p: ss.ParamRange, rng: random.Random) -> ss.Scalar:
    if p.values is not None:
        return rng.choice(p.values)
    assert p.min is not None and p.max is not None
    if p.log:
        x = math.exp(rng.uniform(math.log(p.min), math.log(p.max)))
    else:
        x = rng.uniform(p.min, p.max)
    return round(x) if p.integer else x


@dataclasses.dataclass(frozen=True)
class Trial:
    """What a judge needs of one trial: its metric points and whether it still runs."""

    index: int
    active: bool
    points: tuple[Point, ...] = ()
    rung: int = 0
    """The highest rung it has passed (asha), 0 when none."""

    @property
    def last_step(self) -> int | None:
        return max((s for s, _ in self.points), default=None)


@dataclasses.dataclass(frozen=True)
class Decision:
    """Stop trial ``index`` (``stop``, with ``reason``), or record that it passed ``rung``."""

    index: int
    stop: bool
    reason: str = ""
    rung: int = 0


def _score(value: float, mode: str) -> float:
    """Higher is better, whatever the mode."""
    return -value if mode == "min" else value


def best_up_to(points: Sequence[Point], step: int, mode: str) -> float | None:
    """The best value logged at or before ``step`` (None when none was); a NaN counts as
    the worst value there is (a trial that diverged is judged, and loses)."""
    return _Running(points, mode).at(step)


def _best(points: Sequence[Point], mode: str) -> tuple[float, int] | None:
    finite = [(v, s) for s, v in points if math.isfinite(v)]
    if not finite:
        return None
    return min(finite, key=lambda vs: (-_score(vs[0], mode), vs[1]))


class _Running:
    """A trial's best value so far at each step it logged: ``at(step)`` by bisection."""

    def __init__(self, points: Sequence[Point], mode: str) -> None:
        worst = math.inf if mode == "min" else -math.inf
        pick = min if mode == "min" else max
        self.steps: list[int] = []
        self.bests: list[float] = []
        for step, value in sorted(points):
            v = worst if math.isnan(value) else value
            self.steps.append(step)
            self.bests.append(pick(v, self.bests[-1]) if self.bests else v)

    def at(self, step: int) -> float | None:
        i = bisect.bisect_right(self.steps, step)
        return self.bests[i - 1] if i else None


def judge(spec: ss.SweepSpec, trials: Sequence[Trial]) -> list[Decision]:
    """What the early-stopping rule decides now about the active trials."""
    rule, metric = spec.early_stop, spec.metric
    if rule is None or metric is None:
        return []
    if rule.rule is ss.StopRule.MEDIAN:
        return _median(rule, metric, trials)
    return _asha(rule, metric, trials)


def _median(rule: ss.EarlyStop, metric: ss.SweepMetric, trials: Sequence[Trial]) -> list[Decision]:
    out = []
    running = {u.index: _Running(u.points, metric.mode) for u in trials}
    for t in trials:
        step = t.last_step
        if not t.active or step is None or step < rule.grace_steps:
            continue
        mine = running[t.index].at(step)
        others = [
            b
            for u in trials
            if u.index != t.index and (u.last_step or -1) >= step
            if (b := running[u.index].at(step)) is not None
        ]
        if mine is None or len(others) < rule.min_trials:
            continue
        median = statistics.median(others)
        if _score(mine, metric.mode) < _score(median, metric.mode):
            why = (
                f"its best {metric.name} {mine:.4g} by step {step} is worse than the median "
                f"{median:.4g} of {len(others)} other trials by then (median rule)"
            )
            out.append(Decision(t.index, True, why))
    return out


def rungs(rule: ss.EarlyStop, up_to: int) -> list[int]:
    """The asha rungs (steps) at or below ``up_to``: grace, grace*eta, grace*eta^2, ..."""
    first = max(rule.grace_steps, 1)
    return list(itertools.takewhile(lambda r: r <= up_to, (first * rule.eta**k for k in range(64))))


def _asha(rule: ss.EarlyStop, metric: ss.SweepMetric, trials: Sequence[Trial]) -> list[Decision]:
    out = []
    running = {u.index: _Running(u.points, metric.mode) for u in trials}
    for t in trials:
        if not t.active or t.last_step is None:
            continue
        for rung in (r for r in rungs(rule, t.last_step) if r > t.rung):
            mine = running[t.index].at(rung)
            if mine is None:
                continue
            recorded = [
                _score(b, metric.mode)
                for u in trials
                if (u.last_step or -1) >= rung
                if (b := running[u.index].at(rung)) is not None
            ]
            cutoff = _quantile(sorted(recorded), 1 - 1 / rule.eta)
            if _score(mine, metric.mode) < cutoff:
                why = (
                    f"its best {metric.name} {mine:.4g} by step {rung} is not in the best "
                    f"1/{rule.eta} of the {len(recorded)} trials that reached it (asha)"
                )
                out.append(Decision(t.index, True, why))
                break
            out.append(Decision(t.index, False, rung=rung))
    return out


def _quantile(xs: Sequence[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default percentile)."""
    pos = (len(xs) - 1) * q
    lo, hi = math.floor(pos), math.ceil(pos)
    if not (math.isfinite(xs[lo]) and math.isfinite(xs[hi])):  # a diverged trial's -inf
        return xs[lo] if pos - lo < 0.5 else xs[hi]
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def ranking(
    spec: ss.SweepSpec, trials: Sequence[Trial]
) -> list[tuple[int, float | None, int | None]]:
    """(index, best value, its step) per trial: those with a value best first, then the rest."""
    mode = spec.metric.mode if spec.metric else "min"
    rows = []
    for t in trials:
        b = _best(t.points, mode)
        rows.append((t.index, b[0] if b else None, b[1] if b else None))
    return sorted(
        rows, key=lambda r: (r[1] is None, -_score(r[1], mode) if r[1] is not None else 0, r[0])
    )
