"""Client-side preparation of a submission: find tau.yaml, validate it, zip the code.

Owns what happens before anything is sent: the target (a directory with tau.yaml, or a
file) is resolved, the file is validated locally (errors carry file:line:col), and the
working directory is zipped without ``run.excludes`` and the usual junk (VCS, caches,
virtualenvs). The script the entrypoint names — a script path (``train.py``) or the
first ``.py`` word of a command (``python train.py``) — must exist there. Nothing is
sent when validation fails.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import io
import shlex
import zipfile
from pathlib import Path

from taugrid.errors import UserError
from taugrid.render import command
from taugrid.spec import load as spec_load
from taugrid.spec import models as sm

__all__ = ["Prepared", "find_config", "prepare", "zip_dir"]

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
class Prepared:
    path: Path
    text: str
    config: sm.TauConfig
    code_zip: bytes


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


def prepare(target: str | None, config: str | None) -> Prepared:
    """Validate locally and zip the working directory (raises SpecError / UserError)."""
    path = find_config(target, config)
    text = spec_load.read_text(path)
    cfg = spec_load.parse_tau_yaml(text, str(path))
    workdir = (path.parent / cfg.run.working_dir).resolve()
    if not workdir.is_dir():
        raise UserError(
            f"run.working_dir {cfg.run.working_dir!r} is not a directory (from {path})",
            "set run.working_dir relative to the tau.yaml, or remove it to use its directory",
        )
    _check_entrypoint(cfg.run.entrypoint, workdir)
    return Prepared(path, text, cfg, zip_dir(workdir, list(cfg.run.excludes)))


def _check_entrypoint(entrypoint: str, workdir: Path) -> None:
    """The script an entrypoint names (``train.py``, ``python train.py``) must be shipped."""
    script = command.script_path(entrypoint)
    if script is None:  # a command: check the first .py word after the program, if any
        words = shlex.split(entrypoint)[1:]
        script = next((w for w in words if w.endswith(".py") and not w.startswith("-")), None)
    if script is not None and not Path(script).is_absolute() and not (workdir / script).exists():
        raise UserError(
            f"entrypoint {entrypoint!r} runs {script}, which is not in {workdir}",
            "fix run.entrypoint: a script path (train.py) or a command (python train.py), "
            "relative to run.working_dir",
        )
