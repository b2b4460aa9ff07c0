"""Kubernetes-style quantities (``64Gi``, ``500m``) and durations (``90s``, ``2h``).

Owns parsing and validation of both, and ``plural`` (``1 node``, ``3 nodes``) for the
counts that messages print; used as pydantic field validators by
``spec.models`` and ``platform.models`` and by renderers that need numbers.
"""

from __future__ import annotations

import re

__all__ = [
    "MAX_NODE_MEMORY",
    "check_duration",
    "check_gpus",
    "check_node_memory",
    "check_quantity",
    "gpus_out",
    "parse_duration",
    "parse_quantity_bytes",
    "plural",
]


def plural(count: float, word: str) -> str:
    """``count`` and ``word``, with an ``s`` unless the count is one (``1 GPU``, ``2 GPUs``)."""
    return f"{count:g} {word}" + ("" if count == 1 else "s")


_QUANTITY_RE = re.compile(r"^([0-9]+(?:\.[0-9]+)?)(Ki|Mi|Gi|Ti|Pi|K|M|G|T|P|k)?$")
_FACTORS = {
    None: 1,
    "k": 10**3,
    "K": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
    "P": 10**15,
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
    "Pi": 2**50,
}
MAX_NODE_MEMORY = 64 * 2**40
"""Most memory one worker or head may ask for (64Ti): more than any machine has."""
_DURATION_RE = re.compile(r"^([0-9]+(?:\.[0-9]+)?)(ms|s|m|h|d)$")
_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def parse_quantity_bytes(value: str) -> int:
    """``"64Gi"`` → bytes. Raises ValueError with the accepted forms."""
    m = _QUANTITY_RE.match(value.strip())
    if m is None:
        raise ValueError(
            f"'{value}' is not a memory quantity; write a number with a unit such as "
            "512Mi, 64Gi or 1Ti"
        )
    return int(float(m.group(1)) * _FACTORS[m.group(2)])


def parse_duration(value: str) -> float:
    """``"2h"`` → 7200.0 seconds. Raises ValueError with the accepted forms."""
    m = _DURATION_RE.match(value.strip())
    if m is None:
        raise ValueError(
            f"'{value}' is not a duration; write a number with a unit: 30s, 15m, 2h or 1d"
        )
    return float(m.group(1)) * _SECONDS[m.group(2)]


def check_quantity(value: str | None) -> str | None:
    """Field validator: accept ``None`` or a valid quantity."""
    if value is not None:
        parse_quantity_bytes(value)
    return value


def check_node_memory(value: str | None) -> str | None:
    """Field validator: a valid quantity of at most ``MAX_NODE_MEMORY``, said in its unit."""
    if value is None or parse_quantity_bytes(value) <= MAX_NODE_MEMORY:
        return value
    m = _QUANTITY_RE.match(value.strip())
    unit = m.group(2) if m else None
    limit = f"{MAX_NODE_MEMORY / _FACTORS[unit]:g}{unit or ' bytes'}"
    raise ValueError(
        f"'{value}' is more than the {limit} one node can have; ask for what one worker "
        "needs, e.g. 64Gi, and add workers for more"
    )


def check_gpus(value: float | None) -> float | None:
    """Field validator for GPUs per worker: a whole number, or a share of one GPU below 1
    (``0.25``, ``0.5``: workers share a GPU, Ray's fractional GPU resource). Whole values
    come back as ``int`` so that they print as ``2``, not ``2.0``."""
    if value is None:
        return None
    if value >= 1 and value != int(value):
        raise ValueError(
            f"{value:g} GPUs: above 1 a worker takes whole GPUs; ask for {int(value)} or "
            f"{int(value) + 1}, or for a share of one GPU below 1 (e.g. 0.5)"
        )
    if 0 < value < 0.01:
        raise ValueError(f"{value:g} of a GPU is too small a share: use at least 0.01")
    return int(value) if value == int(value) else round(value, 4)


def gpus_out(value: float | None) -> int | float | None:
    """Field serializer for GPUs per worker: whole values as integers (``2``, not ``2.0``),
    so that configs hash and print as they did before shares of a GPU existed."""
    return int(value) if value is not None and value == int(value) else value


def check_duration(value: str | None) -> str | None:
    """Field validator: accept ``None`` or a valid duration."""
    if value is not None:
        parse_duration(value)
    return value
