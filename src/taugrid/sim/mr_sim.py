"""Discrete-event simulation of a multi-region scenario through ``scheduling.cycle``.

Every placement is a ``cycle.schedule`` call on a ``Snapshot`` built the way the hub
builds one (``hub.placement.snapshot.build`` + ``hub.placement.data_view``): one ``ClusterView``
per pool with its nodes' free GPUs, price, inbound links as a probe would measure them
now, the datasets with a complete replica in its region, and when its running jobs are
expected to give GPUs back (from their *declared* runtime limit, as the hub does); one
``PendingRun`` per waiting job with its dataset need and ``wait_near_data_s``. Quota is
unlimited (one team), so admission never holds a job back: placement is what differs.

Model (nothing sleeps; the clock jumps from event to event — arrivals, transfer ends,
job ends — and a cycle runs at each):

- A placed job holds its GPUs at once. If its dataset has no replica in the region it
  waits for a copy: from the replica whose link gives the most bytes/s now, at
  ``link bandwidth / transfers on the link`` (fair sharing, recomputed at every event),
  billed ``size x egress $/GB`` once. A copy already on its way is shared, and once
  done the region keeps the replica (a cache; nothing is evicted).
- Then it runs for its duration on A100s / the pool's GPU speed (``GPU_SPEED``).
  JCT = finish - submit (queueing + transfer + run).
- Measured links: ``bandwidth / (transfers on the link + 1)`` — what a probe sees.

A run is placed on one cluster, hence one region, unless the policy has a link budget
(``Policy.span_min_bps``) and the core spans an async/none job across clusters
(``scheduling.spanning``): then every member takes its workers, the data is copied into
each member region and the job starts when the last copy ends, and it runs at its
slowest member's GPU speed. Nothing else is charged for spanning (no cross-region
slowdown is modelled). ``sync`` jobs never span.

Spot pools (``mr_scenario`` with ``spot=True``): a spot node is reclaimed at the times of
its Poisson process; every job holding it loses its attempt (all of its GPUs are freed),
keeps the work up to its last checkpoint (every ``snapshot.CHECKPOINT_EVERY_S`` of its run
time) and waits again; its next attempt spends ``snapshot.RESTART_S`` restarting. The
node returns ``mr_scenario.NODE_RETURN_S`` later. ``restart_in_place`` pins a reclaimed
job to the spot pool it ran on (a spot setup without managed recovery); otherwise the
cycle places it again like any pending run. GPU cost counts every attempt, reclaimed
ones included (``reclaim_cost``). ``compare_spot`` plays the three ways of using spot.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np

from taugrid import payloads as wire
from taugrid.scheduling import cycle, plugins_data, policies_baseline
from taugrid.scheduling import snapshot as snap
from taugrid.sim import mr_scenario as sc

__all__ = [
    "POLICIES",
    "SPOT_WAYS",
    "Placement",
    "Result",
    "compare",
    "compare_spot",
    "mean",
    "simulate",
]

POLICIES = (*policies_baseline.BASELINES, "TauGrid")
TEAM = "sim"
_ROOM = 1e12  # CPUs and memory are not modelled: every node has plenty
_EPS = 1e-6


@dataclasses.dataclass(frozen=True)
class Placement:
    """Where and when one job went; ``moved_bytes``: copies its placement started."""

    job_id: str
    cluster_id: str
    region: str
    submit: float
    placed: float
    start: float
    finish: float
    moved_bytes: int
    members: int = 1
    """Member clusters it ran on (more than 1: the core spanned it)."""


@dataclasses.dataclass(frozen=True)
class Result:
    policy: str
    jobs: int
    avg_jct: float
    p50_jct: float
    p99_jct: float
    avg_wait: float
    """Mean seconds from submission to placement."""
    avg_transfer: float
    """Mean seconds from placement to start (waiting for data)."""
    bytes_moved: int
    egress_cost: float
    gpu_cost: float
    """$ of GPU time held (placement to finish) at each pool's price."""
    utilisation: float
    """GPU-seconds of work done / (all GPUs x first submission to last finish)."""
    cycles: int
    placements: tuple[Placement, ...]
    reclaims: int = 0
    """Attempts lost to a spot reclaim."""
    reclaim_cost: float = 0.0
    """$ of GPU time held by attempts that were reclaimed (part of ``gpu_cost``)."""


@dataclasses.dataclass
class _Copy:
    dataset: str
    src: str
    dst: str
    remaining: float
    waiting: list[str]


@dataclasses.dataclass
class _Held:
    """A placed job: ``allocs`` holds (cluster, [(node index, GPUs)]) per member cluster,
    the head's first (one member unless the core spanned the run)."""

    job: sc.Job
    cluster: str
    region: str
    placed: float
    allocs: list[tuple[str, list[tuple[int, float]]]]
    moved: int = 0
    start: float | None = None
    copies_left: int = 0


class _World:
    """Mutable state of one simulation: nodes, replicas, copies, jobs."""

    def __init__(
        self, scenario: sc.Scenario, policy: cycle.Policy, restart_in_place: bool = False
    ) -> None:
        self.s, self.policy, self.in_place = scenario, policy, restart_in_place
        self.bps, self.egress = scenario.link_bps(), scenario.egress_per_gb()
        self.pools = {p.cluster_id: p for p in scenario.pools}
        self.nodes = {
            p.cluster_id: [
                snap.NodeView(
                    f"{p.cluster_id}-{i}",
                    p.gpu_model,
                    p.gpus_per_node,
                    p.gpus_per_node,
                    _ROOM,
                    _ROOM,
                    spot=p.spot,
                )
                for i in range(p.nodes)
            ]
            for p in scenario.pools
        }
        self.rng = np.random.default_rng((scenario.seed, 2))
        self.progress: dict[str, float] = {}  # checkpointed work (A100-seconds) per job
        self.restarts: dict[str, int] = {}
        self.pinned: dict[str, sc.Pool] = {}  # restart in place: the pool it waits for
        self.reclaims, self.reclaim_cost = 0, 0.0
        self.reclaim_at = {
            (p.cluster_id, i): self._draw(p, 0.0)
            for p in scenario.pools
            if p.spot
            for i in range(p.nodes)
        }
        self.back_at: dict[tuple[str, int], float] = {}
        self.replicas = {d.name: {d.home} for d in scenario.datasets}
        self.sizes = {d.name: d.size_bytes for d in scenario.datasets}
        self.copies: dict[tuple[str, str], _Copy] = {}
        self.pending: dict[str, sc.Job] = {}
        self.admitted: set[str] = set()
        self.held: dict[str, _Held] = {}
        self.done: list[Placement] = []
        self.moved, self.egress_cost, self.cycles = 0, 0.0, 0

    # -- links and copies -------------------------------------------------------------

    def _load(self, src: str, dst: str) -> int:
        return sum(1 for c in self.copies.values() if (c.src, c.dst) == (src, dst))

    def _rate(self, c: _Copy) -> float:
        return self.bps[(c.src, c.dst)] / self._load(c.src, c.dst)

    def next_copy_end(self, now: float) -> float:
        return min(
            (now + c.remaining / self._rate(c) for c in self.copies.values()), default=math.inf
        )

    def advance(self, dt: float) -> None:
        rates = {k: self._rate(c) for k, c in self.copies.items()}
        for k, c in self.copies.items():
            c.remaining -= rates[k] * dt

    def _start_copy(self, dataset: str, dst: str, job_id: str) -> int:
        """Join a copy on its way, or start one from the fastest replica; bytes started."""
        key = (dataset, dst)
        if key in self.copies:
            self.copies[key].waiting.append(job_id)
            return 0
        src = max(
            sorted(self.replicas[dataset]),
            key=lambda r: self.bps[(r, dst)] / (self._load(r, dst) + 1),
        )
        size = self.sizes[dataset]
        self.copies[key] = _Copy(dataset, src, dst, float(size), [job_id])
        self.egress_cost += size / 1e9 * self.egress[(src, dst)]
        self.moved += size
        return size

    def finish_copies(self, now: float) -> None:
        for key, c in list(self.copies.items()):
            if c.remaining <= _EPS * self.sizes[c.dataset] + _EPS:
                del self.copies[key]
                self.replicas[c.dataset].add(c.dst)
                for job_id in c.waiting:
                    h = self.held[job_id]
                    h.copies_left -= 1
                    if h.copies_left == 0:  # a span starts once every member has the data
                        h.start = now

    # -- jobs ---------------------------------------------------------------------------

    def _speed(self, h: _Held) -> float:
        return min(self.pools[cid].speed for cid, _ in h.allocs)

    def _runtime(self, h: _Held) -> float:
        """The work left at its slowest member's GPU speed, plus a restart after a reclaim."""
        job_id = h.job.job_id
        left = (h.job.duration - self.progress.get(job_id, 0.0)) / self._speed(h)
        return left + (snap.RESTART_S if self.restarts.get(job_id) else 0.0)

    # -- spot reclaims ------------------------------------------------------------------

    def _draw(self, p: sc.Pool, now: float) -> float:
        rate = p.reclaims_per_hour
        return now + float(self.rng.exponential(3600 / rate)) if rate > 0 else math.inf

    def next_spot_event(self) -> float:
        """The next node return, or reclaim while a job runs (an idle node's reclaim
        changes nothing until then: ``spot_events`` plays it at its own time)."""
        backs = min(self.back_at.values(), default=math.inf)
        if not self.held:
            return backs
        return min(backs, min(self.reclaim_at.values(), default=math.inf))

    def spot_events(self, now: float) -> None:
        """Play every reclaim and return due by ``now``, each at its own time."""
        while True:
            due = [(t, k, True) for k, t in self.reclaim_at.items() if t <= now + _EPS]
            due += [(t, k, False) for k, t in self.back_at.items() if t <= now + _EPS]
            if not due:
                return
            t, (cid, i), reclaim = min(due)
            if reclaim:
                self._reclaim(cid, i, t)
            else:
                del self.back_at[(cid, i)]
                nodes = self.nodes[cid]
                nodes[i] = dataclasses.replace(nodes[i], alive=True)
                self.reclaim_at[(cid, i)] = self._draw(self.pools[cid], t)

    def _reclaim(self, cid: str, i: int, t: float) -> None:
        for job_id, h in list(self.held.items()):
            if any(c == cid and any(j == i for j, _ in alloc) for c, alloc in h.allocs):
                self._evict(job_id, h, t)
        nodes = self.nodes[cid]
        nodes[i] = dataclasses.replace(nodes[i], alive=False, gpus_free=nodes[i].gpus_total)
        self.reclaim_at[(cid, i)] = math.inf
        self.back_at[(cid, i)] = t + sc.NODE_RETURN_S

    def _evict(self, job_id: str, h: _Held, t: float) -> None:
        """The attempt ends at ``t``: GPUs back, work kept to its last checkpoint."""
        del self.held[job_id]
        self._release(h)
        for c in self.copies.values():  # a copy it waited for goes on: the region keeps it
            if job_id in c.waiting:
                c.waiting.remove(job_id)
        self.reclaim_cost += h.job.gpus * (t - h.placed) / 3600 * self.pools[h.cluster].price
        if h.start is not None:
            restart = snap.RESTART_S if self.restarts.get(job_id) else 0.0
            ran = max(0.0, t - h.start - restart)
            kept = math.floor(ran / snap.CHECKPOINT_EVERY_S) * snap.CHECKPOINT_EVERY_S
            self.progress[job_id] = self.progress.get(job_id, 0.0) + kept * self._speed(h)
        self.restarts[job_id] = self.restarts.get(job_id, 0) + 1
        self.reclaims += 1
        if self.in_place:
            self.pinned[job_id] = self.pools[h.cluster]
        self.pending[job_id] = h.job

    def _release(self, h: _Held) -> None:
        for cluster_id, alloc in h.allocs:
            nodes = self.nodes[cluster_id]
            for i, gpus in alloc:
                nodes[i] = dataclasses.replace(nodes[i], gpus_free=nodes[i].gpus_free + gpus)

    def next_job_end(self) -> float:
        ends = [h.start + self._runtime(h) for h in self.held.values() if h.start is not None]
        return min(ends, default=math.inf)

    def finish_jobs(self, now: float) -> None:
        for job_id, h in list(self.held.items()):
            if h.start is None or h.start + self._runtime(h) > now + _EPS:
                continue
            del self.held[job_id]
            self._release(h)
            end = h.start + self._runtime(h)
            self.done.append(
                Placement(
                    job_id,
                    h.cluster,
                    h.region,
                    h.job.submit,
                    h.placed,
                    h.start,
                    end,
                    h.moved,
                    len(h.allocs),
                )
            )

    def _take(
        self, run: snap.PendingRun, cluster_id: str, nodes: tuple[str, ...]
    ) -> list[tuple[int, float]]:
        """Take ``run``'s workers on ``nodes`` of one cluster; (node index, GPUs) taken."""
        pool = self.pools[cluster_id]
        view = snap.ClusterView(cluster_id, pool.region, True, tuple(self.nodes[cluster_id]))
        workers = dataclasses.replace(run, workers=len(nodes))
        after = cycle.take(workers, view, nodes).nodes
        self.nodes[cluster_id] = list(after)
        return [
            (i, b.gpus_free - a.gpus_free)
            for i, (b, a) in enumerate(zip(view.nodes, after, strict=True))
            if b.gpus_free != a.gpus_free
        ]

    def place(self, job: sc.Job, run: snap.PendingRun, d: cycle.Decision, now: float) -> None:
        """Take the workers on the nodes the cycle bound them to (as the agent pins them),
        in every member cluster of a span; copy the data into each member region."""
        head = d.cluster_id or ""
        members = [(head, d.nodes), *d.guests]
        allocs = [(cid, self._take(run, cid, nodes)) for cid, nodes in members]
        h = _Held(job, head, self.pools[head].region, now, allocs)
        self.held[job.job_id] = h
        regions = {self.pools[cid].region for cid, _ in members}
        missing = sorted(r for r in regions if job.dataset and r not in self.replicas[job.dataset])
        for region in missing:
            h.moved += self._start_copy(job.dataset or "", region, job.job_id)
        h.copies_left = len(missing)
        if not missing:
            h.start = now
        del self.pending[job.job_id]

    # -- the snapshot, as the hub builds it ---------------------------------------------

    def _probes(self, region: str) -> dict[str, dict[str, float]]:
        """What the region's probes would read: each link's share a new copy would get."""
        return {
            src: {
                "throughput_mbps": self.bps[(src, region)] / (self._load(src, region) + 1) * 8e-6,
                "egress_cost_per_gb": self.egress[(src, region)],
            }
            for src in self.s.regions
            if src != region
        }

    def _releases(self, cluster_id: str, now: float) -> tuple[tuple[float, float], ...]:
        out = []
        for h in self.held.values():
            gpus = sum(g for cid, alloc in h.allocs if cid == cluster_id for _, g in alloc)
            if not gpus:
                continue
            if h.start is not None:
                begins = h.start
            else:  # when the last copy into a member region ends
                copies = [c for c in self.copies.values() if h.job.job_id in c.waiting]
                begins = now + max(c.remaining / self._rate(c) for c in copies)
            out.append((max(0.0, begins + h.job.declared - now), float(gpus)))
        return tuple(sorted(out))

    def _cluster(self, p: sc.Pool, now: float) -> snap.ClusterView:
        """The pool as its agent would report it, through the hub's report-to-view step."""
        report = {
            "nodes": [wire.NodeReport(**dataclasses.asdict(n)) for n in self.nodes[p.cluster_id]],
            "cost_per_gpu_hour": p.price,
            "spot_cost_per_gpu_hour": p.price if p.spot else None,
            "reclaims_per_hour": p.reclaims_per_hour,
            "gpu_speed": p.speed,
            "probes": self._probes(p.region),
            "spannable": True,  # every simulated cluster may head or join a span
        }
        held = tuple(sorted(d for d, regions in self.replicas.items() if p.region in regions))
        return snap.cluster_from_report(
            p.cluster_id,
            p.region,
            True,
            report,
            datasets=held,
            releases=self._releases(p.cluster_id, now),
        )

    def snapshot(self, now: float) -> snap.Snapshot:
        models = sorted({p.gpu_model for p in self.s.pools})
        # Unlimited quota: admission never holds a job back, placement decides.
        quotas = tuple(snap.QuotaView(TEAM, m, 10**9, 0) for m in models)
        clusters = tuple(self._cluster(p, now) for p in self.s.pools)
        return snap.Snapshot(now=now, clusters=clusters, quotas=quotas)

    def run_view(self, job: sc.Job) -> snap.PendingRun:
        needs: tuple[snap.DataNeed, ...] = ()
        if job.dataset is not None:
            regions = tuple(sorted(self.replicas[job.dataset]))
            needs = (snap.DataNeed(job.dataset, self.sizes[job.dataset], regions),)
        pool = self.pinned.get(job.job_id)
        return snap.PendingRun(
            run_id=job.job_id,
            team=TEAM,
            priority=0,
            created_at=job.submit,
            workers=job.workers,
            gpus_per_worker=job.gpus_per_worker,
            cpus_per_worker=0.0,
            memory_per_worker=0.0,
            gpu_model=pool.gpu_model if pool else job.gpu_model,
            allowed_regions=(pool.region,) if pool else (),
            admitted=job.job_id in self.admitted,
            datasets=needs,
            communication=job.comm.value,
            runtime_s=job.declared,
            capacity=snap.SPOT if pool else job.capacity,
        )

    def cycle(self, now: float) -> None:
        """Phases 1-5 through the shared core, then dispatch what it placed."""
        if not self.pending:
            return
        snapshot = self.snapshot(now)
        runs = []
        for job in self.pending.values():
            run = self.run_view(job)
            if run.datasets:  # as hub.data_view.near_data
                wait = plugins_data.wait_near_data(run, snapshot.clusters)
                run = dataclasses.replace(run, wait_near_data_s=wait)
            runs.append(run)
        by_id = {r.run_id: r for r in runs}
        self.cycles += 1
        for d in cycle.schedule(snapshot, runs, self.policy):
            if d.outcome is cycle.Outcome.PLACED and d.cluster_id is not None:
                self.place(self.pending[d.run_id], by_id[d.run_id], d, now)
            elif d.outcome is cycle.Outcome.ADMITTED:
                self.admitted.add(d.run_id)


def simulate(
    scenario: sc.Scenario,
    policy_name: str,
    policy: cycle.Policy | None = None,
    *,
    restart_in_place: bool = False,
) -> Result:
    """Replay ``scenario`` under one policy of ``POLICIES`` (or ``policy``, so named).

    Deterministic: the same scenario and policy give the same result.
    """
    order = tuple(p.cluster_id for p in scenario.pools)
    policy = policy or policies_baseline.make_policy(policy_name, order)
    world = _World(scenario, policy, restart_in_place)
    jobs = sorted(scenario.jobs, key=lambda j: (j.submit, j.job_id))
    now, nxt = 0.0, 0
    while nxt < len(jobs) or world.pending or world.held:
        arrival = jobs[nxt].submit if nxt < len(jobs) else math.inf
        t = min(arrival, world.next_job_end(), world.next_copy_end(now), world.next_spot_event())
        if math.isinf(t):
            stuck = ", ".join(sorted(world.pending)[:5])
            raise RuntimeError(f"jobs {stuck} wait but no pool can ever run them")
        world.advance(t - now)
        now = t
        world.finish_copies(now)
        world.finish_jobs(now)
        world.spot_events(now)
        while nxt < len(jobs) and jobs[nxt].submit <= now:
            world.pending[jobs[nxt].job_id] = jobs[nxt]
            nxt += 1
        world.cycle(now)
    return _result(policy_name, scenario, world)


def _result(policy: str, scenario: sc.Scenario, world: _World) -> Result:
    done = sorted(world.done, key=lambda p: p.job_id)
    jct = np.array([p.finish - p.submit for p in done])
    work = {j.job_id: j for j in scenario.jobs}
    span = max(p.finish for p in done) - min(p.submit for p in done) or 1.0
    served = sum(work[p.job_id].gpus * (p.finish - p.start) for p in done)
    prices = {p.cluster_id: p.price for p in scenario.pools}
    gpu_cost = sum(
        work[p.job_id].gpus * (p.finish - p.placed) / 3600 * prices[p.cluster_id] for p in done
    )
    return Result(
        policy=policy,
        jobs=len(done),
        avg_jct=float(jct.mean()),
        p50_jct=float(np.percentile(jct, 50)),
        p99_jct=float(np.percentile(jct, 99)),
        avg_wait=float(np.mean([p.placed - p.submit for p in done])),
        avg_transfer=float(np.mean([p.start - p.placed for p in done])),
        bytes_moved=world.moved,
        egress_cost=round(world.egress_cost, 4),
        gpu_cost=round(gpu_cost + world.reclaim_cost, 2),
        utilisation=served / (scenario.total_gpus * span),
        cycles=world.cycles,
        placements=tuple(done),
        reclaims=world.reclaims,
        reclaim_cost=round(world.reclaim_cost, 2),
    )


def compare(
    seeds: list[int], policies: tuple[str, ...] = POLICIES, **shape: Any
) -> dict[str, list[Result]]:
    """Each policy on the scenario of each seed (``mr_scenario.generate(seed, **shape)``)."""
    out: dict[str, list[Result]] = {p: [] for p in policies}
    for seed in seeds:
        scenario = sc.generate(seed, **shape)
        for p in policies:
            out[p].append(simulate(scenario, p))
    return out


def mean(results: list[Result]) -> dict[str, float]:
    """Field-wise mean of the numeric fields of ``results`` (one policy, several seeds)."""
    fields = [f.name for f in dataclasses.fields(Result) if f.type in ("float", "int")]
    return {f: float(np.mean([getattr(r, f) for r in results])) for f in fields}


SPOT_WAYS = ("on-demand only", "spot, restart in place", "TauGrid (capacity any)")
"""The ways of using spot capacity ``compare_spot`` plays, all placed by TauGrid's cycle."""


def compare_spot(seeds: list[int], **shape: Any) -> dict[str, list[Result]]:
    """Each of ``SPOT_WAYS`` on the spot scenario of each seed: every job on-demand; every
    job on spot, a reclaimed one waiting for its pool; every job ``capacity: any``, a
    reclaimed one placed again anywhere (spot priced after its pool's reclaim rate)."""
    out: dict[str, list[Result]] = {w: [] for w in SPOT_WAYS}
    for seed in seeds:
        scenario = sc.generate(seed, spot=True, **shape)
        for way, capacity in zip(SPOT_WAYS, (snap.ON_DEMAND, snap.SPOT, snap.ANY), strict=True):
            jobs = tuple(dataclasses.replace(j, capacity=capacity) for j in scenario.jobs)
            played = dataclasses.replace(scenario, jobs=jobs)
            result = simulate(played, "TauGrid", restart_in_place=capacity == snap.SPOT)
            out[way].append(dataclasses.replace(result, policy=way))
    return out
