"""The driver of a ``workload_kind: pipeline`` run: ``python -m taugrid.sdk.job.pipeline_job``.

Runs inside the run's Ray job. It reads the ``pipeline`` section of tau.yaml (in the
job's working dir), measures each stage on a sample (``elastic.profile``, the same
measurement ``tau run plan`` prints), starts from the recommended configuration and
runs the source through the stages on Ray Data (``elastic.ray_exec``), resizing the
stage pools after each window (``elastic.controller``) unless ``pipeline.elastic`` is
false. It writes, through the in-job API:

- metrics, one step per window: ``pipeline/throughput`` (items/s entering),
  ``pipeline/<stage>/items_per_s``, ``pipeline/<stage>/replicas``,
  ``pipeline/<stage>/batch_size``, ``pipeline/<stage>/dropped`` (items filtered or set
  aside), ``pipeline/<stage>/nodes_avoided`` (nodes found slow for the stage, which its
  replicas left), ``pipeline/target`` — ``tau run status`` shows the latest per stage;
- artifacts: ``pipeline.json`` (the plan, every window, totals) and
  ``dead-letter/`` (``<stage>.<pid>.jsonl``: failing items with their error), when any.

Lives in the SDK (layer 5) because it wires ``taugrid.elastic`` to ``tau.log``;
``elastic`` itself does not import the SDK.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from taugrid import errors
from taugrid.elastic import controller, profile, ray_exec, sizing
from taugrid.record import jobenv
from taugrid.sdk.job import injob
from taugrid.spec import load
from taugrid.spec import pipeline as spec_pipeline

__all__ = ["cpu_budget", "gpu_budget", "main", "plan_document", "window_metrics"]


def plan_document(rec: sizing.Recommendation) -> dict[str, Any]:
    """A recommendation as JSON (``tau run plan -o json`` and ``pipeline.json``)."""
    return {
        "target_throughput": rec.target,
        "reachable": rec.reachable,
        "expected_throughput": round(rec.expected_throughput, 3),
        "bottleneck": rec.bottleneck,
        "gpus": rec.gpus,
        "cpus": rec.cpus,
        "limit": None
        if rec.limit is None
        else {
            "stage": rec.limit.stage,
            "gpu_budget": rec.limit.gpu_budget,
            "cpu_budget": rec.limit.cpu_budget,
            "ceiling": round(rec.limit.ceiling, 3),
            "shortfall": round(rec.limit.shortfall, 4),
            "message": rec.limit.describe(),
        },
        "stages": [
            {
                "name": s.name,
                "replicas": s.replicas,
                "batch_size": s.batch_size,
                "rate_per_replica": round(s.rate_per_replica, 3),
                "capacity": round(s.capacity, 3),
                "gpus_per_replica": s.gpus,
                "cpus_per_replica": s.cpus,
            }
            for s in rec.stages
        ],
    }


def window_metrics(report: ray_exec.WindowReport) -> dict[str, float]:
    """The metrics logged for one window (see the module docstring)."""
    out: dict[str, float] = {
        "pipeline/throughput": report.throughput,
        "pipeline/target": report.config.target,
    }
    for choice in report.config.stages:
        seen = report.stages.get(choice.name)
        items = seen.items_in if seen else 0
        out[f"pipeline/{choice.name}/items_per_s"] = items / report.elapsed_s
        out[f"pipeline/{choice.name}/replicas"] = choice.replicas
        out[f"pipeline/{choice.name}/batch_size"] = choice.batch_size
        lost = (seen.items_in - seen.items_out) if seen else 0
        out[f"pipeline/{choice.name}/dropped"] = lost
        out[f"pipeline/{choice.name}/nodes_avoided"] = len(report.avoided.get(choice.name, ()))
    return out


def _window_doc(report: ray_exec.WindowReport) -> dict[str, Any]:
    return {
        "index": report.index,
        "items_in": report.items_in,
        "items_out": report.items_out,
        "elapsed_s": round(report.elapsed_s, 3),
        "throughput": round(report.throughput, 3),
        "replicas": {c.name: c.replicas for c in report.config.stages},
        "batch_size": {c.name: c.batch_size for c in report.config.stages},
        "next_replicas": {c.name: c.replicas for c in report.next_config.stages},
        "nodes": {
            name: {node[:12]: items for node, (items, _) in seen.nodes.items()}
            for name, seen in report.stages.items()
        },
        "avoided": {name: sorted(n[:12] for n in ids) for name, ids in report.avoided.items()},
    }


def _dead_letters(dead_dir: Path) -> int:
    files = sorted(dead_dir.glob("*.jsonl")) if dead_dir.is_dir() else []
    count = 0
    for path in files:
        with path.open() as f:
            count += sum(1 for _ in f)
    if files:
        injob.save_artifact(dead_dir, "dead-letter")
    return count


def gpu_budget() -> float | None:
    """The GPUs the run holds (``TAU_WORKERS`` x ``TAU_GPUS_PER_WORKER``); None when 0."""
    held = int(os.environ.get(jobenv.WORKERS, "1")) * float(
        os.environ.get(jobenv.GPUS_PER_WORKER, "0")  # a share of one GPU is "0.5"
    )
    return float(held) if held > 0 else None


def cpu_budget(cluster_cpus: float) -> float:
    """The CPUs the stage pools may take on a cluster of ``cluster_cpus`` (its alive
    nodes' total): all but the run's own (``TAU_WORKERS`` x ``TAU_CPUS_PER_WORKER``, the
    driver's among them) and one more, which Ray Data's own tasks (reading the source,
    moving blocks) need to make progress; never below one."""
    held = int(os.environ.get(jobenv.WORKERS, "1")) * float(
        os.environ.get(jobenv.CPUS_PER_WORKER, "0")
    )
    return max(cluster_cpus - held - 1.0, 1.0)


RELOCATE_AFTER = 2
"""Windows in a row the cluster's CPUs must cap the pipeline before the run asks to move."""
RELOCATE_EVERY = 10
"""Windows between two asks while the cap lasts (the hub may have had no room before)."""
PROGRESS_FILE = "progress.json"


def cluster_cpus_for(stage_cpus: float) -> float:
    """The free CPUs, beyond the run's own, that stage pools of ``stage_cpus`` need
    (``cpu_budget``'s inverse; the hub adds the run's own when it looks for room)."""
    return stage_cpus + 1.0


def _ask_to_move(control: controller.Controller, capped: int) -> int:
    """Count windows the cluster's CPUs cap the pipeline; ask the hub to move the run
    after ``RELOCATE_AFTER`` of them, and again every ``RELOCATE_EVERY``."""
    wanted = controller.cpus_wanted(control)
    if wanted is None or control.current.limit is None:
        return 0
    capped += 1
    if capped >= RELOCATE_AFTER and (capped - RELOCATE_AFTER) % RELOCATE_EVERY == 0:
        cpus = cluster_cpus_for(wanted)
        why = f"{control.current.limit.describe()}; {cpus:g} free CPUs would meet it"
        print(f"pipeline: asking the hub to move the run: {why}", flush=True)
        injob.request_relocation(cpus, why)
    return capped


def _resume(dead: Path) -> dict[str, Any]:
    """What an earlier attempt finished (its last window's checkpoint), with its
    dead letters put back in ``dead``; all zero on a first attempt."""
    done: dict[str, Any] = {"items_done": 0, "items_out": 0, "windows": 0}
    latest = injob.latest_checkpoint()
    if latest is None or not (latest / PROGRESS_FILE).is_file():
        return done
    done.update(json.loads((latest / PROGRESS_FILE).read_text()))
    if (latest / "dead-letter").is_dir():
        shutil.copytree(latest / "dead-letter", dead, dirs_exist_ok=True)
    print(f"pipeline: resuming after {done['items_done']} items ({done['windows']} windows)")
    return done


def _checkpoint(done: dict[str, Any], dead: Path) -> None:
    """Commit what the pipeline finished so far: a moved or retried run resumes after it."""
    with injob.checkpoint(step=int(done["windows"])) as d:
        (d / PROGRESS_FILE).write_text(json.dumps(done))
        if any(dead.glob("*.jsonl")):
            shutil.copytree(dead, d / "dead-letter")


def run(pipe: spec_pipeline.PipelineSpec, workdir: str) -> dict[str, Any]:
    """Measure, plan, run; returns the summary written to ``pipeline.json``."""
    import ray

    if not ray.is_initialized():
        ray.init(address=os.environ.get("RAY_ADDRESS", "auto"), log_to_driver=False)
    measured = profile.measure(pipe, search=workdir)
    total = ray.cluster_resources()  # type: ignore[no-untyped-call]
    cpus = cpu_budget(float(total.get("CPU", 1.0)))
    control = controller.Controller(
        [m.profile for m in measured], pipe.target_throughput, gpu_budget(), cpus
    )
    planned = control.current
    print(f"pipeline plan: {json.dumps(plan_document(planned))}", flush=True)
    windows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="tau-dead-") as tmp:
        dead = Path(tmp)
        done = _resume(dead)
        capped = 0

        def on_window(report: ray_exec.WindowReport) -> None:
            nonlocal capped
            injob.log(window_metrics(report), step=report.index + 1)
            windows.append(_window_doc(report))
            print(f"window {report.index + 1}: {json.dumps(windows[-1])}", flush=True)
            for stage, ids in report.next_avoided.items():
                for node in sorted(ids - report.avoided.get(stage, frozenset())):
                    print(f"stage {stage}: node {node[:12]} is slow; its replicas move off it")
            done["items_done"] += report.items_in
            done["items_out"] += report.items_out
            done["windows"] = report.index + 1
            _checkpoint(done, dead)
            if pipe.relocate:
                capped = _ask_to_move(control, capped)

        ray_exec.run(
            pipe,
            control,
            search=workdir,
            dead_dir=tmp,
            on_window=on_window,
            skip=done["items_done"],
            first_window=done["windows"],
        )
        dead_count = _dead_letters(dead)
    return {
        "plan": plan_document(planned),
        "final": plan_document(control.current),
        "windows": windows,
        "items_out": done["items_out"],
        "dead_letters": dead_count,
    }


def _tau_error(exc: BaseException) -> errors.TauError | None:
    """The TauError behind ``exc``: itself, a chained cause, or one a Ray task raised."""
    seen: BaseException | None = exc
    for _ in range(8):
        if seen is None or isinstance(seen, errors.TauError):
            return seen
        ray_cause = getattr(seen, "cause", None)
        seen = ray_cause if isinstance(ray_cause, BaseException) else seen.__cause__
    return None


def main(argv: list[str] | None = None) -> int:
    """Command line: ``python -m taugrid.sdk.job.pipeline_job [--config tau.yaml]``."""
    parser = argparse.ArgumentParser(prog="python -m taugrid.sdk.job.pipeline_job")
    parser.add_argument("--config", default="tau.yaml", help="tau.yaml with the pipeline")
    args = parser.parse_args(argv)
    try:
        config = load.load_tau_yaml(args.config)
        if config.pipeline is None:
            raise errors.UserError(
                f"{args.config} has no 'pipeline' section", "see docs/pipelines.md"
            )
        summary = run(config.pipeline, str(Path(args.config).resolve().parent))
    except Exception as exc:
        cause = _tau_error(exc)
        if cause is None:
            raise
        print(f"error: {cause.message}\n  hint: {cause.hint}", file=sys.stderr)
        return 2
    out = Path(tempfile.mkdtemp(prefix="tau-pipeline-")) / "pipeline.json"
    out.write_text(json.dumps(summary, indent=2) + "\n")
    injob.save_artifact(out)
    print(f"pipeline done: {summary['items_out']} items out, {summary['dead_letters']} set aside")
    return 0


if __name__ == "__main__":
    sys.exit(main())
