"""The run record: its layout, the job's environment contract, the record stores, and
checkpoint commit and adoption (a layer below render, scheduling and lifecycle, above
platform; docs/ARCHITECTURE.md, "The run record" and "Record stores").

- ``layout``       keys, markers and step naming (pure; imports nothing from taugrid)
- ``jobenv``       the names of the job's environment variables (pure; likewise)
- ``files``        atomic writes and the record's digests on a filesystem
- ``store``        the ``RecordStore`` interface, its errors, and the local directory
- ``s3``           the object-store implementation (fsspec) and ``open_store``
- ``run``          ``RunRecord``: one run's record and every write the hub makes
- ``checkpoints``  committing a step, the latest one, adopting uncommitted ones

The SDK (in-job and ``tau platform validate``), the agent, the hub, the backends and
the renderers import it; it imports only ``platform`` and ``errors``.
"""
