"""Resolve and render: tau.yaml + platform.yaml → RunSpec → what is sent to an engine.

Owns the pure pipeline between the researcher's file and the engines:

- ``render.resolve``  merges tau.yaml with the platform (profile > tau.yaml > workspace
  defaults > built-in defaults) into a ``render.runspec.RunSpec`` and fails closed;
- ``render.kuberay``  RunSpec → KubeRay RayJob / RayCluster / RayService or batch Job;
- ``render.kueue``    Platform → Kueue queues, flavors, priorities and workspace objects;
- ``render.rayjobs``  RunSpec → a Ray Jobs API submission (embedded backend);
- ``render.plan``     picks the renderer by workload kind and serialises manifests.

Everything here is a pure function of its arguments: no files, no network, no clock.
"""

from __future__ import annotations

__all__: list[str] = []
