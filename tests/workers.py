"""Parallel test workers (pytest-xdist): isolation, grouping and order.

``make unit`` and ``make test-long`` run their tests on several xdist workers. Three
rules keep that safe and short:

- **Isolation.** Each worker's interpreter is born in a network namespace of its own
  (``tests/netns-python``): a private loopback, so the fixed addresses and ports tests
  give their Ray nodes, hubs and servers never meet another worker's. Where that is not
  possible (not root, no ``unshare``), the run falls back to one process and says so.
- **Grouping.** A module's tests run on one worker (its module-scoped Ray cluster or
  hub is started once), and every test that uses one of ``SHARED_FIXTURES`` (an
  expensive session-scoped component) runs on that fixture's worker. Modules that share
  something host-wide that a namespace does not separate (processes found by a marker
  prefix, ``backends.ray._procs``) say so with ``pytestmark = pytest.mark.xdist_group(NAME)``
  and run one after another on one worker.
- **One Ray start at a time.** Ray cluster starts take the host's start slot
  (``TAU_RAY_START_LOCK``, ``backends.ray._procs.start_slot``): on 2 cores, four clusters
  starting at once ran past Ray's fixed raylet registration timeout.
- **Order.** Groups start longest first, from the seconds per group of earlier runs
  on this machine (``~/.cache/taugrid/test-durations.json``, outside the checkout like
  the builds, so CI's clean clone reads what earlier runs measured; written by
  ``record`` and ``write_recorded``), so the slowest modules do not start last and
  leave the other workers idle at the end; a group no earlier run measured (a fresh
  machine has no such file) is guessed from its tests' markers (``long``, ``slow``,
  ``ray``).

A worker that dies (an xdist "node down") leaves what its process wrote to file
descriptor 2 in ``<basetemp>/popen-gwN.stderr.log`` (``keep_stderr``; tests capture at the
``sys`` level, so C code's output, a fatal error and faulthandler's traceback reach that
file instead of a per-test capture file that dies with the process), and the crashed
test's report ends with that file's last lines (``crash_note``); what its tests had started
(hubs, Ray nodes: every process left in its network namespace) is killed then, so it
does not load the rest of the run. No worker replaces it (``--max-worker-restart=0``): the
run ends with the crash as a failure, where a replacement re-ran the crashed test and, once
its collection differed, was never given work and the run waited until CI's limit.

PostgreSQL is reached over its Unix socket (``.ci/start-postgres.sh``), which crosses
network namespaces.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from xdist.scheduler import LoadScopeScheduling

from taugrid.backends.ray import _procs

WRAPPER = Path(__file__).with_name("netns-python")
CACHE = Path.home() / ".cache" / "taugrid"
"""The tests' files kept across runs and clones on this machine (builds, wheels, timings)."""
DURATIONS = CACHE / "test-durations.json"
PYTHON_ENV = "TAU_TEST_PYTHON"
GROUPS_ENV = "TAU_TEST_GROUPS"
LATE_ENV = "TAU_TEST_LATE_FIXTURES"
"""Fixtures (comma-separated) whose users' groups go last: the controller decides once,
before the workers start (every worker must collect the same order), e.g. ``weed_s3``
while CI still builds weed in the background."""
DURATIONS_ENV = "TAU_TEST_DURATIONS"
"""This run's copy of ``DURATIONS``, taken by the controller before its workers start."""

# Session-scoped fixtures that start something expensive: all their users share a worker.
SHARED_FIXTURES = ("ray_cluster", "control_plane")

_seconds: dict[str, float] = {}  # this run's seconds per group (controller)
_controller: pytest.Config | None = None


@functools.cache
def netns_available() -> bool:
    """Whether this process may give a child a network namespace of its own."""
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        return False
    res = subprocess.run(
        ["unshare", "--net", "--", "ip", "link", "set", "lo", "up"],
        capture_output=True,
        timeout=10,
        check=False,
    )
    return res.returncode == 0


def isolate(config: pytest.Config, late: tuple[str, ...] = ()) -> None:
    """Start every xdist worker in its own network namespace, or run in one process;
    the groups that use one of the ``late`` fixtures start after all others."""
    tx = getattr(config.option, "tx", None)
    if not tx or getattr(config, "workerinput", None) is not None:
        return
    if netns_available():
        global _controller
        _controller = config
        os.environ[PYTHON_ENV] = sys.executable
        # Workers must collect the same tests in the same order; the API fuzzer's
        # parametrisation iterates sets of strings, whose order follows the hash seed.
        os.environ.setdefault("PYTHONHASHSEED", "0")
        config.option.tx = [_isolated(spec) for spec in tx]
        config.option.loadscopereorder = False  # ``order`` decides
        fd, lock = tempfile.mkstemp(prefix="tau-ray-start-", suffix=".lock")
        os.close(fd)
        os.environ[GROUPS_ENV] = f"{lock}.groups.json"
        # Every worker orders its collection by the same numbers (another session, e.g.
        # CI's Kubernetes tier, may rewrite DURATIONS meanwhile): xdist gives no work to
        # a worker whose collection differs from the run's.
        snapshot = Path(f"{lock}.durations.json")
        snapshot.write_text(json.dumps(load_durations()))
        os.environ[DURATIONS_ENV] = str(snapshot)
        # A caller running two test sessions side by side (.ci/run) names one lock for
        # both, so their Ray starts take turns too; it is the caller's to remove.
        os.environ.setdefault(_procs.START_LOCK_ENV, lock)
        os.environ[LATE_ENV] = ",".join(late)
        return
    print(
        "tests/workers.py: no network namespace for xdist workers here (needs root and "
        "unshare); running the tests in one process instead",
        file=sys.stderr,
    )
    config.option.tx = []
    config.option.dist = "no"
    config.option.numprocesses = 0


def _isolated(spec: str) -> str:
    if spec != "popen":
        raise pytest.UsageError(f"tests/workers.py isolates plain 'popen' workers only, not {spec}")
    return f"popen//python={WRAPPER}"


def group(items: list[pytest.Item]) -> dict[str, str]:
    """Every module's worker group: the module itself, or the shared fixture's that one of
    its tests uses (the whole module follows, so its module fixtures start once). Written
    to ``$TAU_TEST_GROUPS`` on a worker, for the controller's scheduler."""
    modules: dict[str, str] = {}
    for item in items:
        module = module_of(item.nodeid)
        names = getattr(item, "fixturenames", ())
        shared = [f for f in SHARED_FIXTURES if f in names]
        marker = item.get_closest_marker("xdist_group")
        if marker is not None and marker.args:
            modules[module] = f"group:{marker.args[0]}"
        elif shared:
            modules[module] = f"fixture:{shared[0]}"
        else:
            modules.setdefault(module, module)
    out = os.environ.get(GROUPS_ENV)
    if out and items and getattr(items[0].config, "workerinput", None) is not None:
        tmp = Path(f"{out}.{os.getpid()}")
        tmp.write_text(json.dumps(modules))
        tmp.replace(out)  # every worker writes the same map
    return modules


def module_of(nodeid: str) -> str:
    """The test module of a node id (``tests/x/test_y.py``)."""
    return nodeid.split("::", 1)[0]


class GroupScheduling(LoadScopeScheduling):  # type: ignore[misc]  # xdist ships no types
    """xdist's scope scheduling with ``group``'s groups as the scopes (the controller
    sees node ids only; the workers wrote the map after collecting). xdist's own
    ``loadgroup`` renames node ids, which pytest 9.2 no longer lets a plugin do."""

    def __init__(self, config: pytest.Config, log: Any = None) -> None:
        super().__init__(config, log)
        self._groups: dict[str, str] | None = None

    def _split_scope(self, nodeid: str) -> str:
        if self._groups is None:
            path = Path(os.environ.get(GROUPS_ENV, "/nonexistent"))
            self._groups = json.loads(path.read_text()) if path.is_file() else {}
        module = module_of(nodeid)
        return self._groups.get(module, module)


GUESS_S = {"long": 120.0, "slow": 40.0, "ray": 20.0, "k8s": 20.0}
"""A test's seconds when no earlier run measured its group: by its heaviest marker."""


def guess(item: pytest.Item) -> float:
    """What a test costs before any run measured it (1 s: no marker named above)."""
    return max((s for m, s in GUESS_S.items() if item.get_closest_marker(m)), default=1.0)


def order(items: list[pytest.Item], groups: dict[str, str], durations: dict[str, float]) -> None:
    """Sort ``items`` so that the longest groups come first (stable within a group), the
    groups using a fixture named in ``$TAU_TEST_LATE_FIXTURES`` last; the scheduler hands
    groups out in this order. A group no earlier run measured (a clean
    clone has no durations file) is guessed from its tests' markers (``GUESS_S``)."""
    first_seen: dict[str, int] = {}
    guessed: dict[str, float] = {}
    late_fixtures = {f for f in os.environ.get(LATE_ENV, "").split(",") if f}
    late: set[str] = set()
    for i, item in enumerate(items):
        g = groups[module_of(item.nodeid)]
        first_seen.setdefault(g, i)
        guessed[g] = guessed.get(g, 0.0) + guess(item)
        if late_fixtures & set(getattr(item, "fixturenames", ())):
            late.add(g)

    def key(item: pytest.Item) -> tuple[bool, float, int]:
        g = groups[module_of(item.nodeid)]
        return (g in late, -durations.get(g, guessed[g]), first_seen[g])

    items.sort(key=key)


def load_durations() -> dict[str, float]:
    """Seconds per worker group from earlier runs (this run's copy of them on a worker);
    empty when there are none."""
    return _read_durations(Path(os.environ.get(DURATIONS_ENV) or DURATIONS))


def _read_durations(path: Path) -> dict[str, float]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return {str(k): float(v) for k, v in data.items()} if isinstance(data, dict) else {}


def record(nodeid: str, seconds: float) -> None:
    """Add one report's seconds (setup, call or teardown) to its group (on the controller
    of a parallel run)."""
    if _controller is None:
        return
    sched = getattr(_controller.pluginmanager.getplugin("dsession"), "sched", None)
    if isinstance(sched, GroupScheduling):
        g = sched._split_scope(nodeid)
        _seconds[g] = _seconds.get(g, 0.0) + seconds


def cleanup(config: pytest.Config) -> None:
    """Remove the start slot's lock file and the group map (controller only)."""
    if getattr(config, "workerinput", None) is not None:
        return
    groups = os.environ.get(GROUPS_ENV)
    if groups:
        Path(groups).unlink(missing_ok=True)
        Path(groups.removesuffix(".groups.json")).unlink(missing_ok=True)  # this run's lock
    snapshot = os.environ.get(DURATIONS_ENV)
    if snapshot:
        Path(snapshot).unlink(missing_ok=True)


def write_recorded() -> None:
    """Merge this run's seconds per group into ``DURATIONS`` (a parallel run's only):
    groups this run did not see keep the numbers the file has *now*, not this run's
    snapshot of it from its start. CI's two tiers run side by side: the Kubernetes tier,
    merging into its own start-time snapshot, wrote over the unit tier's numbers, so a
    fresh machine never kept the unit tier's and its workers took groups in guessed order."""
    if not _seconds:
        return
    DURATIONS.parent.mkdir(parents=True, exist_ok=True)
    with open(DURATIONS.with_name(f"{DURATIONS.name}.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # the other tier may be merging at this moment
        now = _read_durations(DURATIONS)
        merged = {**now, **{g: round(s, 1) for g, s in _seconds.items()}}
        ordered = dict(sorted(merged.items(), key=lambda kv: -kv[1]))
        tmp = DURATIONS.with_name(f"{DURATIONS.name}.{os.getpid()}")  # a run may read it
        tmp.write_text(json.dumps(ordered, indent=1) + "\n")
        tmp.replace(DURATIONS)


STDERR_SUFFIX = ".stderr.log"
NETNS_SUFFIX = ".netns"
_CRASH_LINES = 40


def _beside(worker_basetemp: Path, suffix: str) -> Path:
    """A worker's file beside its temporary directory (pytest empties that one)."""
    return worker_basetemp.with_name(worker_basetemp.name + suffix)


def keep_stderr(config: pytest.Config) -> None:
    """On a worker of a run with ``--basetemp`` and ``--capture=sys``: file descriptor 2
    goes to a file beside the worker's temporary directory (which pytest empties when it
    starts using it), kept after the worker dies."""
    basetemp = config.option.basetemp
    if getattr(config, "workerinput", None) is None or not basetemp:
        return
    if config.option.capture != "sys":
        return
    path = _beside(Path(basetemp), STDERR_SUFFIX)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(fd, 2)
    os.close(fd)
    _beside(Path(basetemp), NETNS_SUFFIX).write_text(os.readlink("/proc/self/ns/net"))


def crash_note(report: pytest.TestReport) -> None:
    """The end of a crashed worker's stderr file added to its crashed test's report (on
    the controller), so CI's log says what the process wrote last."""
    node = getattr(report, "node", None)
    gateway = getattr(node, "gateway", None)
    basetemp = _controller.option.basetemp if _controller is not None else None
    if not basetemp or gateway is None:
        return
    worker = Path(basetemp).resolve() / f"popen-{gateway.id}"
    path = _beside(worker, STDERR_SUFFIX)
    try:
        tail = path.read_text(errors="replace").splitlines()[-_CRASH_LINES:]
    except OSError:
        return
    shown = "\n".join(tail) or "(nothing)"
    killed = _kill_namespace(_beside(worker, NETNS_SUFFIX))
    report.longrepr = (
        f"{report.longrepr}\n--- the end of {path} ---\n{shown}\n"
        f"--- processes left in its network namespace, killed: {killed or 'none'}"
    )


def _kill_namespace(recorded: Path) -> list[int]:
    """SIGKILL every process in the dead worker's network namespace (never this one's)."""
    try:
        netns = recorded.read_text()
    except OSError:
        return []
    if netns == os.readlink("/proc/self/ns/net"):
        return []
    killed = []
    for entry in Path("/proc").iterdir():
        with contextlib.suppress(OSError):
            if entry.name.isdigit() and os.readlink(entry / "ns" / "net") == netns:
                os.kill(int(entry.name), signal.SIGKILL)
                killed.append(int(entry.name))
    return killed
