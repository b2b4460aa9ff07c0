"""The agent's data plane: scans, transfers, the data server and the probes, as one sidecar.

``DataAgent`` syncs with the hub's data channel (``POST /v1/agents/{cluster}/data/sync``)
every ``interval_s``: it sends scan results and transfer progress, and gets back the
scans to do (datasets registered in this region), the transfers granted to this region
(with their bandwidth reservation) and the complete replicas to serve. A replica may be
an fsspec URL (``dataplane.objstore``): it is scanned there, and a transfer from it reads
the object store directly with the same resume and sha256 rules. Transfers run in
their own threads (``dataplane.transfer.fetch`` from the source region's data server);
a failed one is reported and can be asked for again — it resumes from its ``.part``
files. A restarted agent gets its active transfers back from the hub and resumes them.

``Sidecar`` starts the probe server, data server, probe runner and ``DataAgent`` for the
agent daemon, and gives the agent what goes into its state report (``probes``,
``cached_datasets``; ``cached_runtimes`` come from ``agent.attempts.prewarm``).
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import shutil
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from taugrid import errors, huburls
from taugrid import payloads as wire_hub
from taugrid.agent.data import dataserver, peers, probes
from taugrid.dataplane import manifest, objstore, transfer, wire

__all__ = ["DataAgent", "Sidecar", "SidecarConfig", "add_args", "from_args"]

log = logging.getLogger(__name__)


def _report(dataset_id: str, files: list[dict[str, Any]]) -> wire.ScanReport:
    return wire.ScanReport(
        dataset_id=dataset_id,
        files=files,
        size_bytes=manifest.total_size(files),
        sha256=manifest.digest(files),
    )


class DataAgent:
    """Runs this region's scans and inbound transfers for the hub."""

    def __init__(
        self,
        http: httpx.Client,
        cluster_id: str,
        data_root: Path,
        peers: dict[str, transfer.Source],
        server: dataserver.DataServer | None = None,
        interval_s: float = 1.0,
        storage_options: objstore.StorageOptions | None = None,
        hubs: huburls.Failover | None = None,
    ) -> None:
        """``hubs``: the hub replicas' URLs to fail over between (None: ``http``'s
        ``base_url`` is the one hub)."""
        self.http, self.cluster_id, self.data_root = http, cluster_id, data_root
        self.hubs = hubs or huburls.Failover("")
        self.peers, self.server, self.interval_s = peers, server, interval_s
        self.storage_options = storage_options or {}
        self._out = wire.DataSync()
        self._lock = threading.Lock()
        self._running: dict[int, threading.Thread] = {}
        self._links_busy: dict[str, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="tau-datasync", daemon=True)

    def busy(self, region: str) -> bool:
        with self._lock:
            return self._links_busy.get(region, 0) > 0

    def step(self) -> wire.DataTasks | None:
        with self._lock:
            body, self._out = self._out, wire.DataSync()
        try:
            path = f"/v1/agents/{self.cluster_id}/data/sync"
            r = self.hubs.send(self.http, "POST", path, json=body.model_dump(mode="json"))
            r.raise_for_status()
        except httpx.HTTPError as exc:
            log.warning("data sync failed, will retry: %s", exc)
            with self._lock:  # keep what was not delivered
                self._out.scans[:0] = body.scans
                self._out.progress[:0] = body.progress
            return None
        tasks = wire.DataTasks.model_validate(r.json())
        if self.server is not None:
            self.server.serve({s.dataset_id: s.path for s in tasks.serve})
        for scan in tasks.scans:
            self._report(scans=[self._scan(scan)])
        for t in tasks.transfers:
            if t.transfer_id not in self._running or not self._running[t.transfer_id].is_alive():
                self._start(t)
        return tasks

    def _report(
        self,
        scans: list[wire.ScanReport] | None = None,
        progress: list[wire.TransferProgress] | None = None,
    ) -> None:
        with self._lock:
            self._out.scans.extend(scans or [])
            self._out.progress.extend(progress or [])

    def _scan(self, task: wire.ScanTask) -> wire.ScanReport:
        if objstore.is_url(task.path):
            try:
                files = objstore.scan(task.path, self.storage_options)
            except errors.TauError as exc:
                return wire.ScanReport(dataset_id=task.dataset_id, error=exc.message)
            return _report(task.dataset_id, files)
        root = (self.data_root / task.path).resolve()
        if not root.exists():
            return wire.ScanReport(
                dataset_id=task.dataset_id, error=f"{task.path} does not exist under the data root"
            )
        return _report(task.dataset_id, manifest.scan(root))

    def _start(self, t: wire.TransferTask) -> None:
        th = threading.Thread(target=self._transfer, args=(t,), daemon=True)
        self._running[t.transfer_id] = th
        th.start()

    def _fetch(self, t: wire.TransferTask) -> transfer.Result:
        def progress(done: int, rate: float) -> None:
            p = wire.TransferProgress(transfer_id=t.transfer_id, bytes_done=done, rate_bps=rate)
            self._report(progress=[p])

        dest = self.data_root / t.dest_path
        res = self._fetch_local(t, dest, progress)
        if t.dest_url is not None:  # the local copy was the spool: move it to the store
            objstore.upload(dest, t.files, t.dest_url, self.storage_options)
            shutil.rmtree(dest, ignore_errors=True)
        return res

    def _fetch_local(
        self, t: wire.TransferTask, dest: Path, progress: Callable[[int, float], None]
    ) -> transfer.Result:
        if t.src_url is not None:
            return objstore.fetch(
                t.src_url,
                t.dataset_id,
                t.files,
                dest,
                options=self.storage_options,
                rate_limit_bps=t.rate_limit_bps,
                on_progress=progress,
                stop=self._stop,
            )
        src = self.peers.get(t.src_region)
        if src is None:
            raise transfer.TransferError(f"no data server known for region {t.src_region}")
        return transfer.fetch(
            src,
            t.dataset_id,
            t.files,
            dest,
            rate_limit_bps=t.rate_limit_bps,
            on_progress=progress,
            stop=self._stop,
        )

    def _transfer(self, t: wire.TransferTask) -> None:
        with self._lock:
            self._links_busy[t.src_region] = self._links_busy.get(t.src_region, 0) + 1
        try:
            res = self._fetch(t)
            done = wire.TransferProgress(
                transfer_id=t.transfer_id,
                bytes_done=res.bytes_total,
                rate_bps=res.rate_bps,
                finished=True,
                ok=True,
            )
        except errors.TauError as exc:
            log.warning("transfer %s failed: %s", t.transfer_id, exc)
            done = wire.TransferProgress(
                transfer_id=t.transfer_id, bytes_done=0, finished=True, error=exc.message
            )
        finally:
            with self._lock:
                self._links_busy[t.src_region] -= 1
        self._report(progress=[done])

    def start(self) -> DataAgent:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        for th in list(self._running.values()):
            th.join(timeout=10)

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.step()
            self._stop.wait(self.interval_s)


@dataclasses.dataclass(frozen=True)
class SidecarConfig:
    """Where this region's data plane listens and who its peers are.

    ``addresses``: local addresses (inside ``netns`` when set) the probe and data
    servers listen on; ``peers``: regions configured by hand (others are announced by the
    hub, see ``agent.data.peers``); ``egress``: $/GB per peer region, overriding the hub's.
    """

    data_root: Path
    addresses: tuple[str, ...]
    probe_port: int
    data_port: int
    peers: tuple[probes.Peer, ...] = ()
    egress: dict[str, float] = dataclasses.field(default_factory=dict)
    netns: str | None = None
    token: str | None = None
    delays: dict[str, float] = dataclasses.field(default_factory=dict)
    losses: dict[str, float] = dataclasses.field(default_factory=dict)
    probe_interval_s: float = 15.0
    probe_duration_s: float = 1.0
    storage_options: objstore.StorageOptions = dataclasses.field(default_factory=dict)


class Sidecar:
    """Probe server + data server + probe runner + data agent of one region."""

    def __init__(self, cfg: SidecarConfig, hub_url: str, token: str, cluster_id: str) -> None:
        self.cfg = cfg
        addrs = list(cfg.addresses)
        self.probe_server = probes.ProbeServer(
            addrs, cfg.probe_port, cfg.netns, cfg.delays, cfg.losses
        )
        self.data_server = dataserver.DataServer(
            cfg.data_root, addrs, cfg.data_port, cfg.netns, cfg.token, cfg.delays
        )
        # the data plane's syncs fail over between hub replicas as the agent's do
        self.http = httpx.Client(timeout=30, headers={"Authorization": f"Bearer {token}"})
        self.data = DataAgent(
            self.http,
            cluster_id,
            cfg.data_root,
            {},
            self.data_server,
            storage_options=cfg.storage_options,
            hubs=huburls.Failover(hub_url),
        )
        self.book = peers.PeerBook(list(cfg.peers), cfg.netns, cfg.egress, self._use_peer)
        for p in cfg.peers:
            self._use_peer(p)
        self.probes = probes.ProbeRunner(
            self.book.peers, cfg.netns, cfg.probe_interval_s, cfg.probe_duration_s, self.data.busy
        )

    def _use_peer(self, p: probes.Peer) -> None:
        port = p.data_port or self.cfg.data_port
        self.data.peers[p.region] = transfer.Source(p.host, port, self.cfg.netns, self.cfg.token)

    def start(self) -> Sidecar:
        self.cfg.data_root.mkdir(parents=True, exist_ok=True)
        self.probe_server.start()
        self.data_server.start()
        self.data.start()
        self.probes.start()
        return self

    def stop(self) -> None:
        self.probes.stop()
        self.data.stop()
        self.data_server.stop()
        self.probe_server.stop()
        self.http.close()

    # -- what the state report carries ------------------------------------------------
    def probe_results(self) -> dict[str, dict[str, float]]:
        return self.probes.latest()

    def cached_datasets(self) -> list[str]:
        return self.data_server.served()

    def endpoint(self) -> wire_hub.DataEndpoint:
        cfg = self.cfg
        return wire_hub.DataEndpoint(
            addresses=list(cfg.addresses), probe_port=cfg.probe_port, data_port=cfg.data_port
        )

    def announce(self, announced: list[wire_hub.PeerEndpoint]) -> None:
        """The hub's list of other regions; resolved in the probe thread."""
        self.book.announce(announced)


def add_args(p: argparse.ArgumentParser) -> None:
    """The daemon's data-plane options (the sidecar runs when ``--data-root`` is given)."""
    g = p.add_argument_group("data plane and probes")
    g.add_argument("--data-root", type=Path, default=None)
    g.add_argument("--region-address", action="append", default=[], help="listen address")
    g.add_argument("--netns", default=None, help="network namespace of the region")
    g.add_argument("--probe-port", type=int, default=8870)
    g.add_argument("--data-port", type=int, default=8871)
    g.add_argument("--peer", action="append", default=[], help="REGION=HOST[:PROBE:DATA]")
    g.add_argument("--egress", action="append", default=[], help="REGION=COST_PER_GB")
    g.add_argument("--delay", action="append", default=[], help="LOCAL_ADDR=MS (user RTT)")
    g.add_argument("--loss", action="append", default=[], help="LOCAL_ADDR=PCT (emulated)")
    g.add_argument("--data-token-file", type=Path, default=None)
    g.add_argument("--probe-interval", type=float, default=15.0)
    g.add_argument("--probe-duration", type=float, default=1.0)
    g.add_argument(
        "--storage-option",
        action="append",
        default=[],
        help="fsspec option for URL replicas: PROTOCOL.KEY=VALUE (s3.endpoint_url=...)",
    )


def _pairs(items: list[str], what: str) -> dict[str, str]:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key or not value:
            raise errors.UserError(f"bad {what} '{item}'", f"write it as KEY=VALUE, e.g. {what}")
        out[key] = value
    return out


def from_args(a: argparse.Namespace, hub_url: str, token: str, cluster_id: str) -> Sidecar | None:
    """A started sidecar from the daemon's options, or None without ``--data-root``."""
    if a.data_root is None:
        return None
    egress = {k: float(v) for k, v in _pairs(a.egress, "r1=0.02").items()}
    static = []
    for region, spec in _pairs(a.peer, "r1=10.0.0.2").items():
        host, *ports = spec.split(":")
        probe_port, data_port = (int(ports[0]), int(ports[1])) if ports else (a.probe_port, 0)
        static.append(probes.Peer(region, host, probe_port, data_port, egress.get(region, 0.0)))
    cfg = SidecarConfig(
        data_root=a.data_root,
        addresses=tuple(a.region_address) or ("127.0.0.1",),
        probe_port=a.probe_port,
        data_port=a.data_port,
        peers=tuple(static),
        egress=egress,
        netns=a.netns,
        token=a.data_token_file.read_text().strip() if a.data_token_file else None,
        delays={k: float(v) / 1000 for k, v in _pairs(a.delay, "10.0.0.1=20").items()},
        losses={k: float(v) / 100 for k, v in _pairs(a.loss, "10.0.0.1=1.5").items()},
        probe_interval_s=a.probe_interval,
        probe_duration_s=a.probe_duration,
        storage_options=_storage_options(a.storage_option),
    )
    return Sidecar(cfg, hub_url, token, cluster_id).start()


def _storage_options(items: list[str]) -> objstore.StorageOptions:
    out: objstore.StorageOptions = {}
    for key, value in _pairs(items, "s3.endpoint_url=http://10.0.0.9:9000").items():
        protocol, dot, option = key.partition(".")
        if not dot or not option:
            raise errors.UserError(
                f"bad --storage-option '{key}={value}'", "write it as PROTOCOL.KEY=VALUE"
            )
        out.setdefault(protocol, {})[option] = value
    return out
