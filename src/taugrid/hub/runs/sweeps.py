"""Sweeps on the hub: submit, advance every scheduling cycle, cancel, and the leaderboard.

Owns the life of a sweep (``store.sweeps``); the rules it applies are the pure core's
(``scheduling.sweeps``). A trial is an ordinary run, submitted through ``runs.submit``:
admitted under the workspace's quota like any run, retried by its own ``resilience``,
placed, fenced and resumed as runs are. ``advance`` (the leader's scheduler, every
cycle) stops trials that fall behind, submits the next trials while fewer than
``parallel`` are unfinished, and ends the sweep once every trial has ended, registering
the best trial's model when ``sweep.model`` names one. Nothing of a sweep lives in
memory: a hub that restarts goes on from the tables. Trial ``i`` of sweep ``S`` is run
``S-t<i>``: a hub that crashed between submitting a trial's run and recording the trial
finds the run and records it, and the store refuses the same run ID twice.
"""

from __future__ import annotations

import base64
import json
import logging
import secrets
import time
from typing import Any

from taugrid import payloads as wire
from taugrid.errors import UserError
from taugrid.hub.core import context
from taugrid.hub.runs import registry, runs
from taugrid.lifecycle import states as st
from taugrid.record import jobenv
from taugrid.render import naming, runspec
from taugrid.scheduling import sweeps as core
from taugrid.spec import load as spec_load
from taugrid.spec import sweep as ss

__all__ = ["advance", "cancel", "detail", "find", "preview", "submit"]

log = logging.getLogger(__name__)
Row = dict[str, Any]
RUNNING, SUCCEEDED, FAILED, CANCELLED = "running", "succeeded", "failed", "cancelled"
_TRIAL_NAME_ROOM = 5  # "-t999"


def _sweep_spec(req: wire.SubmitRequest) -> ss.SweepSpec:
    sweep = spec_load.parse_tau_yaml(req.tau_yaml, req.filename).sweep
    if sweep is None:
        raise UserError(
            f"{req.filename} has no sweep section",
            "add one (docs/sweeps.md), or submit it as a single run: tau run submit",
        )
    return sweep


def preview(hub: context.Hub, req: wire.SubmitRequest) -> tuple[runspec.RunSpec, ss.SweepSpec]:
    """Parse and resolve a sweep's tau.yaml as its trials will be (no side effects)."""
    spec = runs.resolve_request(hub, req, sweep=True)
    sweep = _sweep_spec(req)
    hub.vault.check(spec.workspace, spec.secrets)
    return spec, sweep


def submit(hub: context.Hub, req: wire.SubmitRequest, actor: str) -> Row:
    """Store a new sweep; its first trials are submitted by the next scheduling cycle."""
    spec, sweep = preview(hub, req)
    code = runs.code_of(req)
    now, sweep_id = time.time(), f"{spec.name}-{secrets.token_hex(3)}"
    row: Row = {
        "id": sweep_id,
        "name": spec.name,
        "workspace": spec.workspace,
        "state": RUNNING,
        "reason": f"{sweep.budget()} trials, {sweep.parallel} at a time",
        "spec": sweep.model_dump(mode="json"),
        "tau_yaml": req.tau_yaml,
        "filename": req.filename,
        "code": code or None,
        "source": req.source.model_dump() if req.source else None,
        "model": None,
        "created_by": actor,
        "created_at": now,
        "updated_at": now,
    }
    hub.sweeps.create(row)
    hub.auth.audit(actor, "sweep.submit", sweep_id, {"trials": sweep.budget()})
    return {k: v for k, v in row.items() if k != "code"}


def find(hub: context.Hub, ref: str, workspaces: list[str] | None) -> Row:
    """A sweep by ID, or the newest one of that name the caller may see."""
    sw = hub.sweeps.get(ref)
    if sw is None:
        named = [s for s in hub.sweeps.listing(workspaces) if s["name"] == ref]
        sw = named[0] if named else None
    if sw is None or (workspaces is not None and sw["workspace"] not in workspaces):
        raise runs.NotFound(f"no sweep named '{ref}'", "list sweeps with: tau sweep list")
    return sw


def cancel(hub: context.Hub, sw: Row, actor: str) -> Row:
    """Stop the sweep: no new trial, and every unfinished trial is cancelled."""
    if sw["state"] != RUNNING:
        return sw
    hub.sweeps.update(sw["id"], state=CANCELLED, reason=f"cancelled by {actor}")
    for t in hub.sweeps.trials(sw["id"]):
        run = hub.runs.get_run(t["run_id"])
        if run is not None:
            runs.cancel(hub, run, actor)
    hub.auth.audit(actor, "sweep.cancel", sw["id"], {})
    return hub.sweeps.get(sw["id"]) or sw


# -- every scheduling cycle (the leader) ---------------------------------------------
def advance(hub: context.Hub) -> None:
    """Judge, top up and finish every running sweep; one that fails is logged, not fatal."""
    for sw in hub.sweeps.listing(None, active_only=True):
        try:
            _advance(hub, sw)
        except UserError as exc:  # its trials can no longer be submitted (platform changed)
            hub.sweeps.update(sw["id"], state=FAILED, reason=f"{exc.message} ({exc.hint})")
        except Exception:
            log.exception("sweep %s: advancing failed; tried again next cycle", sw["id"])


def _advance(hub: context.Hub, sw: Row) -> None:
    spec = ss.SweepSpec.model_validate(sw["spec"])
    trials = hub.sweeps.trials(sw["id"])
    by_run = hub.runs.get_runs([t["run_id"] for t in trials])
    views = _views(hub, spec, trials, by_run)
    for d in core.judge(spec, views):
        _apply(hub, sw, trials[d.index], by_run.get(trials[d.index]["run_id"]), d)
    unfinished = sum(1 for t in trials if _unfinished(by_run.get(t["run_id"])))
    n = len(trials)
    while n < spec.budget() and unfinished < spec.parallel:
        _submit_trial(hub, sw, spec, n)
        n, unfinished = n + 1, unfinished + 1
    if n >= spec.budget() and unfinished == 0:
        _finish(hub, sw, spec, hub.sweeps.trials(sw["id"]))


def _unfinished(run: Row | None) -> bool:
    return run is not None and st.RunState(run["state"]) not in st.TERMINAL_RUN_STATES


def _views(
    hub: context.Hub, spec: ss.SweepSpec, trials: list[Row], by_run: dict[str, Row]
) -> list[core.Trial]:
    points: dict[str, list[core.Point]] = {}
    if spec.metric is not None and trials:
        points = hub.runs.metric_points([t["run_id"] for t in trials], spec.metric.name)
    return [
        core.Trial(
            index=t["idx"],
            active=_unfinished(by_run.get(t["run_id"])) and not t["stopped"],
            points=tuple(points.get(t["run_id"], ())),
            rung=t["rung"],
        )
        for t in trials
    ]


def _apply(hub: context.Hub, sw: Row, trial: Row, run: Row | None, d: core.Decision) -> None:
    if not d.stop:
        hub.sweeps.update_trial(sw["id"], trial["idx"], rung=max(d.rung, trial["rung"]))
        return
    hub.sweeps.update_trial(sw["id"], trial["idx"], stopped=d.reason)
    trial["stopped"] = d.reason
    if run is not None:
        hub.runs.add_event(run["id"], "sweep_stopped", {"sweep": sw["id"], "why": d.reason})
        runs.cancel(hub, run, f"sweep {sw['id']} (stopped early: {d.reason})")


def _submit_trial(hub: context.Hub, sw: Row, spec: ss.SweepSpec, idx: int) -> None:
    run_id = f"{sw['id']}-t{idx}"
    params = core.trial_params(spec, idx)
    if hub.runs.get_run(run_id) is None:
        full = hub.sweeps.get(sw["id"], code=True) or sw
        req = wire.SubmitRequest(
            tau_yaml=sw["tau_yaml"],
            filename=sw["filename"],
            workspace=sw["workspace"],
            code_zip_b64=base64.b64encode(full["code"]).decode() if full["code"] else None,
            source=wire.SourceInfo.model_validate(sw["source"]) if sw["source"] else None,
        )
        base = runs.resolve_request(hub, req, sweep=True)
        runs.submit(hub, req, sw["created_by"], spec=_trial_spec(base, idx, params), run_id=run_id)
    hub.sweeps.add_trial(sw["id"], idx, run_id, params)


def _trial_spec(base: runspec.RunSpec, idx: int, params: dict[str, ss.Scalar]) -> runspec.RunSpec:
    """The sweep's run spec with trial ``idx``'s parameters as env and arguments."""
    name = f"{base.name[: naming.MAX_NAME - _TRIAL_NAME_ROOM].rstrip('-')}-t{idx}"
    args = tuple(f"--{k}={_arg(v)}" for k, v in params.items())
    env = {**base.env, jobenv.PARAMS: json.dumps(params)}
    return base.model_copy(update={"name": name, "args": (*base.args, *args), "env": env})


def _arg(v: ss.Scalar) -> str:
    return json.dumps(v) if isinstance(v, bool) else str(v)


def _finish(hub: context.Hub, sw: Row, spec: ss.SweepSpec, trials: list[Row]) -> None:
    by_run = hub.runs.get_runs([t["run_id"] for t in trials])
    states = [by_run[t["run_id"]]["state"] for t in trials if t["run_id"] in by_run]
    ok = states.count(st.RunState.SUCCEEDED.value)
    stopped = sum(1 for t in trials if t["stopped"])
    board = leaderboard(hub, spec, trials, by_run)
    best = next((r for r in board if r["state"] == SUCCEEDED and r["best"] is not None), None)
    summary = f"{len(trials)} trials: {ok} succeeded, {stopped} stopped early"
    if best is not None and spec.metric is not None:
        summary += f"; best {best['run_id']} ({spec.metric.name} {best['best']:.4g})"
    model = _register(hub, sw, spec, best)
    state = SUCCEEDED if ok else FAILED
    hub.sweeps.update(sw["id"], state=state, reason=summary, model=model)


def _register(hub: context.Hub, sw: Row, spec: ss.SweepSpec, best: Row | None) -> Row | None:
    if spec.model is None:
        return None
    if best is None:
        return {"error": "no trial succeeded with a value of the metric: nothing registered"}
    req = wire.ModelRegisterRequest(name=spec.model, from_run=best["run_id"])
    try:
        version = registry.register(hub, req, [sw["workspace"]], sw["created_by"])
    except UserError as exc:
        return {"error": f"{exc.message} ({exc.hint})"}
    return {"name": spec.model, "version": version.get("version"), "run": best["run_id"]}


# -- what users read -----------------------------------------------------------------
def leaderboard(
    hub: context.Hub, spec: ss.SweepSpec, trials: list[Row], by_run: dict[str, Row]
) -> list[Row]:
    """Every trial, best first: its parameters, state, best value and step, last step."""
    views = {v.index: v for v in _views(hub, spec, trials, by_run)}
    rows = []
    for idx, best, step in core.ranking(spec, list(views.values())):
        t = trials[idx]
        run = by_run.get(t["run_id"])
        rows.append(
            {
                "index": idx,
                "run_id": t["run_id"],
                "params": t["params"],
                "state": run["state"] if run else "unknown",
                "best": best,
                "best_step": step,
                "last_step": views[idx].last_step,
                "stopped": t["stopped"],
                "rung": t["rung"],
            }
        )
    return rows


def detail(hub: context.Hub, sw: Row) -> Row:
    """The sweep with its leaderboard and counts."""
    spec = ss.SweepSpec.model_validate(sw["spec"])
    trials = hub.sweeps.trials(sw["id"])
    by_run = hub.runs.get_runs([t["run_id"] for t in trials])
    board = leaderboard(hub, spec, trials, by_run)
    counts: dict[str, int] = {}
    for r in board:
        counts[r["state"]] = counts.get(r["state"], 0) + 1
    return {
        **{k: v for k, v in sw.items() if k not in ("code", "tau_yaml")},
        "budget": spec.budget(),
        "submitted": len(trials),
        "counts": counts,
        "metric": spec.metric.model_dump() if spec.metric else None,
        "trials": board,
    }
