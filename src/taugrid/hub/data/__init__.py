"""The data plane on the hub: datasets, replicas, replication and the link matrix, and
staging a placed run's data before dispatch.
"""
