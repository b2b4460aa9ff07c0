"""The lab's topology file: regions, their GPU price, and links between them.

    regions: [r0, r1, r2]            # or a count: regions: 3 (names r0..r2)
    gpu_cost: {r0: 3.0, r1: 1.0}     # $/GPU-hour per region (default 1.0)
    gpus_per_region: 2               # emulated A100-80G on one Ray node per region
    ray_base: 127.0.0.60             # region i's Ray node on this address + i
    records:                         # the record store (platform.yaml ``records``);
      url: s3://bucket/prefix        # default: the lab's shared records/ directory
      endpoint_url: http://127.0.0.1:8333
      access_key_env: MY_KEY         # credentials: environment variables of the
      secret_key_env: MY_SECRET      # shell that runs ``tau lab up``
    default_link: {mbit: 1000, rtt_ms: 1, egress_per_gb: 0.0}
    links:                           # symmetric; pairs not listed get default_link
      - {a: r0, b: r1, mbit: 100, rtt_ms: 20, egress_per_gb: 0.02, loss_pct: 1}

Every pair of regions is linked (full mesh). ``mbit`` is shaped with kernel ``tbf``,
``rtt_ms`` is added in user space, ``loss_pct`` drops that share of probe echoes (in
user space too, as kernel ``netem`` is not available; transfers are not affected),
``egress_per_gb`` is what the source region charges for data leaving it (reported with
the probes, priced into placement estimates).
"""

from __future__ import annotations

import ipaddress
import itertools
from pathlib import Path
from typing import Any

import pydantic
import yaml

from taugrid import errors
from taugrid.lab import net
from taugrid.platform import models as pm

__all__ = ["LinkModel", "Topology", "load"]


class LinkModel(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid")
    a: str = ""
    b: str = ""
    mbit: float = pydantic.Field(default=1000.0, gt=0, le=100_000)
    rtt_ms: float = pydantic.Field(default=1.0, ge=0, le=10_000)
    egress_per_gb: float = pydantic.Field(default=0.0, ge=0)
    loss_pct: float = pydantic.Field(default=0.0, ge=0, le=100)


class Topology(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid")
    regions: list[str] | int = 3
    gpu_cost: dict[str, float] = pydantic.Field(default_factory=dict)
    gpus_per_region: int = pydantic.Field(default=2, ge=0, le=16)
    default_link: LinkModel = pydantic.Field(default_factory=LinkModel)
    links: list[LinkModel] = pydantic.Field(default_factory=list)
    ray_base: ipaddress.IPv4Address = ipaddress.IPv4Address("127.0.0.60")
    records: pm.RecordStoreSpec | None = None

    @pydantic.field_validator("ray_base")
    @classmethod
    def _loopback(cls, ip: ipaddress.IPv4Address) -> ipaddress.IPv4Address:
        if not ip.is_loopback or ip == ipaddress.IPv4Address("127.0.0.1"):
            raise ValueError("ray_base must be a loopback address other than 127.0.0.1")
        return ip

    def ray_ip(self, i: int) -> str:
        """Region ``i``'s Ray node address."""
        return str(self.ray_base + i)

    def names(self) -> list[str]:
        if isinstance(self.regions, int):
            return [f"r{i}" for i in range(self.regions)]
        return list(self.regions)

    def link_specs(self) -> tuple[net.LinkSpec, ...]:
        given = {frozenset((ln.a, ln.b)): ln for ln in self.links}
        out = []
        for a, b in itertools.combinations(self.names(), 2):
            ln = given.get(frozenset((a, b)), self.default_link)
            out.append(net.LinkSpec(a, b, ln.mbit, ln.rtt_ms, ln.egress_per_gb, ln.loss_pct))
        return tuple(out)


def load(path: Path | None, regions: int | None = None) -> Topology:
    """The topology in ``path`` (default: ``regions`` regions at 1 Gbit/s, 1 ms)."""
    doc: dict[str, Any] = {}
    if path is not None:
        try:
            doc = yaml.safe_load(path.read_text()) or {}
            topo = Topology.model_validate(doc)
        except (OSError, yaml.YAMLError, pydantic.ValidationError) as exc:
            raise errors.UserError(
                f"{path}: not a valid lab topology: {exc}",
                "see `taugrid.lab.topology` for the format",
            ) from exc
    else:
        topo = Topology()
    if regions is not None and (path is None or "regions" not in doc):
        topo = topo.model_copy(update={"regions": regions})
    names = topo.names()
    bad = [f"{ln.a}-{ln.b}" for ln in topo.links if ln.a not in names or ln.b not in names]
    if bad or len(set(names)) != len(names) or not names:
        raise errors.UserError(
            f"lab topology: unknown or duplicate regions ({', '.join(bad) or names})",
            "list each region once and link only listed regions",
        )
    return topo
