"""Each lab component's own root, and the private mount namespace that keeps it there.

The lab stands in for separate machines, so no component may read or write another's
files. Under the lab home (``$TAU_HOME/lab``):

    hub/              the hub's root (its TAU_HOME: database, credentials, logs)
    regions/<r>/      region r's root: its agent's TAU_HOME (state, job scratch, Ray
                      state, code, logs, its own copies of platform.yaml and its
                      tokens), ``data/`` (datasets), ``tmp/`` (TMPDIR of the agent,
                      its Ray nodes and jobs)
    records/          the default record store, when the topology names no object store
                      (the stand-in for one; with ``records: {url: s3://...}`` the
                      object store, reached over the network, is the only shared storage)

``confine`` wraps a component's command in ``unshare --mount`` (a private mount
namespace, inherited by everything it starts: Ray nodes, jobs) in which an empty,
read-only tmpfs covers the hub's root and every other region's root: a component that
opens a path there finds nothing and cannot write (EROFS), so a regression fails
loudly instead of silently sharing a directory. Ray's own socket directories stay
under /tmp (Unix socket paths must be short), one per region's cluster.
"""

from __future__ import annotations

import shlex
import shutil
from pathlib import Path

from taugrid import home as tau_home

__all__ = ["HIDDEN_FS", "Roots", "confine"]

HIDDEN_FS = "tau-lab-hidden"
"""The tmpfs's source name (in /proc/<pid>/mountinfo of a confined process)."""


class Roots:
    """The directories of one lab rooted at ``home``."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.hub = home / "hub"
        self.records = home / "records"

    def region(self, name: str) -> Path:
        return self.home / "regions" / name

    def make(self, regions: list[str]) -> None:
        """Create every root (mount points must exist before any component starts)."""
        for path in (self.hub, self.records, *(self.region(r) for r in regions)):
            path.mkdir(parents=True, exist_ok=True)
        for r in regions:
            (self.region(r) / "tmp").mkdir(exist_ok=True)
            tau_home.agents(self.region(r)).mkdir(exist_ok=True)

    def hidden_from_hub(self, regions: list[str]) -> list[Path]:
        return [self.region(r) for r in regions]

    def hidden_from_region(self, name: str, regions: list[str]) -> list[Path]:
        return [self.hub, *(self.region(r) for r in regions if r != name)]

    def provision(self, name: str, platform: Path, data_token: Path) -> Path:
        """Give region ``name`` its own copies of what its agent reads at start (as one
        would copy them to another machine); returns its platform file."""
        root = self.region(name)
        token = tau_home.agent_token(root, name)
        shutil.copyfile(tau_home.agent_token(self.hub, name), token)
        token.chmod(0o600)
        shutil.copyfile(data_token, root / "data.token")
        (root / "data.token").chmod(0o600)
        shutil.copyfile(platform, root / "platform.yaml")
        return root / "platform.yaml"


def confine(argv: list[str], hidden: list[Path]) -> list[str]:
    """``argv`` run in a private mount namespace where each of ``hidden`` is an empty,
    read-only directory (needs root); exec'd, so the pid is the component's."""
    mounts = [
        f"mount -t tmpfs -o ro,size=4k,mode=0555 {HIDDEN_FS} {shlex.quote(str(p))}" for p in hidden
    ]
    script = " && ".join([*mounts, 'exec "$@"'])
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh", *argv]
