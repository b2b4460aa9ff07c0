"""The hub's process-wide context: configuration, stores, platform and data root.

Owns construction of everything a request handler or the scheduling loop needs, so
that both receive one ``Hub`` object instead of reaching for globals.

``Hub.platform`` is the *effective* platform: platform.yaml (``base_platform``) with the
teams, quotas and workspaces of the store applied (``store.tenancy``), so what the
tenancy API creates or approves is what ``render.resolve`` and the scheduler see. It is
cached; a change made through this hub invalidates it at once (``platform_changed``),
a change made by another hub process is seen within ``PLATFORM_TTL_S`` (while one request
reads an expired one again, the others get the old one instead of waiting).

``Hub.memo`` keeps what every agent's sync would otherwise read from the store anew
(guest orders, peer endpoints): reused for a short time and never across a change of
work this replica made (``notify``); another replica's change is seen within the time
given, which is no longer than an agent's long-poll.
"""

from __future__ import annotations

import dataclasses
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar, cast

import sqlalchemy as sa

from taugrid import payloads as wire
from taugrid.hub.core import leases, vault, wakeups
from taugrid.hub.metrics import metrics
from taugrid.platform import load as platform_load
from taugrid.platform import models as pm
from taugrid.scheduling import cycle
from taugrid.store import auth, clusters, db, runs, secrets, sweeps, tenancy, tracking

__all__ = ["PLATFORM_TTL_S", "Hub", "HubConfig"]

PLATFORM_TTL_S = 2.0

T = TypeVar("T")


@dataclasses.dataclass(frozen=True)
class HubConfig:
    """Knobs of one hub; defaults suit the embedded platform."""

    tau_home: Path
    database_url: str | None = None
    platform_file: Path | None = None
    lease_s: float = 30.0
    grace_s: float = 120.0
    reclaim_grace_s: float = 30.0
    """How long a job warned of a spot reclaim has to checkpoint before it is stopped."""
    cycle_s: float = 0.5
    leader_lease_s: float = 10.0
    """The leader lease of replicated hubs (PostgreSQL; ``hub.core.replica``)."""
    advertise_url: str = ""
    """This replica's URL as other replicas and ``tau admin hub status`` show it."""

    @property
    def data_root(self) -> Path:
        return Path(os.environ.get("TAU_DATA_ROOT") or self.tau_home / "data")


_JOIN_S = 10.0
"""How long ``Hub.memo`` waits for another caller's computation before its own."""


class _Flight:
    """One computation of a memo key in progress: the generation it started at and,
    once ``done``, its value (``ok``: it returned one)."""

    def __init__(self, gen: int) -> None:
        self.gen = gen
        self.done = threading.Event()
        self.value: Any = None
        self.ok = False


class Hub:
    """Stores + platform + config: what every hub component works with."""

    def __init__(self, config: HubConfig, engine: sa.Engine | None = None) -> None:
        self.config = config
        self.started_at = time.time()
        """Leases are counted from here at the earliest: an agent could not renew its
        lease while this hub was down, so a hub back after an outage gives every
        cluster one lease to sync before it loses contact (``hub.server.scheduler``)."""
        config.tau_home.mkdir(parents=True, exist_ok=True)
        url = config.database_url or db.database_url(config.tau_home)
        self.engine = engine or db.open_engine(url)
        self.runs = runs.RunStore(self.engine)
        self.clusters = clusters.ClusterStore(self.engine)
        self.leases = leases.Leases(self.clusters, config.lease_s)
        """Agents' lease renewals, batched while the app runs (``hub.core.leases``)."""
        self.auth = auth.AuthStore(self.engine)
        self.tenancy = tenancy.TenancyStore(self.engine)
        self.vault = vault.Vault(secrets.SecretStore(self.engine), config.tau_home)
        self.sweeps = sweeps.SweepStore(self.engine)
        self.tracking = tracking.TrackingStore(self.engine)
        self.base_platform: pm.Platform = (
            platform_load.load_platform(config.platform_file)
            if config.platform_file
            else platform_load.default_platform()
        )
        self.tenancy.seed(self.base_platform)
        self._platform_lock = threading.Lock()
        self._platform: pm.Platform | None = None
        self._platform_at = 0.0
        self._platform_version = 0
        """Counts ``platform_changed``: a platform read before the latest is not kept."""
        self._platform_reading = False
        self.data_root = config.data_root
        self.metrics = metrics.Metrics(self)
        self._wakeups: dict[str, wakeups.Wakeup] = {}
        self._wakeups_lock = threading.Lock()
        self._memos: dict[str, tuple[int, float, Any]] = {}
        self._memo_lock = threading.Lock()
        self._flights: dict[str, _Flight] = {}
        """Key → the computation of it in progress (one at a time: ``memo``)."""
        self._generation = 0
        """Counts ``notify`` calls: a memo computed before the latest is stale."""
        self.schedule_wakeup = threading.Event()
        """Set to run the scheduling loop now (``hub.server.scheduler`` waits on it)."""
        self.is_leader: Callable[[], bool] = lambda: True
        """Whether this replica runs the singletons now (``hub.core.replica`` sets it)."""
        self.span_joins: dict[int, tuple[str, wire.SpanJoin]] = {}
        """Spanning attempt token → (head cluster, where its guests join): memory only,
        the head's agent sends it with every sync (``hub.runs.guests``)."""
        self.guest_states: dict[tuple[str, int], tuple[str, int]] = {}
        """(guest cluster, token) → the last (state, nodes) its agent reported."""

    def wakeup(self, cluster_id: str) -> wakeups.Wakeup:
        """The flag an agent's long-poll sync waits on (set when its work changes)."""
        with self._wakeups_lock:
            found = self._wakeups.get(cluster_id)
            if found is None:
                found = self._wakeups[cluster_id] = wakeups.Wakeup()
            return found

    def notify(self, cluster_id: str | None) -> None:
        """Wake the long-poll of ``cluster_id``'s agent: new assignment or stop order."""
        with self._memo_lock:
            self._generation += 1
        if cluster_id is not None:
            self.wakeup(cluster_id).set()

    def memo(self, key: str, ttl_s: float, compute: Callable[[], T], *, work: bool = True) -> T:
        """``compute()``, reused for ``ttl_s`` seconds unless work changed since
        (``notify``; ``work=False``: the value does not depend on work, time alone).

        One computation of a key at a time: a caller that finds one in progress that
        started after the latest ``notify`` it saw waits for its value instead of
        computing it again (a fleet's syncs after a dispatch once ran the same queries
        by the dozen); a time-only value keeps serving the old one meanwhile."""
        now = time.monotonic()
        with self._memo_lock:
            gen, hit = self._generation, self._memos.get(key)
            fresh = hit is not None and (hit[0] == gen or not work) and now - hit[1] < ttl_s
            flight = self._flights.get(key)
            if hit is not None and (fresh or (flight is not None and not work)):
                value: T = hit[2]
                return value
            join = flight if flight is not None and flight.gen >= gen else None
            if join is None:
                flight = self._flights[key] = _Flight(gen)
        if join is not None:
            if join.done.wait(_JOIN_S) and join.ok:
                return cast(T, join.value)
            return compute()  # it failed or hangs: this caller's own answer
        assert flight is not None
        try:
            flight.value, flight.ok = compute(), True
        finally:
            with self._memo_lock:
                if self._flights.get(key) is flight:
                    del self._flights[key]
                last = self._memos.get(key)
                if flight.ok and (last is None or last[0] <= flight.gen):
                    self._memos[key] = (flight.gen, now, flight.value)
            flight.done.set()
        return cast(T, flight.value)

    def wake_scheduler(self) -> None:
        """Run a scheduling cycle now: capacity was freed or work was queued."""
        self.schedule_wakeup.set()

    @property
    def platform(self) -> pm.Platform:
        """platform.yaml with the store's teams, quotas and workspaces applied (cached)."""
        with self._platform_lock:
            now, cached = time.monotonic(), self._platform
            fresh = now - self._platform_at <= PLATFORM_TTL_S
            if cached is not None and (fresh or self._platform_reading):
                return cached  # expired and being read again: the old one meanwhile
            self._platform_reading, version = True, self._platform_version
        try:
            read = self.tenancy.apply(self.base_platform)
        finally:
            with self._platform_lock:
                self._platform_reading = False
        with self._platform_lock:
            if self._platform_version == version:
                self._platform, self._platform_at = read, now
        return read

    def policy(self) -> cycle.Policy:
        """The placement policy platform.yaml's ``scheduling`` section sets."""
        return cycle.policy_from(self.platform.scheduling)

    def platform_changed(self) -> None:
        """Drop the cached effective platform (after a tenancy change)."""
        with self._platform_lock:
            self._platform = None
            self._platform_version += 1
