"""Data-plane logic of the hub: datasets, replication with link budgets, the link matrix,
and explain-placement.

Owns the decisions the data API (``hub.api.data_api``) exposes:
- *replicate*: pick the source (asked for, or the complete replica with the fastest
  measured link into the destination), estimate the time, queue a transfer;
- *grant*: on each data sync of a destination agent, start queued transfers the per-link
  budget allows (``dataplane.budget``); capacity is the latest probe throughput; a
  transfer whose source replica is an fsspec URL tells the destination to read the
  object store directly (``TransferTask.src_url``); such replicas are never "served";
- *link matrix*: every region's measured inbound links, with the bandwidth active
  transfers use (utilisation);
- *explain*: a placed run's stored verdicts, or for a waiting run verdicts computed now
  on a fresh snapshot with the hub's policy (the same pure ``cycle.schedule``).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from taugrid import errors
from taugrid.dataplane import budget, objstore, wire
from taugrid.hub.core import context
from taugrid.hub.placement import snapshot
from taugrid.hub.runs import runs
from taugrid.lifecycle import states as st
from taugrid.scheduling import cycle, plugins_data
from taugrid.scheduling import snapshot as snap
from taugrid.store import data as store_data

__all__ = [
    "check_inputs",
    "data_sync",
    "explain",
    "link_matrix",
    "regions",
    "replica_path",
    "replicate",
]

Doc = dict[str, Any]


def regions(hub: context.Hub) -> list[str]:
    return [r.name for r in hub.platform.regions]


def replica_path(did: str) -> str:
    """Where a copied replica lives, relative to the destination region's data root."""
    name, _, version = did.partition("@")
    return f"datasets/{name}/{version}"


def _capacity(hub: context.Hub) -> dict[budget.Link, float]:
    """(source, destination) → measured bytes/s, from each destination's probe report."""
    out: dict[budget.Link, float] = {}
    for c in hub.clusters.all():
        for link in snap.links_from_report(c["report"]):
            out[(link.source, c["region"])] = link.throughput_bps
    return out


def _store(hub: context.Hub) -> store_data.DataStore:
    return store_data.DataStore(hub.engine)


def check_inputs(hub: context.Hub, workspace: str, datasets: list[str]) -> None:
    """A run may only read datasets registered in its own workspace (404 otherwise)."""
    s = _store(hub)
    for name in datasets:
        if s.get(store_data.dataset_id(name), [workspace]) is None:
            raise runs.NotFound(
                f"data.inputs: no dataset '{name}' in workspace {workspace}",
                f"register it there first: tau data register {name.partition('@')[0]} "
                f"--workspace {workspace} --region REGION --path PATH",
            )


def replicate(hub: context.Hub, did: str, req: wire.ReplicateRequest, by: str) -> Doc:
    ds = _store(hub).get(did)
    if ds is None:
        raise errors.UserError(f"no dataset '{did}'", "list datasets with: tau data list")
    if req.to_region not in regions(hub):
        raise errors.UserError(
            f"no region '{req.to_region}'", f"regions are: {', '.join(regions(hub))}"
        )
    if ds["state"] != "ready":
        raise errors.UserError(
            f"dataset {did} is {ds['state']}, not ready to copy",
            "wait until `tau data show` says ready (its origin agent scans it first)",
        )
    have = _store(hub).complete_regions().get(did, ())
    if req.to_region in have:
        raise errors.UserError(f"{did} already has a complete replica in {req.to_region}")
    src, est = _source(hub, ds, have, req)
    return _store(hub).request_transfer(
        did, src, req.to_region, req.to_url or replica_path(did), by, round(est, 3)
    )


def _source(
    hub: context.Hub, ds: Doc, have: tuple[str, ...], req: wire.ReplicateRequest
) -> tuple[str, float]:
    cap = _capacity(hub)
    options = [req.from_region] if req.from_region else list(have)
    if not options or (req.from_region and req.from_region not in have):
        raise errors.UserError(
            f"{ds['id']} has no complete replica in {req.from_region or 'any region'}",
            f"complete replicas: {', '.join(have) or 'none'}",
        )
    rate = {s: cap.get((s, req.to_region)) or plugins_data.DEFAULT_BPS for s in options}
    best = max(options, key=lambda s: (rate[s], s))
    return best, ds["size_bytes"] / rate[best]


def _grant(hub: context.Hub) -> None:
    """Start every queued transfer the per-link budget allows (all links, FIFO)."""
    s = _store(hub)
    active: dict[budget.Link, float] = {}
    for t in s.transfers(("active",)):
        link = (t["src_region"], t["dst_region"])
        active[link] = active.get(link, 0.0) + t["reserved_bps"]
    queued = [
        budget.Request(t["id"], (t["src_region"], t["dst_region"]))
        for t in s.transfers(("queued",))
    ]
    for g in budget.grant(queued, active, _capacity(hub), plugins_data.DEFAULT_BPS):
        if s.start_transfer(g.transfer_id, g.reserved_bps):
            hub.runs.add_event(
                None,
                "transfer_started",
                {"transfer": g.transfer_id, "reserved_bps": g.reserved_bps},
            )


def data_sync(hub: context.Hub, cluster_id: str, body: wire.DataSync) -> wire.DataTasks:
    """Apply an agent's scan results and progress; answer with its data work."""
    cluster = hub.clusters.get(cluster_id)
    if cluster is None:
        raise errors.UserError(
            f"cluster {cluster_id} is not registered", "register the agent first"
        )
    region, s = cluster["region"], _store(hub)
    for scan in body.scans:
        s.set_manifest(
            scan.dataset_id, region, scan.files, scan.size_bytes, scan.sha256, scan.error
        )
    for p in body.progress:
        if p.finished:
            s.finish_transfer(p.transfer_id, p.ok, p.bytes_done, p.rate_bps, p.error)
            hub.runs.add_event(None, "transfer_finished", p.model_dump())
        else:
            s.progress(p.transfer_id, p.bytes_done, p.rate_bps)
    _grant(hub)
    return _tasks(hub, region, s)


def _task(
    s: store_data.DataStore, t: Doc, region: str, capacity: dict[budget.Link, float]
) -> wire.TransferTask:
    """One granted transfer as the destination agent runs it; a replica that is an
    fsspec URL is read (source) or written (destination) there directly."""
    ds = s.get(t["dataset_id"]) or {}
    reps = {r["region"]: r["path"] for r in s.replicas(t["dataset_id"])}
    src, dst = reps.get(t["src_region"], ""), reps.get(region, "")
    cap = capacity.get((t["src_region"], region)) or plugins_data.DEFAULT_BPS
    return wire.TransferTask(
        transfer_id=t["id"],
        dataset_id=t["dataset_id"],
        src_region=t["src_region"],
        dest_path=replica_path(t["dataset_id"]),
        files=ds.get("files", []),
        reserved_bps=t["reserved_bps"],
        rate_limit_bps=budget.Grant(t["id"], t["reserved_bps"], cap).rate_limit_bps,
        src_url=src if objstore.is_url(src) else None,
        dest_url=dst if objstore.is_url(dst) else None,
    )


def _tasks(hub: context.Hub, region: str, s: store_data.DataStore) -> wire.DataTasks:
    capacity = _capacity(hub)
    transfers = [
        _task(s, t, region, capacity) for t in s.transfers(("active",)) if t["dst_region"] == region
    ]
    return wire.DataTasks(
        scans=[
            wire.ScanTask(dataset_id=r["dataset_id"], path=r["path"]) for r in s.scans_for(region)
        ],
        transfers=transfers,
        serve=[
            wire.ServedReplica(dataset_id=r["dataset_id"], path=r["path"])
            for r in s.replicas()
            if r["region"] == region and r["state"] == "complete" and not objstore.is_url(r["path"])
        ],
    )


def link_matrix(hub: context.Hub) -> Doc:
    """Measured links (destination's probe of each source) and their utilisation."""
    use: dict[budget.Link, float] = {}
    for t in _store(hub).transfers(("active",)):
        link = (t["src_region"], t["dst_region"])
        use[link] = use.get(link, 0.0) + t["rate_bps"]
    rows = []
    for c in hub.clusters.all():
        for peer, p in sorted((c["report"].get("probes") or {}).items()):
            bps = float(p.get("throughput_mbps", 0.0)) * 1e6 / 8
            used = use.get((peer, c["region"]), 0.0)
            rows.append(
                {
                    "src": peer,
                    "dst": c["region"],
                    "throughput_mbps": p.get("throughput_mbps"),
                    "rtt_ms": p.get("rtt_ms"),
                    "loss_pct": p.get("loss_pct"),
                    "measured_at": p.get("measured_at"),
                    "egress_cost_per_gb": p.get("egress_cost_per_gb", 0.0),
                    "transfer_mbps": round(used * 8 / 1e6, 3),
                    "utilisation": round(used / bps, 4) if bps else 0.0,
                }
            )
    return {"regions": regions(hub), "links": rows}


def explain(hub: context.Hub, run: Doc, policy: cycle.Policy) -> Doc:
    """Every cluster's filter verdict and score breakdown for ``run``, with the objective
    preset and the weights its scores were combined with."""
    spec = run["spec"]
    objective = policy.objective_of(spec.get("objective"))
    weights = policy.weights_for(
        spec.get("objective"), spec.get("communication"), spec.get("capacity")
    )
    attempts = hub.runs.attempts_for_run(run["id"])
    waiting = run["state"] in (st.RunState.QUEUED.value, st.RunState.ADMITTED.value)
    if attempts and not waiting:
        a = attempts[-1]
        placement = a.get("placement") or {}
        verdicts = hub.runs.attempt_verdicts(a["token"])
        return {
            "run": run["id"],
            "state": run["state"],
            "source": f"stored at placement of attempt {a['number']}",
            "cluster": placement.get("cluster"),
            "reason": placement.get("reason", ""),
            "objective": placement.get("objective", objective),
            "weights": placement.get("weights", weights),
            "verdicts": verdicts,
            "nodes": placement.get("nodes", []),
            "landed": a.get("nodes") or [],
            "guests": placement.get("guests", []),
            "data": {v["cluster_id"]: _from_score(v, policy) for v in verdicts if v.get("ok")},
        }
    return {"objective": objective} | _explain_now(hub, run, policy, weights)


def _from_score(verdict: Doc, policy: cycle.Policy) -> Doc:
    """The transfer estimate a stored data score stands for (the score's inverse)."""
    scorer = next((x for x in policy.scorers if x.name == "data"), None)
    score = verdict.get("scores", {}).get("data")
    if not isinstance(scorer, plugins_data.DataAffinityScore) or not score:
        return {}
    return {"seconds": round(scorer.ref_s * (100.0 / score - 1.0), 3)}


def _explain_now(hub: context.Hub, run: Doc, policy: cycle.Policy, weights: Doc) -> Doc:
    d, view, now_view = snapshot.probe(hub, run, policy)
    data = {
        c.cluster_id: dataclasses.asdict(plugins_data.estimate(view, c)) for c in now_view.clusters
    }
    return {
        "run": run["id"],
        "state": run["state"],
        "source": "computed now (the run is waiting)",
        "cluster": d.cluster_id,
        "reason": d.reason,
        "weights": weights,
        "verdicts": [dataclasses.asdict(v) for v in d.verdicts],
        "data": data,
        "wait_near_data_s": view.wait_near_data_s,
        "guests": [{"cluster": c, "workers": len(n), "nodes": list(n)} for c, n in d.guests],
    }
