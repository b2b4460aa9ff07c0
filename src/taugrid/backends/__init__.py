"""Execution backends: one documented ABC (``base.Backend``) and its implementations, on
Ray (the Ray Jobs API of a Ray cluster) and on Kubernetes (KubeRay objects under Kueue).

Layout: ``base`` (the ABC and its values) and ``errors`` (the boundary's exception
hierarchy); ``ray/`` (``RayBackend``, the dashboard transport and state, cordoning,
guest nodes, ``LocalRayCluster``); ``kube/`` (the kubernetes backend and its API, logs,
pods, node marks, serving); ``programs/`` (what runs on a cluster: the multi-worker
launcher, the serving driver, the pre-warm and cordon jobs). Import the modules, not
names from this package; Ray itself is imported lazily inside the functions that need
it.
"""

__all__: list[str] = []
