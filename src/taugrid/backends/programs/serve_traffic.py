"""Requests/s and latency of a Serve app, from its HTTP proxy's access log.

All traffic to a TauGrid Serve app enters through the one proxy on the cluster's head
node (``proxy_location: HeadOnly``), which logs every request as
``... -- METHOD /route STATUS 12.3ms``. The serve driver reads the tail of that log
through Ray's state API (any node can) every few seconds and summarises the requests
under the app's route in the last ``WINDOW_S`` seconds: ``summarise`` is pure.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable
from typing import Any

__all__ = ["WINDOW_S", "proxy_log_lines", "summarise"]

WINDOW_S = 30.0
_LINE = re.compile(
    r"^\w+ (?P<ts>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) .* -- "
    r"(?P<method>[A-Z]+) (?P<path>\S+) (?P<status>\d{3}) (?P<ms>[\d.]+)ms\s*$"
)


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def summarise(lines: Iterable[str], route: str, now: float) -> dict[str, Any]:
    """``requests_per_s``, ``p50_ms``/``p99_ms`` and ``errors`` (5xx) over the window."""
    latencies: list[float] = []
    errors = 0
    prefix = route.rstrip("/")
    for line in lines:
        m = _LINE.match(line)
        if m is None or not (m["path"] == route or m["path"].startswith(prefix + "/")):
            continue
        ts = dt.datetime.strptime(m["ts"], "%Y-%m-%d %H:%M:%S,%f").timestamp()
        if now - ts > WINDOW_S:
            continue
        latencies.append(float(m["ms"]))
        errors += m["status"].startswith("5")
    return {
        "window_s": WINDOW_S,
        "requests_per_s": round(len(latencies) / WINDOW_S, 2),
        "p50_ms": round(_percentile(latencies, 0.5), 1) if latencies else None,
        "p99_ms": round(_percentile(latencies, 0.99), 1) if latencies else None,
        "errors": errors,
    }


def proxy_log_lines(head_ip: str, tail: int = 5000) -> list[str]:
    """The last ``tail`` lines of the head node's Serve proxy log (Ray state API)."""
    from ray.util import state

    heads = state.list_nodes(filters=[("is_head_node", "=", True)], raise_on_missing_output=False)
    if not heads:
        return []
    text = "".join(
        state.get_log(node_id=heads[0].node_id, filename=f"serve/proxy_{head_ip}.log", tail=tail)
    )
    return text.splitlines()
