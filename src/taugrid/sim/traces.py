"""Loading the public traces the simulator replays (read-only; never copied anywhere).

Where: ``$TAU_TRACES_DIR`` if set, else ``<repo>/../shared/traces`` (the checkout's
sibling). ``TraceMissing`` says which file is absent and how to point at it, so
benchmarks and tests can skip with a clear message.

- openb (Alibaba cluster-trace-gpu-v2023): ``load_openb_nodes()`` (the 1,213 GPU nodes
  of ``openb_node_list_gpu_node.csv``: the cluster the FGD paper's simulator replays —
  its ``data/prepare_input.sh`` copies ``openb_node_list_gpu_node.yaml`` next to every pod
  list; the 310 CPU-only nodes of ``..._all_node.csv`` are not part of it),
  ``load_openb_tasks(workload)`` with workload ``default``, ``cpu050``, ``gpushare40``,
  ``multigpu30`` or ``gpuspec33``.
- philly (Microsoft, as processed by Pollux): ``load_philly()`` → ``PhillyJob`` list,
  submit times in seconds from the first submission, sorted by submission.
"""

from __future__ import annotations

import csv
import dataclasses
import datetime
import os
import pathlib

from taugrid.scheduling.packing import state as st

__all__ = [
    "OPENB_WORKLOADS",
    "OpenbNodes",
    "PhillyJob",
    "TraceMissing",
    "load_openb_nodes",
    "load_openb_tasks",
    "load_philly",
    "traces_dir",
]

OPENB_WORKLOADS = ("default", "cpu050", "gpushare40", "multigpu30", "gpuspec33")


class TraceMissing(FileNotFoundError):
    """A trace file is not where the simulator looks for it."""


def traces_dir() -> pathlib.Path:
    env = os.environ.get("TAU_TRACES_DIR")
    if env:
        return pathlib.Path(env)
    return pathlib.Path(__file__).resolve().parents[3].parent / "shared" / "traces"


def _path(*parts: str) -> pathlib.Path:
    path = traces_dir().joinpath(*parts)
    if not path.is_file():
        raise TraceMissing(
            f"trace file {path} not found: put the public traces under {traces_dir()} "
            "or set TAU_TRACES_DIR to their folder (see shared/traces/README.md)"
        )
    return path


def _rows(path: pathlib.Path) -> list[dict[str, str]]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


@dataclasses.dataclass(frozen=True)
class OpenbNodes:
    """Node columns of an openb node list, in file order."""

    names: list[str]
    cpu_milli: list[int]
    memory_mib: list[int]
    gpus: list[int]
    models: list[str]

    def state(self) -> st.ClusterState:
        """A fresh working state: every GPU 1000 milli free."""
        return st.ClusterState(self.names, self.cpu_milli, self.memory_mib, self.gpus, self.models)


def load_openb_nodes() -> OpenbNodes:
    """The GPU nodes of openb (1,213 nodes, 6,212 GPUs): the reference experiment's cluster."""
    rows = _rows(_path("openb", "openb_node_list_gpu_node.csv"))
    return OpenbNodes(
        names=[r["sn"] for r in rows],
        cpu_milli=[int(r["cpu_milli"]) for r in rows],
        memory_mib=[int(r["memory_mib"]) for r in rows],
        gpus=[int(r["gpu"]) for r in rows],
        models=[r["model"] or "" for r in rows],
    )


def load_openb_tasks(workload: str = "default") -> list[st.Task]:
    """Tasks of one openb pod list, in file order (``gpu_spec`` splits on ``|``)."""
    if workload not in OPENB_WORKLOADS:
        raise ValueError(f"unknown openb workload {workload!r}; one of {OPENB_WORKLOADS}")
    rows = _rows(_path("openb", f"openb_pod_list_{workload}.csv"))
    return [
        st.Task(
            name=r["name"],
            cpu_milli=int(r["cpu_milli"]),
            memory_mib=int(r["memory_mib"]),
            num_gpu=int(r["num_gpu"]),
            gpu_milli=int(r["gpu_milli"]) if int(r["num_gpu"]) else 0,
            models=frozenset(m for m in (r.get("gpu_spec") or "").split("|") if m),
        )
        for r in rows
    ]


@dataclasses.dataclass(frozen=True)
class PhillyJob:
    """One Philly job: submission (s from the first one), duration (s), GPUs, virtual cluster."""

    job_id: int
    submit: float
    duration: float
    gpus: int
    vc: str


def load_philly() -> list[PhillyJob]:
    rows = _rows(_path("philly", "philly.csv"))
    stamps = [datetime.datetime.fromisoformat(r["timestamp"]).timestamp() for r in rows]
    start = min(stamps)
    jobs = [
        (t - start, float(r["duration"]), int(r["num_gpus"]), r["cluster"], i)
        for i, (t, r) in enumerate(zip(stamps, rows, strict=True))
    ]
    jobs.sort()
    return [
        PhillyJob(job_id=k, submit=s, duration=d, gpus=g, vc=vc)
        for k, (s, d, g, vc, _) in enumerate(jobs)
    ]
