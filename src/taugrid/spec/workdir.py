"""The files a tau.yaml names on the submitter's machine: its working dir and script.

Owns the one local check of what ``run.working_dir`` and ``run.entrypoint`` refer to,
made before anything is sent (``sdk.client.submit.prepare``, for ``tau run``) and by ``tau
run validate``, so both say the same thing:

- ``run.working_dir`` (relative to the tau.yaml's directory) must be a directory;
- the script the entrypoint names must be in it. An entrypoint is a *script path*
  (one word ending in ``.py``: ``train.py``) or a *command* (``python train.py``,
  ``bash run.sh``); of a command, the first ``.py`` word after the program that is
  not an option is its script (a command without one, ``bash run.sh``, is not
  checked). Absolute script paths live on the workers and are not checked.

A failed check is a ``SpecError`` at the value's ``file:line:col`` with a fix.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import TYPE_CHECKING

from taugrid.spec import errors, yamlpos

if TYPE_CHECKING:
    from taugrid.spec import models

__all__ = ["check", "named_script", "script_path"]


def script_path(entrypoint: str) -> str | None:
    """The script when ``entrypoint`` is a script path (one ``.py`` word); None for a command."""
    try:
        words = shlex.split(entrypoint)
    except ValueError:
        return None
    return words[0] if len(words) == 1 and words[0].endswith(".py") else None


def named_script(entrypoint: str) -> str | None:
    """The script ``entrypoint`` runs: its script path, else a command's first ``.py`` word."""
    script = script_path(entrypoint)
    if script is not None:
        return script
    try:
        words = shlex.split(entrypoint)[1:]
    except ValueError:
        return None
    return next((w for w in words if w.endswith(".py") and not w.startswith("-")), None)


def check(config: models.TauConfig, text: str, path: Path) -> Path:
    """The working directory of the tau.yaml at ``path`` (``text``, parsed as ``config``).

    Raises ``SpecError`` when it is not a directory or lacks the entrypoint's script.
    """
    run = config.run
    workdir = (path.parent / run.working_dir).resolve()
    if not workdir.is_dir():
        raise _problem(
            text,
            path,
            "working_dir",
            f"run.working_dir {run.working_dir!r} is not a directory ({workdir})",
            "set run.working_dir relative to the tau.yaml, or remove it to use its directory",
        )
    script = named_script(run.entrypoint)
    if script is not None and not Path(script).is_absolute() and not (workdir / script).exists():
        raise _problem(
            text,
            path,
            "entrypoint",
            f"run.entrypoint {run.entrypoint!r} runs {script}, which is not in {workdir}",
            f"add {script} to {workdir}, or fix run.entrypoint: a script path (train.py) "
            "or a command (python train.py), relative to run.working_dir",
        )
    return workdir


def _problem(text: str, path: Path, key: str, message: str, hint: str) -> errors.SpecError:
    """A problem at the value of ``run.<key>`` (the file parsed again: this is rare)."""
    found, located = yamlpos.parse(text, str(path)).locate(("run", key))
    mark = located.value if found == ("run", key) else located.key or located.value
    problem = errors.Problem(str(path), mark.line, mark.column, message, hint, f"run.{key}")
    return errors.SpecError([problem])
