"""The hub: one control plane for every region and every user, grouped by concern and
layered (top to bottom; ``.importlinter`` enforces it):

- ``server``: the process: ASGI app, daemon, scheduling loop, leader loop;
- ``api``: the HTTP routes (``/v1``) and their authentication;
- ``serving``, ``data``, ``agents``: deployments and the endpoint router; datasets,
  replication and staging; the agent channel (syncs, reports);
- ``placement``: the scheduling snapshot, relocation, pre-warm hints;
- ``metrics``: Prometheus metrics and the utilisation history;
- ``tenancy``: workspaces, quotas, quota requests, cost;
- ``runs``: runs and attempts (lifecycle, fencing, results, sweeps, registry, tracking);
- ``core``: the process-wide context, secrets vault, wake-ups, replica, node pools.

docs/ARCHITECTURE.md, "Inside the hub", maps its modules.
"""
