"""The agent's side of spanning runs: joining its guest nodes to other clusters' heads,
and telling its guests where to join the spans it heads.

*Lending* (``Lender``): every sync reply lists the guest orders this cluster holds
(``payloads.GuestOrder``, declarative). ``reconcile`` starts one guest node per order
once the head's address is known (``backends.ray.ray_guest``: the order's workers x
per-worker resources, the region's ``region:<name>`` resource, the guest label), and
stops the node of every order no longer listed. A node whose ``ray start`` exits is
reported ``failed`` with its log's end and is not started again for that order: the
span goes on without it. ``statuses`` is what the next sync says of each order.

*Heading* (``joins``): while an attempt with guest clusters is active, every sync
carries where its Ray cluster is joined (GCS address, Ray token), for the hub to relay.

Only an agent that runs its own Ray cluster (``SpanConfig``) does either; its state
report then says ``spannable``.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from collections.abc import Iterable
from pathlib import Path

from taugrid import payloads as wire
from taugrid.agent.attempts import tracker
from taugrid.backends.ray import ray_guest, ray_local
from taugrid.lifecycle import states as st

__all__ = ["Lender", "SpanConfig", "joins"]

log = logging.getLogger(__name__)
_MIN_MEMORY = 2**30
"""Logical memory of a guest node whose run declared none per worker."""


@dataclasses.dataclass(frozen=True)
class SpanConfig:
    """The agent's own Ray cluster, as a span needs it: the address its nodes bind to,
    where its GCS is, and its Ray token file (None: token auth off)."""

    ip: str
    gcs_address: str
    auth_token_file: Path | None = None


def joins(config: SpanConfig, trackers: Iterable[tracker.AttemptTracker]) -> list[wire.SpanJoin]:
    """Where the guests of the active spans this agent heads join its Ray cluster."""
    spans = [t.a.token for t in trackers if t.a.guests and t.state in st.ACTIVE_ATTEMPT_STATES]
    if not spans:  # every sync asks: read the token only when a span needs it
        return []
    secret = config.auth_token_file.read_text().strip() if config.auth_token_file else None
    return [wire.SpanJoin(token=t, address=config.gcs_address, auth_token=secret) for t in spans]


def _shape(order: wire.GuestOrder, region: str, cluster_id: str, ip: str) -> ray_local.NodeShape:
    gpus = math.ceil(order.workers * order.gpus_per_worker)
    return ray_local.NodeShape(
        num_cpus=max(1, math.ceil(order.workers * order.cpus_per_worker)),
        num_gpus=gpus,
        accelerator=order.gpu_model if gpus else None,
        memory=max(order.workers * order.memory_per_worker, _MIN_MEMORY),
        resources={f"region:{region}": float(gpus or order.workers)},
        labels={ray_guest.GUEST_LABEL: str(order.token), "tau.io/cluster": cluster_id},
        ip=ip,
    )


class Lender:
    """The guest nodes this cluster runs for spans headed elsewhere."""

    def __init__(self, cluster_id: str, region: str, config: SpanConfig, work_dir: Path) -> None:
        self.cluster_id, self.region, self.config = cluster_id, region, config
        self.work_dir = work_dir
        self.nodes: dict[int, ray_guest.GuestNode] = {}
        self.failed: dict[int, str] = {}
        left = ray_guest.stop_marked(cluster_id)  # a killed predecessor's guests
        if left:
            log.warning("guest node pids %s survived stopping", sorted(left))

    def reconcile(self, orders: list[wire.GuestOrder]) -> None:
        """Start the nodes of new orders whose head is known; stop those not listed."""
        listed = {o.token: o for o in orders}
        for token in [t for t in self.nodes if t not in listed]:
            log.info("span attempt %s is over: stopping its guest node", token)
            self.nodes.pop(token).stop()
        self.failed = {t: why for t, why in self.failed.items() if t in listed}
        for o in orders:
            node = self.nodes.get(o.token)
            if node is not None and o.address and node.address != o.address:
                log.warning("the head of span %s moved to %s: joining again", o.token, o.address)
                self.nodes.pop(o.token).stop()
            elif node is not None or o.token in self.failed or not o.address:
                continue
            self._start(o, o.address)

    def _start(self, o: wire.GuestOrder, address: str) -> None:
        shape = _shape(o, self.region, self.cluster_id, self.config.ip)
        node = ray_guest.GuestNode(
            o.token, self.cluster_id, shape, address, self.work_dir / str(o.token), o.auth_token
        )
        try:
            node.start()
        except OSError as exc:
            self.failed[o.token] = f"could not start ray: {exc}"
            return
        log.info("guest node for span %s (%s) joining %s", o.token, o.head_cluster, address)
        self.nodes[o.token] = node

    def statuses(self) -> list[wire.GuestStatus]:
        """Each order's state for the next sync: starting, joined or failed."""
        out = [wire.GuestStatus(token=t, state="failed", message=w) for t, w in self.failed.items()]
        for token, node in list(self.nodes.items()):
            if node.joined():
                out.append(wire.GuestStatus(token=token, state="joined", nodes=1))
            elif node.running():
                out.append(wire.GuestStatus(token=token, state="starting"))
            else:
                self.failed[token] = node.failure()[-3900:]
                node.stop()
                del self.nodes[token]
                out.append(
                    wire.GuestStatus(token=token, state="failed", message=self.failed[token])
                )
        return out

    def close(self) -> None:
        """Stop every guest node (the agent is stopping)."""
        for node in self.nodes.values():
            node.stop(grace_s=1.0)
        self.nodes.clear()
