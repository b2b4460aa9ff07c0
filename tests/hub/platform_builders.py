"""Builders for the platform.yaml texts of hub tests: emulated one-node A100 regions.

``regions(...)`` writes the ``regions:`` block of clusters named like their regions, one
4-GPU node each; ``TENANCY`` is the one-team, one-workspace tail most tests use. A test
adds its own ``scheduling:`` (or tenancy) lines after them.
"""

from __future__ import annotations

__all__ = ["TENANCY", "one_cluster", "platform", "regions"]

_REGION = """\
  - name: {name}
{extra}    clusters:
      - name: {name}
        emulated_gpus: true
        node_pools: [{{name: a, gpu_model: A100-80G, gpus_per_node: 4, cpus_per_node: 16,
                      memory_per_node: 128Gi, nodes: 1, cost_per_gpu_hour: {cost}}}]
"""

TENANCY = """\
priority_classes: [{name: normal, value: 1000}]
profiles: [{name: default}]
teams: [{name: research, quotas: [{gpu_model: A100-80G, nominal: 8}]}]
workspaces: [{name: default, team: research, defaults: {priority: normal, profile: default}}]
default_workspace: default
"""


def regions(costs: dict[str, float], extra: dict[str, str] | None = None) -> str:
    """``regions:`` with one region (and cluster) per name, priced per GPU-hour.

    ``extra`` maps a region name to more of its keys (``"egress_cost_per_gb: 0.05"``).
    """
    more = extra or {}
    blocks = (
        _REGION.format(name=n, cost=c, extra=f"    {more[n]}\n" if n in more else "")
        for n, c in costs.items()
    )
    return "regions:\n" + "".join(blocks)


def platform(costs: dict[str, float], tail: str, extra: dict[str, str] | None = None) -> str:
    """A whole platform.yaml: the A100 GPU type, ``regions(costs, extra)``, then ``tail``."""
    head = "schema_version: 1\ngpu_types: [{name: A100-80G}]\n"
    return head + regions(costs, extra) + tail


def one_cluster(name: str, pools: list[str], tail: str = TENANCY) -> str:
    """A platform.yaml of one emulated A100 region and cluster ``name`` whose node pools
    are ``pools`` (each a YAML flow mapping), then ``tail``."""
    listed = "".join(f"          - {p}\n" for p in pools)
    return (
        "schema_version: 1\ngpu_types: [{name: A100-80G}]\nregions:\n"
        f"  - name: {name}\n    clusters:\n      - name: {name}\n        emulated_gpus: true\n"
        f"        node_pools:\n{listed}{tail}"
    )
