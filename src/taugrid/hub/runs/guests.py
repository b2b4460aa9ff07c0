"""A spanning attempt's guest clusters: what the hub asks of them and hears back.

A span (``scheduling.spanning``) runs as **one Ray cluster**. Its attempt belongs to the
head's cluster (``attempts.cluster_id``, which runs the job as any other); its other
worker groups are *guests* of other clusters, recorded in the attempt's placement:
``placement["guests"] = [{"cluster", "workers", "nodes"}]`` (``nodes``: where the cycle
bound each guest worker, for the snapshot's ledger).

- *Room*: while the attempt is active, each guest cluster's snapshot takes room for its
  group (``reserve``): the guest nodes join the head's Ray cluster, so the guest
  cluster's own report never shows them busy. The head cluster's ledger counts only
  the head's share (``head_workers``).
- *Join*: the head's agent sends a ``SpanJoin`` (its GCS address and Ray token) with
  every sync while the attempt is active; the hub keeps the latest in memory
  (``Hub.span_joins``) and never stores the token. After a hub restart the next sync of
  the head's agent brings it back.
- *Orders*: every sync of a guest cluster's agent is answered with the guest orders it
  holds now (``orders``, declarative): the agent starts the nodes once the address is
  known and stops the nodes of an order no longer listed (the attempt ended).
- *Status*: a guest agent's ``GuestStatus`` changes become events (``guest_joined``,
  ``guest_failed``; a failure also warns on the *Scheduled* phase).

A guest group that fails to join, or whose cluster is lost, never ends the attempt: a
span is an async/none run, which goes on with the workers it has (it shrinks).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from taugrid import payloads as wire
from taugrid.hub.core import context
from taugrid.hub.runs import runs
from taugrid.lifecycle import phases as ph
from taugrid.lifecycle import states as st
from taugrid.scheduling import cycle

ORDERS_TTL_S = 1.0
"""How long the syncs of a fleet's agents share one reading of the spans (a change this
replica makes is seen at once; the agents' long-poll is as long)."""

__all__ = [
    "ORDERS_TTL_S",
    "apply_joins",
    "apply_status",
    "clusters_of",
    "head_workers",
    "held",
    "held_by_cluster",
    "orders",
    "placement_doc",
    "workers_of",
]

_ACTIVE = {s.value for s in st.ACTIVE_ATTEMPT_STATES}
Held = tuple[dict[str, Any], dict[str, Any], dict[str, Any]]
"""(attempt row, run row, its guest group on the cluster asked about)."""


def placement_doc(d: cycle.Decision) -> dict[str, Any]:
    """The placement fields of a spanning decision (``{}`` for one cluster)."""
    if not d.guests:
        return {}
    groups = [{"cluster": c, "workers": len(nodes), "nodes": list(nodes)} for c, nodes in d.guests]
    return {"guests": groups}


def clusters_of(placement: dict[str, Any] | None) -> list[str]:
    """The guest clusters of an attempt's placement (empty: not a span)."""
    return [str(g["cluster"]) for g in (placement or {}).get("guests") or ()]


def workers_of(placement: dict[str, Any] | None) -> dict[str, int]:
    """Guest cluster → the workers its group holds (empty: not a span)."""
    return {str(g["cluster"]): int(g["workers"]) for g in (placement or {}).get("guests") or ()}


def head_workers(placement: dict[str, Any] | None, workers: int) -> int:
    """How many of a run's ``workers`` its head cluster holds."""
    return workers - sum(int(g["workers"]) for g in (placement or {}).get("guests") or ())


def held_by_cluster(hub: context.Hub) -> dict[str, list[Held]]:
    """Guest cluster → the active spanning attempts with a group there (one query)."""
    spans = [
        a
        for a in hub.runs.unreleased_spans()
        if a["state"] in _ACTIVE and clusters_of(a["placement"])
    ]
    by_id = hub.runs.get_runs([a["run_id"] for a in spans])
    out: dict[str, list[Held]] = {}
    for a in spans:
        run = by_id.get(a["run_id"])
        for group in a["placement"]["guests"]:
            if run is not None and group["cluster"] != a["cluster_id"]:
                out.setdefault(str(group["cluster"]), []).append((a, run, group))
    return out


def held(hub: context.Hub, cluster_id: str) -> list[Held]:
    """Active spanning attempts of other clusters with a guest group on ``cluster_id``
    (``held_by_cluster`` shared by every sync for ``ORDERS_TTL_S``: ``Hub.memo``)."""
    by_cluster = hub.memo("guests.held_by_cluster", ORDERS_TTL_S, lambda: held_by_cluster(hub))
    return by_cluster.get(cluster_id, [])


def orders(hub: context.Hub, cluster_id: str) -> list[wire.GuestOrder]:
    """Every guest order ``cluster_id`` holds now (declarative: the agent reconciles)."""
    out = []
    for a, run, group in held(hub, cluster_id):
        if a["revoked"] or run["current_token"] != a["token"]:
            continue
        _head, join = hub.span_joins.get(a["token"], ("", None))
        spec = run["spec"]
        out.append(
            wire.GuestOrder(
                token=a["token"],
                run_id=run["id"],
                head_cluster=a["cluster_id"],
                workers=int(group["workers"]),
                gpus_per_worker=float(spec["gpus_per_worker"]),
                cpus_per_worker=float(spec["cpus_per_worker"]),
                memory_per_worker=int(spec["memory_per_worker_bytes"]),
                gpu_model=run["gpu_model"] or spec.get("gpu_model"),
                address=join.address if join else None,
                auth_token=join.auth_token if join else None,
            )
        )
    return out


def apply_joins(hub: context.Hub, cluster_id: str, joins: Sequence[wire.SpanJoin]) -> None:
    """Keep the join addresses of the spans ``cluster_id`` heads (and forget those it no
    longer sends: ended); wake the guests' long-polls when one is new or has moved."""
    sent = set()
    for j in joins:
        a = hub.runs.get_attempt(j.token)
        if a is None or a["cluster_id"] != cluster_id or a["state"] not in _ACTIVE:
            continue  # only the head's own agent says where its cluster is
        sent.add(j.token)
        if hub.span_joins.get(j.token) != (cluster_id, j):
            hub.span_joins[j.token] = (cluster_id, j)
            for guest in clusters_of(a["placement"]):
                hub.notify(guest)
    for token, (head, _j) in list(hub.span_joins.items()):
        if head == cluster_id and token not in sent:
            del hub.span_joins[token]


def apply_status(hub: context.Hub, cluster_id: str, statuses: Sequence[wire.GuestStatus]) -> None:
    """Events (and a *Scheduled* warning) for what changed in a guest agent's groups."""
    for s in statuses:
        a = hub.runs.get_attempt(s.token)
        if a is None or cluster_id not in clusters_of(a["placement"]):
            continue
        key = (cluster_id, s.token)
        if hub.guest_states.get(key) == (s.state, s.nodes):
            continue
        hub.guest_states[key] = (s.state, s.nodes)
        detail = {"token": s.token, "cluster": cluster_id, "nodes": s.nodes}
        if s.state == "joined":
            hub.runs.add_event(a["run_id"], "guest_joined", detail)
        elif s.state == "failed":
            hub.runs.add_event(a["run_id"], "guest_failed", {**detail, "message": s.message})
            why = f"the worker group on {cluster_id} did not join: {s.message}; the run goes on"
            runs.phase(
                hub, a["run_id"], ph.Phase.SCHEDULED, ph.PhaseStatus.WARNING, "guest agent", why
            )
