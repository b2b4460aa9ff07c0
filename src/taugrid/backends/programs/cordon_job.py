"""The cordon job: hold every GPU of one Ray node so that no new GPU work lands there.

Runs *inside* a Ray cluster as the entrypoint of a Ray job
(``python -m taugrid.backends.programs.cordon_job``), like
``backends.programs.prewarm_job``. It reads
the node to cordon (``TAU_CORDON_NODE``), looks up the node's ``GPU`` and
``accelerator_type:*`` totals, and starts one zero-CPU actor pinned to that node
(``NodeAffinitySchedulingStrategy``, hard) that requests all of them. While the actor
lives, Ray's scheduler sees the node's GPUs as taken; CPU-only work (and the node's
own Ray services: raylet, dashboard agent, job agent) is untouched. The actor waits
for GPUs still held by work on the node; the agent stops that work itself.

Prints ``TAU_CORDON {json}`` once the GPUs are held (``node``, ``held``), then sleeps
until the job is stopped; stopping the job ends the actor and gives the GPUs back.
A node without GPUs is "held" at once with nothing to hold and the job exits 0.
"""

from __future__ import annotations

import json
import os
import sys
import time

__all__ = ["ENV_NODE", "LINE_PREFIX", "main"]

ENV_NODE = "TAU_CORDON_NODE"
LINE_PREFIX = "TAU_CORDON "


class _Holder:
    def ready(self) -> bool:
        return True


def main() -> int:
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    node = os.environ[ENV_NODE]
    ray.init()
    rows = [n for n in ray.nodes() if n["NodeID"] == node and n["Alive"]]  # type: ignore[no-untyped-call]
    if not rows:
        print(f"node {node} is not alive in this cluster", file=sys.stderr, flush=True)
        return 1
    total: dict[str, float] = rows[0]["Resources"]
    held = {k: v for k, v in total.items() if k.startswith("accelerator_type:")}
    gpus = float(total.get("GPU", 0))
    if gpus or held:
        holder = (
            ray.remote(num_cpus=0, num_gpus=gpus, resources=held)(_Holder)
            .options(scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False))
            .remote()
        )
        ray.get(holder.ready.remote())  # type: ignore[attr-defined]
    print(LINE_PREFIX + json.dumps({"node": node, "held": {"GPU": gpus, **held}}), flush=True)
    while gpus or held:
        time.sleep(3600)
    return 0


if __name__ == "__main__":
    sys.exit(main())
