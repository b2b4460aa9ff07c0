"""Client-side preparation of a submission: find tau.yaml, validate it, zip the code.

Owns what happens before anything is sent: the target (a directory with tau.yaml, or a
file) is resolved, the file is validated locally (errors carry file:line:col), and the
working directory is zipped without ``run.excludes`` and the usual junk (VCS, caches,
virtualenvs). The script the entrypoint names — a script path (``train.py``) or the
first ``.py`` word of a command (``python train.py``) — must exist there
(``spec.workdir``). Nothing is sent when validation fails.

``check`` is those local checks alone (``tau run validate`` makes them too);
``LOCAL_CHECKS`` names them and ``PLATFORM_CHECKS`` what the hub checks on top when it
resolves a submission (``POST /v1/runs``, also as a ``dry_run`` that stores nothing).
"""

from __future__ import annotations

import dataclasses
import fnmatch
import io
import zipfile
from pathlib import Path
from typing import Any

from taugrid.errors import UserError
from taugrid.sdk.client import provenance
from taugrid.spec import load as spec_load
from taugrid.spec import models as sm
from taugrid.spec import workdir as spec_workdir

__all__ = [
    "LOCAL_CHECKS",
    "PLATFORM_CHECKS",
    "Checked",
    "Prepared",
    "check",
    "find_config",
    "prepare",
    "zip_dir",
]

LOCAL_CHECKS = ("schema", "working_dir", "entrypoint")
"""What ``check`` makes sure of, on this machine."""
PLATFORM_CHECKS = (
    "workspace",
    "profile",
    "priority",
    "regions",
    "gpu_model",
    "capacity",
    "datasets",
    "output_store",
)
"""What the hub checks when it resolves a submission (``render.resolve``, the capacity,
membership, ``data.inputs`` and output checks of ``hub.api.api.submit_run``)."""

_ALWAYS_EXCLUDED = (
    ".git",
    ".hg",
    "__pycache__",
    ".venv",
    "venv",
    ".mypy_cache",
    ".pytest_cache",
    ".ruff_cache",
    ".tau-local",
    "*.pyc",
    ".DS_Store",
)
_MAX_BYTES = 100 * 2**20


@dataclasses.dataclass(frozen=True)
class Checked:
    """A tau.yaml that passed the local checks, and its working directory."""

    path: Path
    text: str
    config: sm.TauConfig
    workdir: Path


@dataclasses.dataclass(frozen=True)
class Prepared:
    path: Path
    text: str
    config: sm.TauConfig
    code_zip: bytes
    source: dict[str, Any] | None = None
    """The working directory's git commit, branch and dirty flag (``sdk.client.provenance``)."""


def find_config(target: str | None, config: str | None) -> Path:
    """The tau.yaml to use: ``-c FILE``, else TARGET (dir or file), else ./tau.yaml."""
    raw = Path(config or target or ".")
    path = raw / "tau.yaml" if raw.is_dir() else raw
    if not path.is_file():
        raise UserError(
            f"no tau.yaml at {path}", "pass a directory containing tau.yaml, or -c FILE"
        )
    return path


def _excluded(rel: Path, patterns: tuple[str, ...]) -> bool:
    parts = rel.parts
    return any(fnmatch.fnmatch(p, pat) for pat in patterns for p in parts) or any(
        fnmatch.fnmatch(str(rel), pat) for pat in patterns
    )


def zip_dir(root: Path, excludes: list[str]) -> bytes:
    """Zip ``root`` (deterministic order) without excluded paths; UserError past 100 MiB."""
    patterns = (*_ALWAYS_EXCLUDED, *excludes)
    buf = io.BytesIO()
    size = 0
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for p in sorted(root.rglob("*")):
            rel = p.relative_to(root)
            if p.is_file() and not _excluded(rel, patterns):
                size += p.stat().st_size
                if size > _MAX_BYTES:
                    raise UserError(
                        f"working directory {root} is over 100 MiB",
                        "add large files to run.excludes; read data through data.inputs",
                    )
                zf.write(p, str(rel))
    return buf.getvalue()


def check(path: Path) -> Checked:
    """Read, parse and check the tau.yaml at ``path`` (``SpecError``: file:line:col)."""
    text = spec_load.read_text(path)
    cfg = spec_load.parse_tau_yaml(text, str(path))
    return Checked(path, text, cfg, spec_workdir.check(cfg, text, path))


def prepare(target: str | None, config: str | None) -> Prepared:
    """Validate locally and zip the working directory (raises SpecError / UserError)."""
    checked = check(find_config(target, config))
    code = zip_dir(checked.workdir, list(checked.config.run.excludes))
    source = provenance.git_source(checked.workdir)
    return Prepared(checked.path, checked.text, checked.config, code, source)
