"""Node health: what a node's devices, disks and memory say, and what that means.

``signals`` reads samples (NVML where GPUs are present, a documented fault-injection
file otherwise, the host's disks and memory), ``checks`` turns a sample into node
conditions, ``hysteresis`` decides when conditions become marks and when marks clear,
``logscan`` finds device and collective errors in a job's log, and ``stall`` says when
an attempt has stopped making progress. Pure logic plus local reads: the agent wires
these to its hub client and its Ray backend.
"""
