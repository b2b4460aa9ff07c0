"""The per-cluster agent: syncs with the hub (long-poll; reports kept in an outbox until
delivered), starts and watches attempts through a backend, uploads each run's record,
checks node health, pre-warms runtimes, serves and moves data, and runs guest nodes
of spans.

Layout (layered; ``.importlinter`` enforces it): ``daemon`` (the process) over ``agent``
(the sync loop) over ``attempts`` (trackers, pre-warm, guests, strays), ``data`` (data
plane and probes) and ``nodes`` (inventory, node checker), over ``records`` (record
sync, in-pod sync), ``hubclient`` and ``outbox``.
"""
