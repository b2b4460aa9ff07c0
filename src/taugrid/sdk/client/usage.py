"""Cost and utilisation calls of the hub client (``tau run status``, ``tau workspace
status``, the portal's cost and utilisation views).

Functions take a ``sdk.client.client.Client``; errors are the client's. Amounts are what the
hub's ``hub.tenancy.cost`` computes: GPU-hours x the pool's price plus egress, in ``currency``.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from taugrid.sdk.client import client

__all__ = ["cost_summary", "money", "run_cost", "teams", "utilization"]

Doc = dict[str, Any]


def run_cost(c: client.Client, ref: str) -> Doc:
    """One run's cost with its attempts (GPU-hours, price) and data copies (GB, price)."""
    out: Doc = c.request("GET", f"/v1/runs/{quote(ref)}/cost")
    return out


def cost_summary(c: client.Client) -> Doc:
    """Cost per workspace and per team, with the month to date (yours, or all for an admin)."""
    out: Doc = c.request("GET", "/v1/cost")
    return out


def teams(c: client.Client) -> list[Doc]:
    """Admin: each team's cohort and quotas with GPUs held and borrowed."""
    out: list[Doc] = c.request("GET", "/v1/admin/teams")
    return out


def utilization(c: client.Client) -> Doc:
    """Admin: GPU utilisation per region over time as the hub sampled it."""
    out: Doc = c.request("GET", "/v1/admin/utilization")
    return out


def money(amount: float, currency: str = "USD") -> str:
    """``$12.34`` (or ``12.34 EUR``); sub-cent amounts above zero show as ``<$0.01``."""
    sign = "$" if currency == "USD" else ""
    tail = "" if sign else f" {currency}"
    if 0 < amount < 0.005:
        return f"<{sign}0.01{tail}"
    return f"{sign}{amount:,.2f}{tail}"
