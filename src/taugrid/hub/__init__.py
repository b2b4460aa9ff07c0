"""The hub: the HTTP API and portal host, the scheduler loop around the pure core, the
agent channel, run lifecycle (attempts, fencing, phases, retries), sweeps, serving, the
model registry, secrets, data placement, metrics and cost, tenancy, and hub replicas (HA on
PostgreSQL). docs/ARCHITECTURE.md, "Inside the hub", maps its modules.
"""
