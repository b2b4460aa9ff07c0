"""Run operations of the hub: submit, cancel, resume, and the views users read.

Owns the transitions a *user* triggers (the scheduler and agents own the rest):
submit (resolve + capacity check + durable store + record), cancel (queued runs end at
once; placed/running runs go to CANCELLING until the agent reports the attempt stopped
and released), resume (a terminal run gets a new attempt that starts from its latest
checkpoint). Every user error is a ``UserError`` with a hint.
"""

from __future__ import annotations

import base64
import secrets
import time
from typing import Any

from taugrid.errors import UserError
from taugrid.hub.core import context
from taugrid.lifecycle import phases as ph
from taugrid.lifecycle import reasons
from taugrid.lifecycle import states as st
from taugrid.payloads import SubmitRequest
from taugrid.record import checkpoints, layout, s3
from taugrid.record import store as recordstore
from taugrid.record.run import RunRecord
from taugrid.render import resolve as rs
from taugrid.render import runspec
from taugrid.spec import load as spec_load
from taugrid.spec import models as sm
from taugrid.spec import yamlpos

__all__ = [
    "NotFound",
    "cancel",
    "close_scheduled",
    "code_of",
    "detail",
    "record_of",
    "resume",
    "submit",
]

_MAX_CODE_BYTES = 100 * 2**20


class NotFound(UserError):
    """A run, cluster or file that does not exist (HTTP 404)."""


def _config(req: SubmitRequest) -> sm.TauConfig:
    config = spec_load.parse_tau_yaml(req.tau_yaml, req.filename)
    if req.workspace:
        policy = config.policy.model_copy(update={"workspace": req.workspace})
        config = config.model_copy(update={"policy": policy})
    return config


def check_capacity(hub: context.Hub, spec: runspec.RunSpec) -> None:
    image = rs.named_image({"image": spec.image, "provenance": spec.provenance})
    kube = any(c.backend == "kubernetes" for r in hub.platform.regions for c in r.clusters)
    if image and not kube:
        raise UserError(
            f"runtime.image {image}: no region of this platform runs jobs in images (its "
            "Ray regions run them in their nodes' Python environment)",
            "remove runtime.image (list Python packages in runtime.pip instead), or ask "
            "the platform team for a Kubernetes region",
        )
    have = hub.platform.total_gpus(spec.gpu_model)
    if spec.total_gpus > have:
        raise UserError(
            f"run asks for {spec.total_gpus} GPUs ({spec.workers} workers x {spec.gpus_per_worker}"
            f" {spec.gpu_model or 'any model'}) but the platform has {have}",
            "lower compute.workers or compute.gpus, or ask an admin for capacity",
        )


def default_workspace(req: SubmitRequest, scoped: list[str] | None) -> SubmitRequest:
    """A submission naming no workspace goes to the caller's only workspace, if it has one.

    ``scoped`` is what the token may see (None: every workspace, as for admins). The
    platform's ``default_workspace`` applies otherwise (``render.resolve``).
    """
    if req.workspace or scoped is None or len(scoped) != 1:
        return req
    if _config(req).policy.workspace is not None:
        return req
    return req.model_copy(update={"workspace": scoped[0]})


def resolve_request(
    hub: context.Hub, req: SubmitRequest, *, sweep: bool = False
) -> runspec.RunSpec:
    """Parse, resolve and capacity-check a submission (no side effects). A tau.yaml with a
    ``sweep`` section is refused unless ``sweep`` (``hub.runs.sweeps`` resolves its trials)."""
    config = _config(req)
    if config.sweep is not None and not sweep:
        raise UserError(
            f"{req.filename} declares a sweep (its sweep section): it is a set of runs",
            f"submit it with: tau sweep submit (or remove the sweep section from {req.filename})",
        )
    lines = yamlpos.key_lines(req.tau_yaml, req.filename)  # provenance: tau.yaml:LINE
    spec = rs.resolve(config, hub.platform, source=req.filename, lines=lines)
    check_capacity(hub, spec)
    return spec


def submit(
    hub: context.Hub,
    req: SubmitRequest,
    actor: str,
    spec: runspec.RunSpec | None = None,
    run_id: str | None = None,
) -> dict[str, Any]:
    """Store a new run durably and create its record; returns the run row. ``spec``:
    the request already resolved and adjusted by the caller (``hub.serving.serving``,
    ``hub.runs.sweeps``); ``run_id``: the caller's (a sweep trial's: the same ID twice is
    refused by the store, so a trial is never submitted twice)."""
    spec = spec or resolve_request(hub, req)
    hub.vault.check(spec.workspace, spec.secrets)  # names only: values stay sealed
    code = code_of(req)
    now = time.time()
    run_id = run_id or f"{spec.name}-{secrets.token_hex(3)}"
    store = record_store(hub, spec.workspace)
    store.check()  # a missing bucket or refused credentials: a clear error, nothing stored
    rec = RunRecord(store, spec.workspace, run_id)
    rec.create(req.tau_yaml)
    if code:
        rec.write_bytes(layout.CODE_ARCHIVE, code)
    row = {
        "id": run_id,
        "name": spec.name,
        "workspace": spec.workspace,
        "team": spec.team,
        "state": st.RunState.QUEUED.value,
        "reason": "waiting for admission",
        "priority": spec.priority_value,
        "gpus": spec.total_gpus,
        "gpu_model": spec.gpu_model,
        "spec": spec.model_dump(mode="json"),
        "config_yaml": req.tau_yaml,
        "cluster_id": None,
        "current_token": None,
        "attempts_used": 0,
        "quota_held": False,
        "cancel_requested": False,
        "resume_from": None,
        "not_before": 0.0,
        "created_at": now,
        "updated_at": now,
        "source": req.source.model_dump() if req.source else None,
    }
    phases = ph.initial_phases(now)
    phases[ph.Phase.SUBMITTED] = ph.PhaseRecord(
        ph.Phase.SUBMITTED, ph.PhaseStatus.DONE, "hub store", f"stored by {actor}", now
    )
    hub.runs.insert_run(row, phases.values())
    write_run_json(hub, run_id)
    return row


def code_of(req: SubmitRequest) -> bytes:
    """The submission's zipped working directory (empty when none), within the limit."""
    code = base64.b64decode(req.code_zip_b64) if req.code_zip_b64 else b""
    if len(code) > _MAX_CODE_BYTES:
        raise UserError(
            f"working directory is {len(code) / 2**20:.0f} MiB zipped (limit 100 MiB)",
            "add large files to run.excludes and read data through data.inputs",
        )
    return code


def find(hub: context.Hub, ref: str, workspaces: list[str] | None) -> dict[str, Any]:
    run = hub.runs.find_run(ref, workspaces)
    if run is None:
        raise NotFound(f"no run named '{ref}'", "list runs with: tau run list")
    return run


def record_store(hub: context.Hub, workspace: str) -> recordstore.RecordStore:
    """The record store of ``workspace`` (platform.yaml ``records``, or the workspace's)."""
    return s3.cached_store(hub.platform.records_for(workspace), hub.data_root)


def records_for_agent(hub: context.Hub, workspace: str) -> dict[str, Any]:
    """The workspace's record store as agents open it: a local store's url is its
    directory (the embedded platform: one machine), credentials stay env var names."""
    spec = hub.platform.records_for(workspace)
    if not spec.url:
        spec = spec.model_copy(update={"url": str(hub.data_root)})
    return spec.model_dump(mode="json")


def record_of(hub: context.Hub, run: dict[str, Any]) -> RunRecord:
    return RunRecord(record_store(hub, run["workspace"]), run["workspace"], run["id"])


def detail(hub: context.Hub, run: dict[str, Any]) -> dict[str, Any]:
    """Everything ``tau run status`` shows: run, phases in order, attempts."""
    both = hub.runs.run_with_attempts(run["id"])
    run, attempts = both if both is not None else (run, [])
    phases = hub.runs.phases(run["id"])
    out = {k: v for k, v in run.items() if k != "config_yaml"}
    out["phases"] = [
        {
            "phase": p.value,
            "status": phases[p].status.value,
            "source": phases[p].source,
            "reason": phases[p].reason,
            "ts": phases[p].ts,
            "look_at": ph.look_at(p, phases[p].source),
        }
        for p in ph.Phase
        if p in phases
    ]
    out["attempts"] = [{**a, "summary": _attempt_summary(a)} for a in attempts]
    out["record_dir"] = record_of(hub, run).location
    out["gaps"] = [e["payload"] for e in hub.runs.events(run["id"], kind="log_gap")]
    return out


def _attempt_summary(a: dict[str, Any]) -> str:
    """The attempt's reason in one line for a table cell (the full text stays in
    ``reason`` and the run's events)."""
    text = a.get("reason") or ""
    failed = a.get("failure_kind") or a.get("exit_code") not in (None, 0)
    if failed and text:
        return reasons.summary(a.get("failure_kind") or a["state"], text, a.get("exit_code"))
    return " ".join(text.split())


def write_run_json(hub: context.Hub, run_id: str) -> None:
    """Rewrite ``run.json`` from the store (spec, hashes, placements, attempts, phases)."""
    run = hub.runs.get_run(run_id)
    if run is None:
        return
    doc = detail(hub, run)
    doc["tau_yaml"] = run["config_yaml"]
    rec = record_of(hub, run)
    rec.write_json(layout.RUN_JSON, doc)
    rec.write_events(hub.runs.events(run_id))


def _set(
    hub: context.Hub,
    run_id: str,
    phase: ph.Phase,
    status: ph.PhaseStatus,
    source: str,
    reason: str,
    *,
    reset: bool = False,
) -> None:
    hub.runs.set_phase(
        run_id, ph.PhaseRecord(phase, status, source, reason, time.time()), reset=reset
    )


def cancel(hub: context.Hub, run: dict[str, Any], actor: str) -> dict[str, Any]:
    """Cancel a run; queued runs end now, placed/running ones once the agent stops them."""
    state = st.RunState(run["state"])
    if state in st.TERMINAL_RUN_STATES:
        return run
    if run["current_token"] is None or state in (st.RunState.QUEUED, st.RunState.ADMITTED):
        hub.runs.update_run(
            run["id"],
            state=st.RunState.CANCELLED.value,
            quota_held=False,
            cancel_requested=True,
            reason=f"cancelled by {actor}",
            event="cancelled",
        )
        _set(
            hub,
            run["id"],
            ph.Phase.COMPLETED,
            ph.PhaseStatus.SKIPPED,
            "user",
            "cancelled while queued",
        )
        _set(
            hub,
            run["id"],
            ph.Phase.RELEASED,
            ph.PhaseStatus.DONE,
            "hub",
            "quota released; no GPUs were allocated",
        )
        _set(hub, run["id"], ph.Phase.ARTIFACTS_SAVED, ph.PhaseStatus.SKIPPED, "hub", "cancelled")
        finish_record(hub, run["id"])
    else:
        hub.runs.update_run(
            run["id"],
            state=st.RunState.CANCELLING.value,
            cancel_requested=True,
            reason=f"cancel requested by {actor}",
            event="cancel_requested",
        )
        hub.notify(run["cluster_id"])
    return hub.runs.get_run(run["id"]) or run


def resume(hub: context.Hub, run: dict[str, Any], actor: str) -> dict[str, Any]:
    """Queue a new attempt of a finished run; it starts from the latest checkpoint."""
    if st.RunState(run["state"]) not in st.TERMINAL_RUN_STATES:
        raise UserError(
            f"run {run['id']} is {run['state']}; only finished runs can be resumed",
            f"wait for it, or cancel it first: tau run cancel {run['id']}",
        )
    ckpt = latest_checkpoint(hub, run)
    hub.runs.update_run(
        run["id"],
        state=st.RunState.QUEUED.value,
        cancel_requested=False,
        reason="resumed; waiting for admission",
        resume_from=ckpt,
        not_before=0.0,
        event="resumed",
    )
    record_of(hub, run).reopen()
    for p in (ph.Phase.ADMITTED, *ph.ATTEMPT_PHASES):
        _set(hub, run["id"], p, ph.PhaseStatus.PENDING, "user", f"resumed by {actor}", reset=True)
    write_run_json(hub, run["id"])
    return hub.runs.get_run(run["id"]) or run


def latest_checkpoint(hub: context.Hub, run: dict[str, Any]) -> str | None:
    """The highest complete ``step-*`` folder of the run's checkpoints, if any."""
    rec = record_of(hub, run)
    local = rec.dir
    if local is None:  # an object store: the newest step whose marker was uploaded
        if run["spec"].get("checkpoint_path"):
            return None
        listed = rec.store.list(rec.key(layout.CHECKPOINTS_DIR))
        return checkpoints.latest_listed([path for path, _size in listed])
    root = checkpoints.checkpoint_root(local, run["spec"].get("checkpoint_path"))
    return checkpoints.latest_name(root)


def finish_record(hub: context.Hub, run_id: str) -> None:
    """Final ``run.json`` then ``COMPLETE`` (written last: the record is whole) — not while
    *Artifacts saved* is active (an upload waits for the object store: ``hub.runs.results``)."""
    run = hub.runs.get_run(run_id)
    if run is None:
        return
    write_run_json(hub, run_id)
    saved = hub.runs.phases(run_id).get(ph.Phase.ARTIFACTS_SAVED)
    if saved is None or saved.status is not ph.PhaseStatus.ACTIVE:
        record_of(hub, run).complete()


def close_scheduled(hub: context.Hub, run_id: str, state: st.RunState) -> None:
    """An attempt that ended before the agent reported it running leaves Scheduled active
    ("waiting for resources"): close it, done when the run succeeded, else skipped."""
    rec = hub.runs.phases(run_id).get(ph.Phase.SCHEDULED)
    if rec is None or rec.status is not ph.PhaseStatus.ACTIVE:
        return
    if state is st.RunState.SUCCEEDED:
        _set_phase(hub, run_id, ph.PhaseStatus.DONE, "ray", "ran to completion")
    else:
        _set_phase(hub, run_id, ph.PhaseStatus.SKIPPED, "hub", f"run {state.value}")


def _set_phase(
    hub: context.Hub, run_id: str, status: ph.PhaseStatus, source: str, reason: str
) -> None:
    hub.runs.set_phase(
        run_id, ph.PhaseRecord(ph.Phase.SCHEDULED, status, source, reason, time.time())
    )


def phase(
    hub: context.Hub, run_id: str, p: ph.Phase, status: ph.PhaseStatus, source: str, reason: str
) -> None:
    """Record one phase of a run as of now (the hub's modules all set phases through this)."""
    hub.runs.set_phase(run_id, ph.PhaseRecord(p, status, source, reason, time.time()))
