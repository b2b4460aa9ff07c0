"""Execution backends: one documented ABC (``base.Backend``) and its implementations.

Modules: ``base`` (the ABC and its values), ``errors`` (the Ray boundary's exception
hierarchy), ``ray_jobs`` (``RayBackend`` over the Ray Jobs API), ``ray_http`` and
``ray_state`` (dashboard transport and cluster observation), ``ray_local`` (a real
local multi-node Ray cluster), ``launch`` (the multi-worker entrypoint run inside a
Ray Job). Import the modules, not names from this package; Ray itself is imported
lazily inside the functions that need it.
"""

__all__: list[str] = []
