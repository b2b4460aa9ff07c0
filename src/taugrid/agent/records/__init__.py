"""A run's record on its way out of the cluster: the agent's record sync and the sync
inside a Kubernetes pod.
"""
