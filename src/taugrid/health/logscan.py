"""Device and collective errors in a job's log: what they are and whether a node is to blame.

Each pattern has a ``kind`` and says whether the error points at the node
(``node=True``: the GPU or its driver misbehaved — a retry elsewhere should work, and
the node is suspect) or at the job (an out-of-memory error from the job's own batch
size points at the job, not the node). ``fatal`` errors mean the job cannot go on even
if its process has not exited yet (a hung NCCL collective after a watchdog timeout):
the agent stops the attempt.
"""

from __future__ import annotations

import dataclasses
import re

__all__ = ["Finding", "scan"]


@dataclasses.dataclass(frozen=True)
class Finding:
    kind: str
    node: bool
    fatal: bool
    line: str


_PATTERNS: tuple[tuple[str, bool, bool, re.Pattern[str]], ...] = (
    ("xid", True, True, re.compile(r"\bNVRM: Xid\b|\bXid \(PCI:|\bXid error\b", re.I)),
    (
        "ecc",
        True,
        True,
        re.compile(r"uncorrectable ECC error|ECC error encountered|CUDA_ERROR_ECC_UNCORRECTABLE"),
    ),
    (
        "gpu",
        True,
        True,
        re.compile(
            r"CUDA error: (an illegal memory access|unspecified launch failure|"
            r"GPU is lost|the launch timed out)|fallen off the bus|CUDA_ERROR_LAUNCH_FAILED",
            re.I,
        ),
    ),
    (
        "nccl",
        True,
        True,
        re.compile(
            r"NCCL (WARN|error).*(timeout|timed out|unhandled system error|remote process)"
            r"|Watchdog caught collective operation timeout|NCCL communicator was aborted",
            re.I,
        ),
    ),
    (
        "oom",
        False,
        False,
        re.compile(r"CUDA out of memory|OutOfMemoryError|CUBLAS_STATUS_ALLOC_FAILED", re.I),
    ),
)


def scan(text: str) -> list[Finding]:
    """Every line of ``text`` that matches a pattern (first pattern per line)."""
    out = []
    for line in text.splitlines():
        for kind, node, fatal, pattern in _PATTERNS:
            if pattern.search(line):
                out.append(Finding(kind, node, fatal, line.strip()[:300]))
                break
    return out


def first_node_fault(text: str) -> Finding | None:
    """The first finding that points at a node, if any."""
    return next((f for f in scan(text) if f.node), None)
