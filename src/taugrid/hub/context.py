"""The hub's process-wide context: configuration, stores, platform and data root.

Owns construction of everything a request handler or the scheduling loop needs, so
that both receive one ``Hub`` object instead of reaching for globals.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import sqlalchemy as sa

from taugrid.hub import metrics
from taugrid.platform import load as platform_load
from taugrid.platform import models as pm
from taugrid.store import auth, clusters, db, runs

__all__ = ["Hub", "HubConfig"]


@dataclasses.dataclass(frozen=True)
class HubConfig:
    """Knobs of one hub; defaults suit the embedded platform."""

    tau_home: Path
    database_url: str | None = None
    platform_file: Path | None = None
    lease_s: float = 30.0
    grace_s: float = 120.0
    cycle_s: float = 0.5

    @property
    def data_root(self) -> Path:
        return Path(os.environ.get("TAU_DATA_ROOT") or self.tau_home / "data")


class Hub:
    """Stores + platform + config: what every hub component works with."""

    def __init__(self, config: HubConfig, engine: sa.Engine | None = None) -> None:
        self.config = config
        config.tau_home.mkdir(parents=True, exist_ok=True)
        url = config.database_url or db.database_url(config.tau_home)
        self.engine = engine or db.open_engine(url)
        self.runs = runs.RunStore(self.engine)
        self.clusters = clusters.ClusterStore(self.engine)
        self.auth = auth.AuthStore(self.engine)
        self.platform: pm.Platform = (
            platform_load.load_platform(config.platform_file)
            if config.platform_file
            else platform_load.default_platform()
        )
        self.data_root = config.data_root
        self.metrics = metrics.Metrics(self)
