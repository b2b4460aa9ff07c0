"""The kubernetes backend: a cluster's runs as KubeRay objects under Kueue, with its API
access, logs, pods, node marks and serving.
"""
