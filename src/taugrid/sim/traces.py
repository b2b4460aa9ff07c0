"""Loading the public traces the simulator replays (read-only; never copied anywhere).

Where: ``$TAU_TRACES_DIR`` if set, else ``<repo>/../shared/traces`` (the checkout's
sibling). ``TraceMissing`` says which file is absent and how to point at it, so
benchmarks and tests can skip with a clear message.

- openb (Alibaba cluster-trace-gpu-v2023): ``load_openb_nodes()`` (the 1,213 GPU nodes
  of ``openb_node_list_gpu_node.csv``: the cluster the FGD paper's simulator replays —
  its ``data/prepare_input.sh`` copies ``openb_node_list_gpu_node.yaml`` next to every pod
  list; the 310 CPU-only nodes of ``..._all_node.csv`` are not part of it),
  ``load_openb_tasks(workload)`` for any pod list ``openb_pod_list_<workload>.csv`` found
  in ``$TAU_OPENB_DIR`` (a folder of extra pod lists, e.g. the trace repository's
  ``cluster-trace-gpu-v2023/csv``) or ``<traces>/openb`` — ``openb_workloads()`` lists
  them — or a path to such a CSV. The file's columns are checked: ``TraceInvalid`` names
  the file, line and column of what is wrong.
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
    "TraceInvalid",
    "TraceMissing",
    "load_openb_nodes",
    "load_openb_tasks",
    "load_philly",
    "openb_dirs",
    "openb_workloads",
    "traces_dir",
]

#: The five pod lists kept in ``shared/traces`` (the trace has more: ``openb_workloads``).
OPENB_WORKLOADS = ("default", "cpu050", "gpushare40", "multigpu30", "gpuspec33")
_POD_PREFIX, _POD_SUFFIX = "openb_pod_list_", ".csv"
#: Columns every openb pod list has (``gpu_spec`` and the timing columns are optional).
POD_COLUMNS = ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli")


class TraceMissing(FileNotFoundError):
    """A trace file is not where the simulator looks for it."""


class TraceInvalid(ValueError):
    """A trace file is there but is not what its name says (missing column, bad value)."""


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


def openb_dirs() -> list[pathlib.Path]:
    """Folders searched for pod lists, first match wins: ``$TAU_OPENB_DIR``, ``<traces>/openb``."""
    extra = os.environ.get("TAU_OPENB_DIR")
    return [*([pathlib.Path(extra)] if extra else []), traces_dir() / "openb"]


def openb_workloads() -> list[str]:
    """Names of every pod list found (``default`` first, then by name); may be empty."""
    found = {
        p.name[len(_POD_PREFIX) : -len(_POD_SUFFIX)]
        for d in openb_dirs()
        if d.is_dir()
        for p in d.glob(f"{_POD_PREFIX}*{_POD_SUFFIX}")
    }
    return sorted(found, key=lambda w: (w != "default", w))


def _pod_list(workload: str) -> pathlib.Path:
    if workload.endswith(_POD_SUFFIX) or os.sep in workload:
        path = pathlib.Path(workload)
        if not path.is_file():
            raise TraceMissing(f"openb pod list {path} not found")
        return path
    for d in openb_dirs():
        path = d / f"{_POD_PREFIX}{workload}{_POD_SUFFIX}"
        if path.is_file():
            return path
    where = " or ".join(str(d) for d in openb_dirs())
    raise TraceMissing(
        f"openb workload {workload!r}: no {_POD_PREFIX}{workload}{_POD_SUFFIX} in {where}; "
        f"found: {', '.join(openb_workloads()) or 'none'}. Set TAU_OPENB_DIR to a folder "
        "of openb pod lists (alibaba/clusterdata, cluster-trace-gpu-v2023/csv)"
    )


def _count(path: pathlib.Path, line: int, row: dict[str, str], column: str, top: int) -> int:
    text = (row.get(column) or "").strip()
    try:
        value = int(text)
    except ValueError:
        value = -1
    if not 0 <= value <= top:
        raise TraceInvalid(
            f"{path}, line {line}: {column} is {text!r}; expected a whole number from 0 to {top}"
        )
    return value


def _task(path: pathlib.Path, line: int, row: dict[str, str]) -> st.Task:
    num_gpu = _count(path, line, row, "num_gpu", st.MAX_GPUS)
    milli = _count(path, line, row, "gpu_milli", st.MILLI) if num_gpu else 0
    if (num_gpu and not milli) or (num_gpu > 1 and milli != st.MILLI):
        raise TraceInvalid(
            f"{path}, line {line}: {num_gpu} GPUs of {milli} milli; a GPU task asks for "
            "1..1000 milli of one GPU or for whole GPUs (gpu_milli 1000)"
        )
    return st.Task(
        name=row["name"],
        cpu_milli=_count(path, line, row, "cpu_milli", 10**9),
        memory_mib=_count(path, line, row, "memory_mib", 10**12),
        num_gpu=num_gpu,
        gpu_milli=milli,
        models=frozenset(m for m in (row.get("gpu_spec") or "").split("|") if m),
    )


def load_openb_tasks(workload: str = "default") -> list[st.Task]:
    """Tasks of one openb pod list (a name or a path), in file order; columns checked.

    ``gpu_spec`` (optional, as in the trace's multigpu lists) splits on ``|``.
    """
    path = _pod_list(workload)
    with path.open(newline="") as f:
        reader = csv.DictReader(f)
        missing = [c for c in POD_COLUMNS if c not in (reader.fieldnames or [])]
        if missing:
            raise TraceInvalid(
                f"{path} is not an openb pod list: no column {', '.join(missing)} in its "
                f"header; expected {','.join(POD_COLUMNS)}[,gpu_spec,...]"
            )
        tasks = [_task(path, i, row) for i, row in enumerate(reader, start=2)]
    if not tasks:
        raise TraceInvalid(f"{path} is an empty openb pod list (a header and no tasks)")
    return tasks


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
