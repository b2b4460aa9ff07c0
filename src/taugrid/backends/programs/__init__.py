"""Programs that run on a cluster, started as a run's or the agent's job: the
multi-worker launcher, the serving driver and its traffic reader, the pre-warm and
cordon jobs.
"""
