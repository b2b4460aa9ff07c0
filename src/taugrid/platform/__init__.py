"""platform.yaml: its models (regions, clusters, GPU types, profiles, workspaces,
queues, quotas), the loader (the same line-aware loader as tau.yaml), cross-checks, and
the TauGrid CRDs rendered from it. The packaged ``default_local.yaml`` is the embedded
platform's.
"""
