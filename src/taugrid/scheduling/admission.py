"""Admission with Kueue semantics, global across regions: ``admit(state, pending)``.

Owns the decision which pending workloads get quota now, in which flavor, how much
they borrow, and whom they preempt. Pure: no I/O, no clock, no randomness; inputs
are frozen (``admission_model``), ties break on names and IDs, so the same input
always gives the same ``CycleResult``. Quota arithmetic: ``admission_ledger``;
preemption targets: ``admission_preempt``.

Vocabulary and semantics (Kueue ``v1beta1``/``v1beta2`` where not said otherwise):

- **ClusterQueue** (one per team): resource groups → flavors (GPU models, or
  ``default-flavor`` for cpu/memory) → per-resource ``nominal`` quota, optional
  ``borrowing_limit`` (most it may use beyond nominal) and ``lending_limit`` (most of
  its nominal others may use). A workload is charged in the queue of its
  **LocalQueue** (one per workspace).
- **Cohort**: queues sharing unused quota. For every flavor-resource: a queue's usage
  ≤ nominal + borrowing_limit; the cohort's usage ≤ Σ nominal; a queue's
  ``nominal - lending_limit`` is never used by a peer (see ``admission_ledger``).
- **Order** inside a queue: priority (WorkloadPriorityClass value) high first, then
  ``created_at``, then ID. ``StrictFIFO``: a head that cannot be admitted (even by
  preemption) blocks its queue for the pass; ``BestEffortFIFO``: it stays queued and
  the next workload is tried.
- **Flavor assignment** per resource group: flavors in the queue's order, skipping
  those the workload does not allow; the first one where it fits, with or without
  borrowing, wins; otherwise the first one where preemption could make room (Kueue's
  default fungibility: whenCanBorrow=Borrow, whenCanPreempt=TryNextFlavor).
- **Heads across queues** of a cohort are taken in order of: not borrowing first, then
  the dominant resource share the queue would have after admission (fair sharing),
  then priority, then ``created_at``. Cohorts are independent of one another.
- **Preemption** (``admission_preempt``): within a queue only of strictly lower
  priority, newest first; reclaim of quota lent to borrowing peers of the cohort when
  the preemptor's queue stays within its nominal; a minimal set. The preemptor gets
  ``Status.PREEMPTING`` with its targets; its usage is reserved for the rest of the
  pass so no one else takes the room; it is admitted by a later pass once the shell
  has evicted the targets (``Eviction``, reason ``Preempted``).
- **Waiting** results carry a reason naming the queue, flavor, resource, amount
  requested, used/nominal and what the cohort can still lend.

Where this deviates from Kueue, and why:

- One pass admits every head that fits, repeatedly, instead of one head per queue per
  cycle with borrowing conflicts in a cohort deferred to the next cycle: a pure
  function over a snapshot has no reason to wait for a next cycle.
- Fair sharing is always on for ordering borrowers and for choosing which borrowing
  peer gives first in reclaim; Kueue's fair-sharing *preemption* strategies (a queue
  preempting a peer with a higher share without reclaim) are not implemented, nor
  ``borrowWithinCohort``, hierarchical cohorts, partial admission or pod sets
  (a workload is one total request per resource).
- Workloads admitted earlier in the same pass are never preemption targets; a borrower
  admitted earlier in the pass instead gives way (waits, nothing evicted) to a later
  workload reclaiming its own queue's nominal quota, which could otherwise only preempt
  it in the next pass and lose its room to it again (a livelock).
- BestEffortFIFO retries inadmissible workloads on every pass; Kueue parks them until
  the cohort's usage changes. Same outcome, the shell may skip unchanged cohorts.
- A workload known to be inadmissible in this pass is set aside at once, without
  waiting for its turn among the cohort's heads: one that asks more than its queue
  can ever hold, or one asking at least as much as a workload ahead of it in its
  queue, with the same flavor constraints, that already failed (while nothing has
  been released since). Its queue's next workload competes at once.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
from collections.abc import Callable, Mapping, Sequence

from taugrid.platform import models as pm
from taugrid.scheduling import admission_ledger as al
from taugrid.scheduling import admission_model as m
from taugrid.scheduling import admission_preempt as ap
from taugrid.spec import units

__all__ = [
    "admit",
    "cluster_queue_of",
]


class _Mode(enum.IntEnum):
    """How a workload can get its quota now; higher is worse."""

    FIT = 0
    BORROW = 1
    PREEMPT = 2
    NO_FIT = 3


_Why = Callable[[], str]
"""A reason, built only when it is shown (most evaluations never are)."""


def _NO_REASON() -> str:
    return ""


def _text(text: str) -> _Why:
    return lambda: text


@dataclasses.dataclass(frozen=True)
class _Eval:
    mode: _Mode
    why: _Why = _NO_REASON
    assignment: tuple[tuple[str, str], ...] = ()
    needed: Mapping[m.FR, m.Amount] = dataclasses.field(default_factory=dict)
    borrows: bool = False


def _shortage(cq: str, fr: m.FR, amount: m.Amount, ledger: al.Ledger) -> str:
    """Which quota is short, in words: requested, used/nominal, what the cohort lends."""
    flavor, resource = fr
    q = ledger.quota[cq][fr]
    used = ledger.used(cq, fr)
    text = f"ClusterQueue {cq}: {resource} of flavor {flavor}: requested {amount}, used {used}"
    text += f"/{q.nominal} nominal"
    cohort = ledger.cqs[cq].cohort
    if cohort is None:
        return text + ", no cohort to borrow from"
    text += f", {ledger.available(cq, fr)} available incl. cohort {cohort}"
    if q.borrowing_limit is not None:
        text += f" (borrowing limit {q.borrowing_limit})"
    return text


def _never(cq: str, fr: m.FR, amount: m.Amount, ledger: al.Ledger) -> str:
    q, cap = ledger.quota[cq][fr], ledger.capacity(cq, fr)
    text = f"ClusterQueue {cq}: {fr[1]} of flavor {fr[0]}: requested {amount} but at most "
    text += f"{cap} can ever be available to it"
    if ledger.cqs[cq].cohort is not None and q.borrowing_limit is not None:
        text += f" (nominal {q.nominal}, borrowing limit {q.borrowing_limit})"
    return text


def _flavor_mode(
    cq: str, flavor: str, want: Mapping[str, m.Amount], ledger: al.Ledger
) -> tuple[_Mode, _Why]:
    mode, why = _Mode.FIT, _NO_REASON
    for resource, amount in sorted(want.items()):
        fr = (flavor, resource)
        q = ledger.quota[cq].get(fr)
        if q is None:
            return _Mode.NO_FIT, _text(f"flavor {flavor} has no {resource} quota in {cq}")
        if amount <= ledger.available(cq, fr):
            one = _Mode.FIT if ledger.used(cq, fr) + amount <= q.nominal else _Mode.BORROW
        elif amount <= ledger.capacity(cq, fr):
            if mode < _Mode.PREEMPT:
                why = functools.partial(_shortage, cq, fr, amount, ledger)
            one = _Mode.PREEMPT
        else:
            return _Mode.NO_FIT, functools.partial(_never, cq, fr, amount, ledger)
        mode = max(mode, one)
    return mode, why


def _pick_flavor(
    wl: m.Workload, cq: str, group: m.ResourceGroup, want: Mapping[str, m.Amount], ledger: al.Ledger
) -> tuple[str | None, _Mode, _Why]:
    preempt: tuple[str, _Why] | None = None
    reasons: list[_Why] = []
    for fq in group.flavors:
        if not all(wl.allows(r, fq.flavor) for r in want):
            continue
        mode, why = _flavor_mode(cq, fq.flavor, want, ledger)
        if mode <= _Mode.BORROW:
            return fq.flavor, mode, _NO_REASON
        if mode is _Mode.PREEMPT and preempt is None:
            preempt = (fq.flavor, why)
        reasons.append(why)
    if preempt is not None:
        return preempt[0], _Mode.PREEMPT, preempt[1]
    allowed = sorted({f for _, f in wl.allowed_flavors})
    missing = f"ClusterQueue {cq} has no flavor of {', '.join(sorted(want))} among {allowed}"
    return None, _Mode.NO_FIT, lambda: "; ".join(w() for w in reasons) or missing


def _evaluate(wl: m.Workload, cq: str, ledger: al.Ledger) -> _Eval:
    """Flavor assignment and how the workload could get it (Fit/Borrow/Preempt/NoFit)."""
    requests = {r: a for r, a in wl.requests if a > 0}
    assignment: list[tuple[str, str]] = []
    needed: dict[m.FR, m.Amount] = {}
    mode, reason = _Mode.FIT, _NO_REASON
    for group in ledger.cqs[cq].resource_groups:
        want = {r: a for r, a in requests.items() if r in group.covered}
        if not want:
            continue
        flavor, gmode, why = _pick_flavor(wl, cq, group, want, ledger)
        if flavor is None:
            return _Eval(_Mode.NO_FIT, why)
        assignment += [(r, flavor) for r in want]
        needed.update({(flavor, r): a for r, a in want.items()})
        if gmode > mode:
            mode, reason = gmode, why
    missing = sorted(set(requests) - {r for r, _ in assignment})
    if missing:
        return _Eval(
            _Mode.NO_FIT, _text(f"ClusterQueue {cq} has no quota for {', '.join(missing)}")
        )
    borrows = any(ledger.used(cq, fr) + a > ledger.nominal(cq, fr) for fr, a in needed.items())
    return _Eval(mode, reason, tuple(sorted(assignment)), needed, borrows)


@dataclasses.dataclass(frozen=True)
class _Failed:
    """A request that could not go in this pass (see ``_Pass._remember``)."""

    amounts: tuple[m.Amount, ...]
    why: str
    flavors: tuple[m.FR, ...]  # preemption failed in these; () when nothing ever fits


@dataclasses.dataclass
class _Pass:
    """Working state of one ``admit`` call; every field is private to the call."""

    ledger: al.Ledger
    running: dict[str, dict[str, m.AdmittedWorkload]]
    queues: dict[str, list[m.Workload]]
    results: list[m.WorkloadResult] = dataclasses.field(default_factory=list)
    evictions: list[m.Eviction] = dataclasses.field(default_factory=list)
    cursor: dict[str, int] = dataclasses.field(default_factory=dict)
    failed: dict[tuple[str, object], list[_Failed]] = dataclasses.field(default_factory=dict)
    failed_at: int = -1  # ledger.releases when ``failed`` was last valid
    cache: dict[str, tuple[int, int, _Eval]] = dataclasses.field(default_factory=dict)
    fresh: list[tuple[str, int, dict[m.FR, m.Amount]]] = dataclasses.field(default_factory=list)
    """Borrowers admitted in this pass: queue, index of their result, what they hold."""

    def wait(self, cq: str, wl: m.Workload, reason: str) -> None:
        self.results.append(m.WorkloadResult(wl.id, cq, m.Status.WAITING, reason))
        self.cursor[cq] += 1
        if self.ledger.cqs[cq].strategy is pm.QueueingStrategy.STRICT_FIFO:
            rest = self.queues[cq][self.cursor[cq] :]
            why = f"behind {wl.id} in ClusterQueue {cq} (StrictFIFO): {reason}"
            self.results += [m.WorkloadResult(w.id, cq, m.Status.WAITING, why) for w in rest]
            self.cursor[cq] = len(self.queues[cq])

    def head(self, cq: str) -> tuple[m.Workload, _Eval] | None:
        """The queue's next workload that is not hopeless now (those wait on the way)."""
        queue = self.queues[cq]
        while self.cursor[cq] < len(queue):
            wl = queue[self.cursor[cq]]
            if (like := self._dominated(cq, wl)) is not None:
                self.wait(cq, wl, like)
                continue
            ev = self._evaluate(cq, wl)
            if ev.mode is not _Mode.NO_FIT:
                return wl, ev
            why = ev.why()
            self._remember(cq, wl, why)
            self.wait(cq, wl, why)
        return None

    def _evaluate(self, cq: str, wl: m.Workload) -> _Eval:
        """``_evaluate``, reused while the ledger and the queue's head are unchanged."""
        key = (self.ledger.version, self.cursor[cq])
        hit = self.cache.get(cq)
        if hit is not None and hit[:2] == key:
            return hit[2]
        ev = _evaluate(wl, cq, self.ledger)
        self.cache[cq] = (*key, ev)
        return ev

    def _remember(self, cq: str, wl: m.Workload, why: str, flavors: tuple[m.FR, ...] = ()) -> None:
        """Note a request that could not go; larger ones behind it cannot either.

        Valid while nothing is released (admissions only take room away), for later
        workloads of the queue (no more preemption rights: the queue is in priority
        order) with the same flavor constraints that ask at least as much of every
        resource. After a failed preemption in ``flavors``, only while they would pick
        the same flavors (the request is within those flavors' capacity).
        """
        if self.failed_at != self.ledger.releases:
            self.failed, self.failed_at = {}, self.ledger.releases
        key = (cq, (wl.allowed_flavors, tuple(r for r, _ in wl.requests)))
        why = f"no room, as for {wl.id} which asks no more: {why}"
        failed = _Failed(tuple(a for _, a in wl.requests), why, flavors)
        self.failed.setdefault(key, []).append(failed)

    def _dominated(self, cq: str, wl: m.Workload) -> str | None:
        """The reason of an earlier failure this workload cannot beat, if any."""
        if self.failed_at != self.ledger.releases:
            return None
        seen = self.failed.get((cq, (wl.allowed_flavors, tuple(r for r, _ in wl.requests))), [])
        mine = tuple(a for _, a in wl.requests)
        asks = dict(wl.requests)
        for f in seen:
            if all(x >= y for x, y in zip(mine, f.amounts, strict=True)) and all(
                asks[r] <= self.ledger.capacity(cq, (fl, r)) for fl, r in f.flavors
            ):
                return f.why
        return None

    def admit(self, cq: str, wl: m.Workload, ev: _Eval) -> None:
        before = {fr: self.ledger.borrowing(cq, fr) for fr in ev.needed}
        self.ledger.add(cq, ev.needed.items())
        borrowed = tuple(
            (f, r, self.ledger.borrowing(cq, (f, r)) - before[(f, r)])
            for f, r in sorted(ev.needed)
            if self.ledger.borrowing(cq, (f, r)) > before[(f, r)]
        )
        reason = "admitted" + (" borrowing from cohort" if borrowed else "")
        if borrowed:
            self.fresh.append((cq, len(self.results), dict(ev.needed)))
        self.results.append(
            m.WorkloadResult(wl.id, cq, m.Status.ADMITTED, reason, ev.assignment, borrowed)
        )
        self.cursor[cq] += 1

    def reclaim_fresh(self, cq: str, wl: m.Workload, ev: _Eval) -> bool:
        """Let ``wl`` reclaim its queue's own quota from borrowers admitted earlier in
        this pass (newest first); they wait instead, nothing is evicted. Without this a
        borrower admitted ahead of a reclaiming workload every pass, then preempted by
        it, could keep it out for ever. False, and nothing changed, if that is not
        enough."""
        if not ap.may_reclaim(cq, ev.needed, self.ledger):
            return False
        cohort = self.ledger.cqs[cq].cohort
        taken: list[tuple[str, int, dict[m.FR, m.Amount]]] = []
        for other, at, held in reversed(self.fresh):
            if self.ledger.fits(cq, ev.needed):
                break
            if other == cq or self.ledger.cqs[other].cohort != cohort:
                continue
            if not any(fr in ev.needed and self.ledger.borrowing(other, fr) > 0 for fr in held):
                continue
            self.ledger.add(other, held.items(), -1)
            taken.append((other, at, held))
        if not self.ledger.fits(cq, ev.needed):
            for other, _, held in taken:
                self.ledger.add(other, held.items())
            return False
        for other, at, _ in taken:
            why = f"gave back the quota it borrowed to {wl.id} of ClusterQueue {cq} (its own)"
            self.results[at] = m.WorkloadResult(
                self.results[at].workload_id, other, m.Status.WAITING, why
            )
        self.fresh = [f for f in self.fresh if f not in taken]
        self.admit(cq, wl, dataclasses.replace(ev, mode=_Mode.FIT))
        return True

    def preempt(self, cq: str, wl: m.Workload, ev: _Eval) -> None:
        if self.reclaim_fresh(cq, wl, ev):
            return
        why = ev.why()
        targets = ap.find_targets(wl, cq, ev.needed, self.ledger, self.running)
        if targets is None:
            why = f"{why}; no workload may be preempted for it"
            self._remember(cq, wl, why, tuple(sorted(ev.needed)))
            self.wait(cq, wl, why)
            return
        for t in targets:
            del self.running[t.workload.cluster_queue][t.workload.id]
            self.evictions.append(_eviction(wl, cq, t))
        self.ledger.add(cq, ev.needed.items())  # reserved until the targets are gone
        ids = tuple(t.workload.id for t in targets)
        reason = f"preempting {units.plural(len(ids), 'workload')} to make room: {why}"
        self.results.append(
            m.WorkloadResult(wl.id, cq, m.Status.PREEMPTING, reason, ev.assignment, (), ids)
        )
        self.cursor[cq] += 1

    def run(self, group: Sequence[str]) -> None:
        """Admit heads of the group's queues, best first, until none can move."""
        for cq in group:
            self.cursor[cq] = 0
        while True:
            heads = [(cq, h) for cq in group if (h := self.head(cq)) is not None]
            if not heads:
                return
            cq, (wl, ev) = min(heads, key=lambda x: self._key(x[0], x[1][0], x[1][1]))
            if ev.mode is _Mode.PREEMPT:
                self.preempt(cq, wl, ev)
            else:
                self.admit(cq, wl, ev)

    def _key(self, cq: str, wl: m.Workload, ev: _Eval) -> tuple[bool, float, int, float, str]:
        share = self.ledger.share(cq, ev.needed) if ev.borrows else 0.0
        return (ev.borrows, share, -wl.priority, wl.created_at, wl.id)


def _eviction(preemptor: m.Workload, cq: str, t: ap.Target) -> m.Eviction:
    w = t.workload
    if t.cause is m.Cause.PRIORITY:
        why = f"preempted by {preemptor.id} (priority {preemptor.priority} > {w.priority})"
    else:
        why = f"quota reclaimed by ClusterQueue {cq} for {preemptor.id}; {w.cluster_queue} borrowed"
    return m.Eviction(w.id, w.cluster_queue, preemptor.id, t.cause, why)


def _running(state: m.State, ledger: al.Ledger) -> dict[str, dict[str, m.AdmittedWorkload]]:
    """Charge every admitted workload; index the preemptible ones by queue."""
    running: dict[str, dict[str, m.AdmittedWorkload]] = {cq: {} for cq in ledger.cqs}
    for w in state.admitted:
        if w.cluster_queue not in ledger.cqs:
            raise ValueError(f"admitted workload {w.id} names unknown queue {w.cluster_queue}")
        ledger.add(w.cluster_queue, ap.usage_of(w))
        if w.preemptible:
            running[w.cluster_queue][w.id] = w
    return running


def _enqueue(
    state: m.State, pending: Sequence[m.Workload], ledger: al.Ledger
) -> tuple[dict[str, list[m.Workload]], list[m.WorkloadResult]]:
    to_cq = {lq.name: lq.cluster_queue for lq in state.local_queues}
    queues: dict[str, list[m.Workload]] = {cq: [] for cq in ledger.cqs}
    lost, seen = [], set()
    for wl in pending:
        if wl.id in seen:
            raise ValueError(f"workload {wl.id} is pending twice")
        seen.add(wl.id)
        cq = to_cq.get(wl.queue)
        if cq is None or cq not in queues:
            why = f"LocalQueue {wl.queue} does not exist or names no known ClusterQueue"
            lost.append(m.WorkloadResult(wl.id, cq or "", m.Status.WAITING, why))
            continue
        queues[cq].append(wl)
    for q in queues.values():
        q.sort(key=lambda w: (-w.priority, w.created_at, w.id))
    return queues, lost


def _groups(ledger: al.Ledger, queues: Mapping[str, list[m.Workload]]) -> list[list[str]]:
    """Queues that share quota (a cohort, or a queue alone), each with pending work."""
    by_cohort: dict[str, list[str]] = {}
    for name in sorted(ledger.cqs):
        cohort = ledger.cqs[name].cohort
        by_cohort.setdefault(f"c:{cohort}" if cohort else f"q:{name}", []).append(name)
    return [g for _, g in sorted(by_cohort.items()) if any(queues[cq] for cq in g)]


def admit(state: m.State, pending: Sequence[m.Workload]) -> m.CycleResult:
    """Decide admission for ``pending`` against ``state`` (see the module docstring).

    Returns one ``WorkloadResult`` per pending workload (cohort by cohort, in decision
    order) and the ``Eviction``s that PREEMPTING results wait for.
    """
    ledger = al.Ledger(state.cluster_queues)
    work = _Pass(ledger, _running(state, ledger), {})
    work.queues, lost = _enqueue(state, pending, ledger)
    work.results += lost
    for group in _groups(ledger, work.queues):
        work.run(group)
    return m.CycleResult(tuple(work.results), tuple(work.evictions))


def cluster_queue_of(team: pm.TeamSpec, *, cpu_memory: bool = False) -> m.ClusterQueue:
    """A team's ClusterQueue, as ``render.kueue.cluster_queue`` writes it for Kueue.

    GPU quotas form one resource group (flavor per GPU model, in declared order);
    with ``cpu_memory`` the team's cpu (milli-CPUs) and memory (bytes) quotas form a
    second group on ``default-flavor``. Limits only apply with a cohort, as in Kueue.
    """
    gpu = m.ResourceGroup(
        tuple(
            m.FlavorQuotas(
                q.gpu_model,
                (
                    m.ResourceQuota(
                        m.GPU,
                        q.nominal,
                        q.borrowing_limit if team.cohort else None,
                        q.lending_limit if team.cohort else None,
                    ),
                ),
            )
            for q in team.quotas
        )
    )
    groups = [gpu] if team.quotas else []
    if cpu_memory:
        groups.append(_cpu_memory_group(team))
    return m.ClusterQueue(team.name, tuple(groups), team.cohort, team.queueing_strategy)


def _cpu_memory_group(team: pm.TeamSpec) -> m.ResourceGroup:
    cpu = m.ResourceQuota(m.CPU, round(team.cpu_quota * 1000))
    memory = m.ResourceQuota(m.MEMORY, units.parse_quantity_bytes(team.memory_quota))
    return m.ResourceGroup((m.FlavorQuotas(m.DEFAULT_FLAVOR, (cpu, memory)),))
