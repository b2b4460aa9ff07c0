"""Runtime pre-warm: build a run's pip environment on the nodes that will run it, first.

Vocabulary: a *runtime* is the ``pip`` part of a run's Ray ``runtime_env``, named by
its runtime key (``dataplane.runtimes.runtime_key``). Ray builds a virtualenv per pip
URI on each node the first time a worker needs it and keeps it in the node's cache;
the first job with new requirements pays the ``pip install`` at job start. A runtime
is *warm* on this cluster when a prepare job built it on every *target node* — the
alive nodes with GPUs, or every alive node when none has GPUs — in the nodes' current
Ray sessions.

How: one Ray job per preparation (``backends.programs.prewarm_job``, zero CPUs) runs a tiny
task with the runtime's ``runtime_env`` pinned to each target node, so Ray builds and
caches it there; its log says, per node, whether it worked and Ray's setup error when
not. A pip failure becomes a ``PrepareFailed`` message naming the requirement.

State machine of one preparation: ``preparing`` → ``ready`` | ``failed``. A failed
*build* (a node reported Ray's setup error: the requirements are at fault) is
remembered for ``failure_ttl_s`` — runs waiting for it fail at once with the same
reason — and tried again after that. Any other failure (Ray unreachable, the prepare
job died or ran past ``timeout_s``) is not the run's fault: ``build_failed`` is False
and the agent submits the run anyway, letting Ray build the runtime at job start.

Persistence and verification: ``runtimes.json`` in the agent's state directory maps
each warm key to the node IDs it was built on. A Ray node that restarts gets a new
node ID and an empty cache, so checking a key against the live inventory's target
nodes re-verifies it after Ray restarts; an agent restart reloads the file.

Every change is queued as a ``payloads.RuntimeStatus`` for the next sync; the hub turns
them into run events (with the duration) and the Scheduled phase's reason.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import logging
import threading
import time
from collections.abc import Iterable
from pathlib import Path

from taugrid import errors
from taugrid import payloads as wire
from taugrid.backends import base
from taugrid.backends.programs import prewarm_job
from taugrid.lifecycle import node_ids
from taugrid.spec import units

__all__ = ["Prewarmer", "RuntimeState", "failure_reason", "target_nodes"]

log = logging.getLogger(__name__)

_STATE_FILE = "runtimes.json"


class RuntimeState(enum.StrEnum):
    """Where one runtime's preparation is (see the module docstring)."""

    PREPARING = "preparing"
    READY = "ready"
    FAILED = "failed"


@dataclasses.dataclass
class _Prep:
    """One preparation (mutable, guarded by the ``Prewarmer``'s lock)."""

    key: str
    pip: list[str]
    state: RuntimeState = RuntimeState.PREPARING
    run_ids: set[str] = dataclasses.field(default_factory=set)
    nodes: list[str] = dataclasses.field(default_factory=list)
    started: float = dataclasses.field(default_factory=time.time)
    seconds: float | None = None
    message: str = ""
    build_failed: bool = False  # the requirements could not be installed (user's fault)


def target_nodes(inventory: base.ClusterInventory) -> list[str]:
    """The node IDs a runtime must be built on: alive GPU nodes, else every alive node."""
    alive = inventory.alive_nodes
    gpu = [n.node_id for n in alive if n.gpu_total > 0]
    return sorted(gpu or [n.node_id for n in alive])


def failure_reason(pip: list[str], node: str, error: str) -> str:
    """A user-facing reason for a failed build: the requirement, pip's words, the fix
    (``node``: where it failed, or "" when not known)."""
    lines = [ln.strip() for ln in error.splitlines() if ln.strip()]
    pip_errors = [ln for ln in lines if ln.startswith("ERROR:")]
    culprits = [p for p in pip if any(p in ln for ln in pip_errors)] or [
        p for p in pip if p in error
    ]
    words = pip_errors[-1] if pip_errors else (lines[-1] if lines else "no error text")
    what = (
        f"pip requirement {', '.join(repr(c) for c in culprits)}"
        if culprits
        else f"pip requirements {pip}"
    )
    where = f" on node {node_ids.short(node)}" if node else ""
    return (
        f"runtime preparation failed{where}: {what} could not be installed "
        f"({words.removeprefix('ERROR: ')}); fix runtime.pip in tau.yaml"
    )


class Prewarmer:
    """Prepares runtimes on one cluster's nodes and remembers which are warm.

    ``timeout_s`` bounds one prepare job (it is stopped after that long); ``poll_s`` is
    how often its state is read.
    """

    def __init__(
        self,
        backend: base.Backend,
        state_dir: Path,
        *,
        timeout_s: float = 1800.0,
        failure_ttl_s: float = 300.0,
        poll_s: float = 0.5,
    ) -> None:
        self.backend = backend
        self.path = state_dir / _STATE_FILE
        self.timeout_s = timeout_s
        self.failure_ttl_s = failure_ttl_s
        self.poll_s = poll_s
        self._lock = threading.Lock()
        self._preps: dict[str, _Prep] = {}
        self._changes: list[wire.RuntimeStatus] = []
        self._warm: dict[str, list[str]] = self._load()

    # -- what the agent asks ---------------------------------------------------------
    def is_warm(self, key: str, targets: Iterable[str]) -> bool:
        """Whether ``key`` was built on every node of ``targets`` (their current sessions)."""
        with self._lock:
            built = set(self._warm.get(key, ()))
        wanted = set(targets)
        return bool(wanted) and wanted <= built

    def warm_keys(self, inventory: base.ClusterInventory) -> list[str]:
        """Keys warm on every target node of ``inventory`` (``cached_runtimes``)."""
        targets = set(target_nodes(inventory))
        with self._lock:
            return sorted(k for k, nodes in self._warm.items() if targets and targets <= set(nodes))

    def ensure(self, key: str, pip: list[str], run_ids: Iterable[str] = ()) -> RuntimeState:
        """Start preparing ``key`` unless it is warm, being prepared, or failed recently."""
        targets = self._targets()
        if targets is not None and self.is_warm(key, targets):
            return RuntimeState.READY
        with self._lock:
            prep = self._preps.get(key)
            fresh = prep is not None and (
                prep.state is RuntimeState.PREPARING
                or (prep.build_failed and time.time() - prep.started < self.failure_ttl_s)
            )
            if prep is not None and fresh:
                prep.run_ids.update(run_ids)
                return prep.state
            prep = self._preps[key] = _Prep(key, list(pip), run_ids=set(run_ids))
            self._changed(prep)
        threading.Thread(
            target=self._prepare, args=(prep,), name=f"tau-prewarm-{key}", daemon=True
        ).start()
        return RuntimeState.PREPARING

    def state(self, key: str) -> tuple[RuntimeState | None, str, bool]:
        """The latest preparation of ``key``: state, message, and whether its build failed."""
        with self._lock:
            prep = self._preps.get(key)
            return (prep.state, prep.message, prep.build_failed) if prep else (None, "", False)

    def changes(self) -> list[wire.RuntimeStatus]:
        """Status changes since the last call (sent with the next sync)."""
        with self._lock:
            out, self._changes = self._changes, []
        return out

    def requeue(self, changes: list[wire.RuntimeStatus]) -> None:
        """Put back changes a failed sync did not deliver."""
        with self._lock:
            self._changes[:0] = changes

    def forget(self, key: str) -> None:
        """Drop ``key`` from the warm set (its cache is known to be gone)."""
        with self._lock:
            self._warm.pop(key, None)
            self._save()

    # -- the preparation ---------------------------------------------------------------
    def _targets(self) -> list[str] | None:
        try:
            return target_nodes(self.backend.inventory())
        except errors.TauError as exc:
            log.warning("inventory for pre-warm failed: %s", exc)
            return None

    def _prepare(self, prep: _Prep) -> None:
        t0 = time.monotonic()
        try:
            targets = self._targets()
            if not targets:
                raise errors.SystemFault("no alive Ray node to prepare the runtime on")
            with self._lock:
                prep.nodes = targets
            ok, message, build_failed = self._run_job(prep, targets)
        except errors.TauError as exc:
            ok, message, build_failed = False, f"runtime preparation could not run: {exc}", False
        except Exception as exc:  # a prepare thread must always end in ready/failed
            log.exception("pre-warm of %s crashed", prep.key)
            ok, message, build_failed = False, f"runtime preparation crashed: {exc!r}", False
        with self._lock:
            prep.seconds = round(time.monotonic() - t0, 3)
            prep.state = RuntimeState.READY if ok else RuntimeState.FAILED
            prep.message = message
            prep.build_failed = build_failed
            if ok:
                self._warm[prep.key] = sorted(set(self._warm.get(prep.key, ())) | set(prep.nodes))
                self._save()
            self._changed(prep)
        log.info("runtime %s %s in %.1fs: %s", prep.key, prep.state, prep.seconds, message)

    def _run_job(self, prep: _Prep, targets: list[str]) -> tuple[bool, str, bool]:
        sid = f"tau-prewarm-{prep.key}-{int(time.time() * 1000)}"
        self.backend.submit(
            base.Submission(
                submission_id=sid,
                entrypoint="python -m taugrid.backends.programs.prewarm_job",
                entrypoint_num_cpus=0,
                runtime_env={
                    "env_vars": {
                        prewarm_job.ENV_RUNTIME: json.dumps({"pip": prep.pip}),
                        prewarm_job.ENV_NODES: ",".join(targets),
                    }
                },
                metadata={"taugrid.io/prewarm": prep.key},
            )
        )
        deadline = time.monotonic() + self.timeout_s
        status = self.backend.status(sid)
        while not status.state.terminal:
            if time.monotonic() > deadline:
                self.backend.stop(sid)
                return False, f"runtime preparation took longer than {self.timeout_s:g}s", False
            time.sleep(self.poll_s)
            status = self.backend.status(sid)
        return self._verdict(prep, targets, self.backend.logs(sid), status.message)

    def _verdict(
        self, prep: _Prep, targets: list[str], logs: str, job_message: str
    ) -> tuple[bool, str, bool]:
        lines = [
            json.loads(ln.split(prewarm_job.LINE_PREFIX, 1)[1])
            for ln in logs.splitlines()
            if ln.startswith(prewarm_job.LINE_PREFIX)
        ]
        built = {d["node"] for d in lines if d.get("ok")}
        bad = [d for d in lines if not d.get("ok")]
        if bad:
            return False, failure_reason(prep.pip, bad[0]["node"], bad[0].get("error", "")), True
        if built >= set(targets):
            return True, f"built on {units.plural(len(built), 'node')}", False
        tail = "\n".join((job_message or logs).strip().splitlines()[-5:])
        return False, f"runtime preparation job failed: {tail}", False

    # -- bookkeeping ---------------------------------------------------------------------
    def _changed(self, prep: _Prep) -> None:
        self._changes.append(
            wire.RuntimeStatus(
                key=prep.key,
                state=prep.state.value,
                pip=prep.pip,
                run_ids=sorted(prep.run_ids),
                nodes=prep.nodes,
                seconds=prep.seconds,
                message=prep.message,
            )
        )

    def _load(self) -> dict[str, list[str]]:
        try:
            doc = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return {}
        return {str(k): [str(n) for n in v] for k, v in doc.get("warm", {}).items()}

    def _save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"warm": self._warm}, indent=1, sort_keys=True))
        tmp.replace(self.path)
