"""The Ray backend: ``RayBackend`` over the Ray Jobs API, the dashboard transport and
state, cordoning, guest nodes, and ``LocalRayCluster`` (a real local Ray cluster).
"""
