"""The agent's node health checker: sample every node, report conditions, mark and clear.

Every ``CheckerConfig.every_s`` (from the agent's state report path) each node the
report lists is sampled: Ray liveness from the inventory; for nodes on this host, the
free space of the data and scratch roots, available memory and — where GPUs are real
devices (``inventory.emulated_gpus`` false) — NVML (``health.signals.NvmlReader``);
then the node's fault-injection file (``<state_dir>/health/nodes/<node-id|ip>.json``,
see ``health.signals``) overrides what it names. That is the seam for emulated GPUs:
the same checks and marks run on injected readings.

The node's conditions ride on its row of the state report (``conditions``,
``health_check`` = the worst status, ``checked_at``). ``health.hysteresis`` decides
when failing checks become a mark — sent through the admin API with source
``checker`` — and when the checker clears its own mark. A check that raises is a
``HealthChecker`` condition with status ``unknown`` (never ``ok``). Marks the checker
set survive an agent restart (``<state_dir>/health/marks.json``).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import socket
import time
from pathlib import Path
from typing import Any

from taugrid import errors
from taugrid.agent import hubclient
from taugrid.backends import base
from taugrid.health import checks, hysteresis, signals
from taugrid.health import conditions as cd
from taugrid.lifecycle import node_ids
from taugrid.lifecycle import states as st

__all__ = ["CheckerConfig", "NodeChecker"]

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class CheckerConfig:
    every_s: float = 10.0
    fail_after: int = 2
    clear_after: int = 3
    max_clears: int = 2
    limits: checks.Limits = dataclasses.field(default_factory=checks.Limits)
    scratch_root: Path | None = None
    """Where jobs write local scratch (Ray's temp dir); checked with the data root."""


class NodeChecker:
    def __init__(
        self,
        cfg: CheckerConfig,
        state_dir: Path,
        data_root: Path | None,
        hub: hubclient.HubClient,
        nvml: signals.GpuReader | None = None,
    ) -> None:
        self.cfg, self.hub = cfg, hub
        self.roots = {"data": data_root, "scratch": cfg.scratch_root}
        self.injection_dir = state_dir / "health" / "nodes"
        self._marks_file = state_dir / "health" / "marks.json"
        self.nvml = nvml
        self.debounce = hysteresis.Debouncer(cfg.fail_after, cfg.clear_after, cfg.max_clears)
        self.conditions: dict[str, list[cd.Condition]] = {}
        self.checked_at: dict[str, float] = {}
        self._reclaims: dict[str, object] = {}  # node -> the reclaim notice marked
        self._last = 0.0
        self._local = _local_addresses()
        for node, (kind, clears) in self._load().items():
            self.debounce.restore(node, kind, clears)

    def maybe_check(self, inv: base.ClusterInventory, nodes: list[str]) -> None:
        """Check ``nodes`` (the report's node IDs) if a round is due."""
        now = time.time()
        if now - self._last < self.cfg.every_s:
            return
        self._last = now
        host, failed = self._host(inv)
        by_id = {n.node_id: n for n in inv.nodes}
        for node_id in nodes:
            n = by_id.get(node_id)
            if n is not None:
                self._check(n, host, failed, now, local=self._is_local(inv, n))
        self._save()

    def row(self, node_id: str) -> dict[str, Any]:
        """What the state report shows for the node (nothing before the first round)."""
        conds = self.conditions.get(node_id)
        if conds is None:
            return {}
        return {
            "conditions": [c.to_dict() for c in conds],
            "health_check": cd.worst(conds).value,
            "checked_at": self.checked_at[node_id],
        }

    def cleared(self, faulty: dict[str, str]) -> None:
        """Marks of ours the hub no longer has were cleared by an admin: forget them."""
        for node, n in self.debounce.nodes.items():
            if n.marked is not None and node not in faulty:
                self.debounce.forget(node)

    # -- one node -----------------------------------------------------------------
    def _host(self, inv: base.ClusterInventory) -> tuple[signals.NodeSample, dict[str, str]]:
        """This host's sample (GPUs through NVML where they are real), and what failed:
        ``{"host": why}`` (disks, memory) and/or ``{"gpu": why}`` (NVML)."""
        failed: dict[str, str] = {}
        host = signals.NodeSample()
        try:
            host = signals.host_sample({k: v for k, v in self.roots.items() if v is not None})
        except OSError as exc:
            failed["host"] = str(exc)
        real_gpus = (
            not inv.emulated_gpus
            and not inv.remote_nodes
            and any(n.gpu_total > 0 for n in inv.alive_nodes)
        )
        if self.nvml is not None and real_gpus:
            try:
                host = dataclasses.replace(host, gpus=tuple(self.nvml.read()), source="nvml")
            except signals.CheckerCrashed as exc:
                failed["gpu"] = str(exc)
        return host, failed

    def _is_local(self, inv: base.ClusterInventory, n: base.NodeInventory) -> bool:
        """Whether ``n`` is this host (a Kubernetes node never is: kwok's fake nodes carry
        loopback addresses, and the agent's pod is not every node)."""
        return not inv.remote_nodes and (n.ip in self._local or n.ip.startswith("127."))

    def _check(
        self,
        n: base.NodeInventory,
        host: signals.NodeSample,
        failed: dict[str, str],
        now: float,
        local: bool,
    ) -> None:
        try:
            crash = failed.get("host") or (failed.get("gpu") if n.gpu_total else None)
            if local and crash:
                raise signals.CheckerCrashed(crash)
            sample = host if local else signals.NodeSample(source="remote")
            if not n.gpu_total:
                sample = dataclasses.replace(sample, gpus=())
            doc = signals.injected(self.injection_dir, [n.node_id, n.ip])
            if doc is not None:
                sample = signals.apply_injection(sample, doc, int(n.gpu_total))
            self._reclaim(n.node_id, n.reclaim or (doc or {}).get("reclaim"))
            sample = dataclasses.replace(sample, ray_alive=n.alive)
            conds = checks.evaluate(sample, self.cfg.limits)
        except Exception as exc:  # a checker bug is a crash too: reported, never "ok"
            why = f"health check crashed: {type(exc).__name__}: {exc}"
            log.warning("node %s: %s", node_ids.short(n.node_id), why)
            conds = [cd.Condition("HealthChecker", cd.Status.UNKNOWN, why)]
        self.conditions[n.node_id], self.checked_at[n.node_id] = conds, now
        self._act(n.node_id, self.debounce.observe(n.node_id, conds))

    def _reclaim(self, node_id: str, notice: object) -> None:
        """A reclaim notice (a spot node about to go) marks the node at once, with no
        debouncing: the provider will not wait; the hub then warns and moves its
        attempts. The mark is cleared when the notice goes (the node was replaced)."""
        if self._reclaims.get(node_id) == (notice or None):
            return
        short = node_ids.short(node_id)
        try:
            if notice:
                why = f"spot reclaim notice: {notice}"
                self.hub.mark_node(node_id, st.RECLAIM_MARK, why, source="checker")
                log.warning("node %s: %s", short, why)
            else:
                self.hub.clear_node(node_id, source="checker")
                log.info("node %s: its reclaim notice is gone; mark cleared", short)
        except errors.TauError as exc:  # try again next round
            log.warning("node %s: reclaim mark or clear failed: %s", short, exc)
            return
        if notice:
            self._reclaims[node_id] = notice
        else:
            del self._reclaims[node_id]

    def _act(self, node_id: str, v: hysteresis.Verdict) -> None:
        try:
            if v.action is hysteresis.Action.MARK:
                self.hub.mark_node(node_id, v.kind, v.reason, source="checker")
                log.warning("node %s marked %s: %s", node_ids.short(node_id), v.kind, v.reason)
            elif v.action is hysteresis.Action.CLEAR:
                self.hub.clear_node(node_id, source="checker")
                log.info("node %s cleared: %s", node_ids.short(node_id), v.reason)
        except errors.TauError as exc:  # try again next round
            log.warning("node %s: %s failed: %s", node_ids.short(node_id), v.action.value, exc)
            n = self.debounce.nodes[node_id]
            if v.action is hysteresis.Action.MARK:
                n.marked = None
            else:
                n.marked, n.clears = v.kind, n.clears - 1

    def _load(self) -> dict[str, tuple[str, int]]:
        try:
            doc = json.loads(self._marks_file.read_text())
            return {k: (str(v[0]), int(v[1])) for k, v in doc.items()}
        except (OSError, ValueError, TypeError, IndexError):
            return {}

    def _save(self) -> None:
        doc = {k: [n.marked, n.clears] for k, n in self.debounce.nodes.items() if n.marked}
        self._marks_file.parent.mkdir(parents=True, exist_ok=True)
        tmp = self._marks_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(doc))
        tmp.replace(self._marks_file)


def _local_addresses() -> set[str]:
    """This host's addresses (a node with one of them is on this host)."""
    try:
        return set(socket.gethostbyname_ex(socket.gethostname())[2])
    except OSError:
        return set()
