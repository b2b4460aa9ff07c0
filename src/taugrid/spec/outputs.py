"""What ``--artifact`` names: an output tau.yaml declares (``data.outputs[].name``) or a
path under the run's ``artifacts/``. One rule for ``tau run get`` (the CLI, which reads
a run's stored spec as plain data) and the model registry and serving (the hub)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["artifact_path"]


def artifact_path(outputs: Iterable[Mapping[str, Any]], ref: str) -> str:
    """The path under ``artifacts/`` that ``ref`` names: the path of the declared output
    named ``ref``, else ``ref`` itself (a file or folder of ``artifacts/``)."""
    for out in outputs:
        if out.get("name") == ref:
            return str(out["path"])
    return ref
