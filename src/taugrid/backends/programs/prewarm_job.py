"""The pre-warm job: build one runtime environment on chosen Ray nodes, then exit.

Runs *inside* a Ray cluster as the entrypoint of a Ray job
(``python -m taugrid.backends.programs.prewarm_job``), like
``backends.programs.launch``. It reads the
runtime_env to build (``TAU_PREWARM_ENV``, JSON) and the target node IDs
(``TAU_PREWARM_NODES``, comma-separated), starts one zero-CPU task with that
runtime_env pinned to each node (``NodeAffinitySchedulingStrategy``, hard), and
prints one ``TAU_PREWARM {json}`` line per node: ``node``, ``ok``, ``seconds`` and,
on failure, ``error`` (Ray's runtime-env setup error, which carries pip's output).

Ray builds a task's runtime_env before it starts the worker and keeps the result in
the node's URI cache (``RAY_RUNTIME_ENV_PIP_CACHE_SIZE_GB``, 10 GB by default) after
the task ends, so a later job with the same ``pip`` field finds it built. Exit status
0 when every node built it, 1 otherwise.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

__all__ = ["ENV_NODES", "ENV_RUNTIME", "LINE_PREFIX", "main"]

ENV_RUNTIME = "TAU_PREWARM_ENV"
ENV_NODES = "TAU_PREWARM_NODES"
LINE_PREFIX = "TAU_PREWARM "


def _where() -> str:
    return sys.prefix


def main() -> int:
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    runtime_env: dict[str, Any] = json.loads(os.environ[ENV_RUNTIME])
    nodes = [n for n in os.environ[ENV_NODES].split(",") if n]
    ray.init()
    probe = ray.remote(num_cpus=0, max_retries=0)(_where)
    started = time.monotonic()
    refs = {
        n: probe.options(
            runtime_env=runtime_env,
            scheduling_strategy=NodeAffinitySchedulingStrategy(n, soft=False),
        ).remote()
        for n in nodes
    }
    failed = 0
    for node, ref in refs.items():
        doc: dict[str, Any] = {"node": node}
        try:
            ray.get(ref)
            doc["ok"] = True
        except Exception as exc:  # RuntimeEnvSetupError carries pip's output
            doc.update(ok=False, error=str(exc)[-4000:])
            failed += 1
        doc["seconds"] = round(time.monotonic() - started, 3)
        print(LINE_PREFIX + json.dumps(doc), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
