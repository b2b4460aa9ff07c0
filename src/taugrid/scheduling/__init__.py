"""The pure scheduling core, shared by the hub and the simulator: admission (Kueue
semantics: queues, quotas, borrowing, preemption), filter-then-score placement
plugins, GPU packing, spanning and pre-warm choices over an immutable ``Snapshot``, and
a sweep's trials and early-stopping rules (``sweeps``).
No I/O: no store, backend, Ray, SQL or HTTP (an import-linter contract says so).
"""
