"""The data plane: datasets, replicas, transfers, link bandwidth budgets and runtime cache
keys (layer 3). The record stores that hold run records are ``taugrid.record``.

- ``manifest``  scan a dataset directory into a manifest (path, size, sha256 per file)
- ``transfer``  copy a dataset between regions over HTTP with Range resume and sha256
                verification; optional rate limit
- ``budget``    per-link bandwidth budget: a transfer reserves bandwidth, others queue
- ``netns``     sockets inside a Linux network namespace (the lab's regions)
- ``wire``      payloads of the data API (``/v1/datasets``, ``/v1/links``, agent tasks)
- ``objstore``  replicas kept in object storage (fsspec URLs)
- ``runtimes``  runtime environments as cache keys (what "warm" means for a region)

The hub keeps the durable state (``store.data``); agents move the bytes
(``agent.data.dataserver`` serves, ``agent.data.datasync`` fetches).
"""
