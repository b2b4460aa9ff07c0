"""Ray nodes one cluster lends to another cluster's Ray cluster (a spanning run's guests).

A spanning run (``scheduling.spanning``) is one Ray cluster: the head's cluster runs the
job; each other member starts a *guest node* that joins the head's GCS with ``ray start
--address`` (and the head's Ray token), holding the resources of its worker group. A
guest node carries the label ``GUEST_LABEL`` (the attempt's token), so the head's agent
leaves it out of its own inventory (``ray_state.build_inventory``): it is lent capacity,
not the head cluster's.

``GuestNode`` starts, watches and stops one such node. Its processes carry a marker
(``backends.ray._procs``) so that stopping it never touches another Ray process on the host,
and ``stop_marked`` finds the nodes a killed agent left behind. Whether the node has
joined is read from its own log: ``ray start`` prints ``Ray runtime started`` once its
raylet registered with the head's GCS.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

from taugrid.backends.ray import _procs, ray_local, ray_state

__all__ = ["GUEST_LABEL", "JOINED_LINE", "GuestNode", "stop_marked"]

GUEST_LABEL = ray_state.GUEST_LABEL
"""Node label of a guest node: the token of the spanning attempt it joined for."""
JOINED_LINE = "Ray runtime started"
"""What ``ray start`` prints once the node is part of the head's cluster."""
_MARKER_PREFIX = "tau-guest/"


class GuestNode:
    """One guest node of ``shape`` for the attempt ``token``, joining ``address``.

    ``work_dir`` (the agent's, per order) holds the node's log and the head's token file
    (0600); Ray's temp dir is a short one under /tmp (its socket paths must stay under
    the kernel's 107 bytes). ``stop`` removes both.
    """

    def __init__(
        self,
        token: int,
        owner: str,
        shape: ray_local.NodeShape,
        address: str,
        work_dir: Path,
        auth_token: str | None,
    ) -> None:
        self.token, self.shape, self.address, self.work_dir = token, shape, address, work_dir
        self.marker = f"{_MARKER_PREFIX}{owner}/{token}"
        self.log = work_dir / "node.log"
        self._auth = auth_token
        self._proc: subprocess.Popen[bytes] | None = None
        self._temp: Path | None = None

    def start(self) -> None:
        """Start the node (``ray start --block --address``); returns at once."""
        self.work_dir.mkdir(parents=True, exist_ok=True)
        temp = self._temp = Path(tempfile.mkdtemp(prefix="tau-guest-", dir="/tmp"))
        token_file = None
        if self._auth is not None:
            token_file = self.work_dir / "ray-token"
            token_file.touch(mode=0o600)
            token_file.write_text(self._auth)
        ip = self.shape.ip or "127.0.0.2"
        argv = [
            *ray_local.start_argv(self.shape),
            f"--address={self.address}",
            *ray_local.node_args(self.shape, ip, temp),
        ]
        env = ray_local.node_env(self.marker, token_file, (1000, 5))
        with self.log.open("ab") as log:
            self._proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
                cwd=temp,
            )

    def running(self) -> bool:
        """The node's ``ray start`` process is alive."""
        return self._proc is not None and self._proc.poll() is None

    def joined(self) -> bool:
        """The node registered with the head (its log says so) and still runs."""
        if not self.running() or not self.log.exists():
            return False
        return JOINED_LINE in self.log.read_text(errors="replace")

    def failure(self) -> str:
        """Why the node is not running: the end of its log."""
        tail = self.log.read_text(errors="replace")[-600:] if self.log.exists() else ""
        code = self._proc.returncode if self._proc is not None else None
        return f"ray start exited with {code}: {tail.strip()[-400:]}"

    def stop(self, grace_s: float = 3.0) -> None:
        """Stop every process of the node; remove its work dir. Idempotent."""
        _procs.terminate(self.marker, grace_s=grace_s)
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()
        if self._proc is not None:
            self._proc.wait(timeout=10)
        shutil.rmtree(self.work_dir, ignore_errors=True)
        if self._temp is not None:
            shutil.rmtree(self._temp, ignore_errors=True)


def stop_marked(owner: str) -> set[int]:
    """Stop every guest node ``owner`` (an agent's cluster ID) started, by marker: what
    a killed agent left behind. Returns pids that survived (empty on success)."""
    return _procs.terminate(f"{_MARKER_PREFIX}{owner}/", prefix=True, grace_s=1.0)
