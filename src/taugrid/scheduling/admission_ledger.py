"""Quota accounting of one admission pass: usage per ClusterQueue and per cohort.

Owns the arithmetic of Kueue's flat cohorts for every flavor-resource ``fr``:

- ``lendable(q)  = min(nominal, lending_limit)`` (``nominal`` when unset);
  ``guaranteed(q) = nominal - lendable(q)`` is never used by another queue.
- The cohort pool of ``fr`` is ``Σ lendable`` over its members; a member draws on it
  with whatever it uses above its guaranteed part: ``pool_used = Σ max(0, used -
  guaranteed)``. Invariant: ``pool_used ≤ pool``.
- ``available(cq) = max(0, guaranteed - used) + (pool - pool_used)``, capped at
  ``nominal + borrowing_limit - used`` when a borrowing limit is set; a queue without
  a cohort has ``nominal - used``.
- Dominant resource share (fair sharing): ``max over resources r of borrowed_r /
  pool_r * 1000 / fair_weight``, where ``borrowed_r`` is usage above nominal summed
  over the flavors of ``r`` and ``pool_r`` the cohort's lendable total of ``r``.

The ledger is the only mutable object of a pass; it starts from a frozen
``admission_model.State`` and is thrown away at the end.
"""

from __future__ import annotations

import collections
from collections.abc import Iterable, Mapping

from taugrid.scheduling import admission_model as m

__all__ = ["Ledger"]

_NO_EXTRA: Mapping[m.FR, m.Amount] = {}


class Ledger:
    """Mutable usage of every ClusterQueue and cohort pool during one pass."""

    def __init__(self, cluster_queues: Iterable[m.ClusterQueue]) -> None:
        self.cqs: dict[str, m.ClusterQueue] = {}
        self.quota: dict[str, dict[m.FR, m.ResourceQuota]] = {}
        self.usage: dict[str, dict[m.FR, m.Amount]] = {}
        self.members: dict[str, list[str]] = collections.defaultdict(list)
        self.pool: dict[str, dict[m.FR, m.Amount]] = collections.defaultdict(dict)
        self.pool_used: dict[str, dict[m.FR, m.Amount]] = collections.defaultdict(dict)
        self.pool_of_resource: dict[str, dict[str, m.Amount]] = collections.defaultdict(dict)
        self.version = 0  # bumped by every change
        self.releases = 0  # bumped by every release (usage going down)
        for cq in cluster_queues:
            self._register(cq)

    def _register(self, cq: m.ClusterQueue) -> None:
        if cq.name in self.cqs:
            raise ValueError(f"ClusterQueue {cq.name!r} is declared twice")
        self.cqs[cq.name] = cq
        self.quota[cq.name] = cq.quotas()
        self.usage[cq.name] = {}
        if cq.cohort is None:
            return
        self.members[cq.cohort].append(cq.name)
        pool, by_res = self.pool[cq.cohort], self.pool_of_resource[cq.cohort]
        for fr, q in self.quota[cq.name].items():
            pool[fr] = pool.get(fr, 0) + q.lendable
            by_res[fr[1]] = by_res.get(fr[1], 0) + q.lendable

    # -- reading -------------------------------------------------------------------
    def used(self, cq: str, fr: m.FR) -> m.Amount:
        return self.usage[cq].get(fr, 0)

    def nominal(self, cq: str, fr: m.FR) -> m.Amount:
        q = self.quota[cq].get(fr)
        return q.nominal if q else 0

    def borrowing(self, cq: str, fr: m.FR) -> m.Amount:
        """How much of ``fr`` the queue uses beyond its nominal quota."""
        return max(0, self.used(cq, fr) - self.nominal(cq, fr))

    def cohort_free(self, cohort: str, fr: m.FR) -> m.Amount:
        return self.pool[cohort].get(fr, 0) - self.pool_used[cohort].get(fr, 0)

    def available(self, cq: str, fr: m.FR) -> m.Amount:
        """How much more of ``fr`` the queue may take now, without preempting."""
        q = self.quota[cq].get(fr)
        if q is None:
            return 0
        used, cohort = self.used(cq, fr), self.cqs[cq].cohort
        if cohort is None:
            return max(0, q.nominal - used)
        avail = max(0, q.guaranteed - used) + self.cohort_free(cohort, fr)
        if q.borrowing_limit is not None:
            avail = min(avail, q.nominal + q.borrowing_limit - used)
        return max(0, avail)

    def capacity(self, cq: str, fr: m.FR) -> m.Amount:
        """The most of ``fr`` the queue could ever hold (everyone else preempted)."""
        q = self.quota[cq].get(fr)
        if q is None:
            return 0
        cohort = self.cqs[cq].cohort
        if cohort is None:
            return q.nominal
        cap = q.guaranteed + self.pool[cohort].get(fr, 0)
        if q.borrowing_limit is not None:
            cap = min(cap, q.nominal + q.borrowing_limit)
        return cap

    def fits(self, cq: str, needed: Mapping[m.FR, m.Amount]) -> bool:
        return all(a <= self.available(cq, fr) for fr, a in needed.items())

    def share(self, cq: str, extra: Mapping[m.FR, m.Amount] = _NO_EXTRA) -> float:
        """Dominant resource share of the queue, with ``extra`` usage added."""
        queue = self.cqs[cq]
        if queue.cohort is None:
            return 0.0
        borrowed: dict[str, m.Amount] = {}
        for fr, q in self.quota[cq].items():
            over = self.used(cq, fr) + extra.get(fr, 0) - q.nominal
            if over > 0:
                borrowed[fr[1]] = borrowed.get(fr[1], 0) + over
        pools = self.pool_of_resource[queue.cohort]
        ratios = [b / pools[r] for r, b in borrowed.items() if pools.get(r, 0) > 0]
        return max(ratios, default=0.0) * 1000.0 / max(queue.fair_weight, 1e-9)

    # -- writing -------------------------------------------------------------------
    def add(self, cq: str, usage: Iterable[tuple[m.FR, m.Amount]], sign: int = 1) -> None:
        """Charge (``sign=1``) or release (``sign=-1``) usage of a queue."""
        cohort = self.cqs[cq].cohort
        mine = self.usage[cq]
        self.version += 1
        self.releases += sign < 0
        for fr, amount in usage:
            before = mine.get(fr, 0)
            after = m.quantize(before + sign * amount)
            mine[fr] = after
            q = self.quota[cq].get(fr)
            if cohort is not None and q is not None:
                g = q.guaranteed
                delta = max(0, after - g) - max(0, before - g)
                pool_used = self.pool_used[cohort]
                pool_used[fr] = m.quantize(pool_used.get(fr, 0) + delta)
