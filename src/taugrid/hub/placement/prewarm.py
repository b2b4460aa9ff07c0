"""Runtime pre-warm on the hub side: agents' runtime statuses in, prepare hints out.

*In* (``apply``): each ``payloads.RuntimeStatus`` an agent sends becomes a run event
per waiting run (``runtime_preparing`` / ``runtime_ready`` with ``seconds`` /
``runtime_failed`` with the reason) — or one cluster event when no run waits; an
agent can only write events of runs that wait or run on its cluster — and,
for a run already placed on that cluster, the reason of its Scheduled phase, so
``tau run status`` shows the preparation while it happens.

*Out* (``hints``): the ``PrepareHint`` list of a cluster's sync reply — the runtimes of
queued or admitted runs whose likely cluster (``scheduling.prewarm.likely_cluster``) is
this one and where the runtime is not yet warm, so it is built while they wait for
GPUs. Hints are computed for all clusters at once at most every ``HINT_TTL_S``.
"""

from __future__ import annotations

import threading
import time
import weakref
from typing import Any

from taugrid import payloads as wire
from taugrid.dataplane import runtimes
from taugrid.hub.core import context
from taugrid.hub.placement import snapshot
from taugrid.lifecycle import phases as ph
from taugrid.lifecycle import states as st
from taugrid.scheduling import prewarm as likely

__all__ = ["HINT_TTL_S", "apply", "hints"]

HINT_TTL_S = 2.0

_PLACED = {st.RunState.PLACED.value}
_WAITING = {st.RunState.QUEUED.value, st.RunState.ADMITTED.value}


def apply(hub: context.Hub, cluster_id: str, statuses: list[wire.RuntimeStatus]) -> None:
    """Record each status change as events and, for placed runs, the Scheduled reason."""
    for s in statuses:
        doc: dict[str, Any] = {"cluster": cluster_id, "key": s.key, "pip": s.pip}
        if s.seconds is not None:
            doc["seconds"] = s.seconds
        if s.message:
            doc["message"] = s.message
        mine = [
            r
            for r in map(hub.runs.get_run, sorted(set(s.run_ids)))
            if r and _concerns(hub, r, cluster_id)
        ]
        if not mine:
            hub.runs.add_event(None, f"runtime_{s.state}", doc)
        for run in mine:
            hub.runs.add_event(run["id"], f"runtime_{s.state}", doc)
            _scheduled_reason(hub, run, cluster_id, s)


def _current_attempt(hub: context.Hub, run: dict[str, Any]) -> dict[str, Any] | None:
    token = run["current_token"]
    return hub.runs.get_attempt(token) if token is not None else None


def _concerns(hub: context.Hub, run: dict[str, Any], cluster_id: str) -> bool:
    """A run an agent may report about: waiting (hints), or its attempt is on that cluster."""
    if run["state"] in _WAITING:
        return True
    a = _current_attempt(hub, run)
    return a is not None and a["cluster_id"] == cluster_id


def _scheduled_reason(
    hub: context.Hub, run: dict[str, Any], cluster_id: str, s: wire.RuntimeStatus
) -> None:
    a = _current_attempt(hub, run) if run["state"] in _PLACED else None
    if a is None or a["cluster_id"] != cluster_id or a["state"] != st.AttemptState.ASSIGNED.value:
        return
    run_id = run["id"]
    pip = ", ".join(s.pip)
    if s.state == "preparing":
        why = f"preparing runtime (pip: {pip}) on {cluster_id} before submitting"
    elif s.state == "ready":
        why = f"runtime ready on {cluster_id} in {s.seconds or 0:.1f}s (pip: {pip}); submitting"
    else:
        why = s.message or "runtime preparation failed"
    status = ph.PhaseStatus.FAILED if s.state == "failed" else ph.PhaseStatus.ACTIVE
    rec = ph.PhaseRecord(ph.Phase.SCHEDULED, status, "agent", why, time.time())
    hub.runs.set_phase(run_id, rec)


class _Hints:
    """The latest hints per cluster, recomputed at most every ``HINT_TTL_S``."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.at = 0.0
        self.by_cluster: dict[str, list[wire.PrepareHint]] = {}


_CACHE: weakref.WeakKeyDictionary[context.Hub, _Hints] = weakref.WeakKeyDictionary()
_CACHE_LOCK = threading.Lock()


def hints(hub: context.Hub, cluster_id: str) -> list[wire.PrepareHint]:
    """Runtimes this cluster should prepare now for runs that wait to run there."""
    with _CACHE_LOCK:
        cache = _CACHE.setdefault(hub, _Hints())
    with cache.lock:
        now = time.time()
        if now - cache.at >= HINT_TTL_S:
            cache.by_cluster, cache.at = _compute(hub, now), now
        return list(cache.by_cluster.get(cluster_id, ()))


def _compute(hub: context.Hub, now: float) -> dict[str, list[wire.PrepareHint]]:
    waiting = [(r, runtimes.runtime_key(r["spec"])) for r in hub.runs.waiting_runs()]
    keyed = [(r, k) for r, k in waiting if k is not None]
    if not keyed:
        return {}
    now_view = snapshot.build(hub, now)
    warm = {c.cluster_id: set(c.warm_runtimes) for c in now_view.clusters}
    policy = hub.policy()
    out: dict[str, dict[str, wire.PrepareHint]] = {}
    for run, key in keyed:
        where = likely.likely_cluster(snapshot.pending_view(run, hub), now_view, policy)
        if where is None or key in warm.get(where, ()):
            continue
        hint = out.setdefault(where, {}).setdefault(
            key, wire.PrepareHint(key=key, pip=[str(p) for p in run["spec"].get("pip", ())])
        )
        hint.run_ids.append(run["id"])
    return {c: list(h.values()) for c, h in out.items()}
