"""Execution backends: one documented ABC (``base.Backend``) and its implementations, on
Ray (the Ray Jobs API of a Ray cluster) and on Kubernetes (KubeRay objects under Kueue).

Modules: ``base`` (the ABC and its values), ``errors`` (the Ray boundary's exception
hierarchy), ``ray_jobs`` (``RayBackend`` over the Ray Jobs API), ``ray_http`` and
``ray_state`` (dashboard transport and cluster observation), ``ray_local`` (a real
local multi-node Ray cluster), ``launch`` (the multi-worker entrypoint run inside a
Ray Job), ``ray_cordon`` (cordoning faulty nodes), ``ray_guest`` (nodes lent to a
spanning run), ``prewarm_job`` and ``serve_driver`` (jobs the agent starts to pre-warm
a runtime and to serve a model); ``kubernetes`` (the kubernetes backend) with its
``kube_*`` helpers (API access, logs, pods, node marks, serving). Import the modules,
not names from this package; Ray itself is imported lazily inside the functions that
need it.
"""

__all__: list[str] = []
