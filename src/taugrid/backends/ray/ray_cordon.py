"""Cordon and uncordon Ray nodes for GPU work, without harming the node's Ray services.

A node marked faulty (ECC, disk, lost) must take no new GPU work, and must come back
when the mark is cleared. Ray's own drain (``GcsClient.drain_node``) cannot do that:
a draining raylet shuts itself down once idle, and on the head node that takes the
dashboard's job agent with it, so every later job submission of the region fails;
a drain cannot be undone either. Instead a cordon is one small Ray job per node
(``backends.programs.cordon_job``) whose zero-CPU actor holds all of the node's GPUs;
stopping that job uncordons the node.

``GpuCordon`` remembers its cordon jobs in a JSON file (node ID → submission ID) so a
restarted agent finds and stops them; cordoning a node twice submits nothing.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

from taugrid import errors
from taugrid.backends import base
from taugrid.backends.programs import cordon_job
from taugrid.lifecycle import node_ids

__all__ = ["GpuCordon"]

_META = "taugrid.io/cordon"


class GpuCordon:
    """Cordons (``cordon``) and uncordons (``uncordon``) nodes of one Ray cluster."""

    def __init__(self, backend: base.Backend, state_file: Path | None = None) -> None:
        self.backend = backend
        self.state_file = state_file
        self.jobs: dict[str, str] = {}
        if state_file is not None and state_file.exists():
            self.jobs = dict(json.loads(state_file.read_text()))

    def cordon(self, node_id: str, why: str) -> None:
        """Hold every GPU of ``node_id`` (a Ray job); raises ``TauError`` if Ray refuses."""
        if node_id in self.jobs:
            return
        sid = f"tau-cordon-{node_ids.short(node_id)}-{uuid.uuid4().hex[:6]}"
        self.backend.submit(
            base.Submission(
                submission_id=sid,
                entrypoint="python -m taugrid.backends.programs.cordon_job",
                entrypoint_num_cpus=0,
                runtime_env={"env_vars": {cordon_job.ENV_NODE: node_id}},
                metadata={_META: node_id, "taugrid.io/reason": why[:200]},
            )
        )
        self.jobs[node_id] = sid
        self._save()

    def uncordon(self, node_id: str) -> None:
        """Give the node's GPUs back (stop its cordon job); a no-op if not cordoned."""
        sid = self.jobs.get(node_id)
        if sid is None:
            return
        try:
            self.backend.stop(sid)
        except errors.TauError:
            if self._running(sid):  # already ended (the node died, say) is fine
                raise
        del self.jobs[node_id]
        self._save()

    def _running(self, sid: str) -> bool:
        try:
            return not self.backend.status(sid).state.terminal
        except errors.TauError:
            return False

    def _save(self) -> None:
        if self.state_file is not None:
            self.state_file.parent.mkdir(parents=True, exist_ok=True)
            self.state_file.write_text(json.dumps(self.jobs))
