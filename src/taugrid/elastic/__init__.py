"""Elastic pipelines: size a chain of stages for a target throughput and keep it there.

``sizing`` (pure: measured rates → replicas and batch size per stage, bottleneck,
shortfall), ``controller`` (pure: resize decisions from live measurements),
``stages`` (load stage callables, run a batch with dead-lettering), ``profile``
(measure each stage on a sample, for ``tau run plan``) and ``ray_exec`` (the thin Ray
Data side). Nothing here imports the hub, the agent or the SDK: the in-job driver
(``sdk.job.pipeline_job``) wires metrics in through a callback.
"""
