"""``tau run validate`` and ``tau run schema``: check a tau.yaml and publish its schema.

Owns the two spec commands registered on ``cli.app.run_app``. Output contract:

- ``validate [FILE]`` (or ``-c FILE``; default ``./tau.yaml``) makes the checks ``tau
  run`` makes before and after sending: locally the file itself, ``run.working_dir``
  and the entrypoint's script (``sdk.client.submit.check``); then, when a platform is
  reachable (``TAU_HUB_URL``, the current context, or this home's running platform —
  validate never starts one), the hub resolves the file as a submission that stores
  nothing (``POST /v1/runs`` with ``dry_run``): workspace, profile, priority, regions,
  GPU model, capacity, datasets, output store. Valid: one summary line, exit 0, plus
  ``note:`` lines (an assumed ``schema_version``; offline, what was not checked and
  why); with a platform, a line naming it. Invalid: every local problem as
  ``file:line:col: error: message`` plus its hint, or the hub's refusal exactly as
  submit prints it, on stderr, exit 2. ``-o json`` prints one JSON object on stdout in
  every case: ``{"valid": true, "file", "name", "summary", "config", "notes",
  "checked", "unchecked", "platform"}`` (``platform``: ``{"reachable": true, "url",
  "workspace"}`` or ``{"reachable": false, "reason", "hint"}``), ``{"valid": false,
  "file", "problems": [{file, line, column, message, hint, path}]}``, or for a refusal
  ``{"valid": false, "file", "problems", "error": {status, message, hint}, "checked",
  "unchecked"}``.
- ``schema`` prints the JSON Schema of tau.yaml on stdout.

The pydantic models, the loader, the schema and ``sdk.client.submit`` are imported by the
commands, not with this module, and a client only when a hub is found
(docs/ARCHITECTURE.md, "CLI start-up").
"""

from __future__ import annotations

import dataclasses
import enum
import json
import pathlib
import sys
from typing import TYPE_CHECKING, Any

import rich.console
import rich.text
import typer

from taugrid import errors
from taugrid.cli import app as _app
from taugrid.cli import views
from taugrid.sdk.client import client as sdk_client
from taugrid.sdk.local import embedded
from taugrid.spec import errors as spec_errors
from taugrid.spec import units

if TYPE_CHECKING:
    from taugrid.sdk.client import submit
    from taugrid.spec import models

__all__ = ["OutputFormat", "schema_command", "summarize", "validate_command"]

_USER_ERROR_EXIT = 2
_LABELS = {"gpu_model": "GPU model", "output_store": "output store"}


@dataclasses.dataclass(frozen=True)
class _Platform:
    """What the platform said of a valid file: ``url`` and ``workspace`` when one
    answered, else ``reason`` and ``hint`` (why none could be asked, what to do)."""

    url: str | None = None
    workspace: str | None = None
    reason: str = ""
    hint: str = ""

    def to_dict(self) -> dict[str, Any]:
        if self.url is None:
            return {"reachable": False, "reason": self.reason, "hint": self.hint}
        return {"reachable": True, "url": self.url, "workspace": self.workspace}


class OutputFormat(enum.StrEnum):
    """``-o``: human text or one JSON document for scripts."""

    TEXT = "text"
    JSON = "json"


def summarize(config: models.TauConfig) -> str:
    """One line describing what a valid tau.yaml asks for."""
    from taugrid.spec import models

    compute = config.compute
    parts = [config.run.workload_kind.value]
    if compute.workers is not None:
        parts.append(units.plural(compute.workers, "worker"))
    if compute.gpus is not None:
        model = f" {compute.gpu_model}" if compute.gpu_model else ""
        parts.append(f"{units.plural(compute.gpus, 'GPU')}{model} per worker")
    if compute.cpus is not None:
        parts.append(f"{units.plural(compute.cpus, 'CPU')} per worker")
    if compute.memory is not None:
        parts.append(f"{compute.memory} memory per worker")
    if config.execution.launcher is not models.Launcher.PYTHON:
        parts.append(f"launcher {config.execution.launcher.value}")
    return f"{config.name} ({', '.join(parts)})"


def _emit_json(document: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(document, indent=2) + "\n")


def _print_problems(error: spec_errors.SpecError) -> None:
    console = rich.console.Console(stderr=True, highlight=False, soft_wrap=True)
    for problem in error.problems:
        line = rich.text.Text(f"{problem.file}:{problem.line}:{problem.column}: ")
        line.append("error: ", style="bold red")
        line.append(problem.message)
        console.print(line)
        if problem.hint:
            console.print(rich.text.Text(f"  hint: {problem.hint}", style="dim"))
    count = len(error.problems)
    noun = "problem" if count == 1 else "problems"
    console.print(rich.text.Text(f"{error.file}: {count} {noun}", style="bold"))


def _notes(config: models.TauConfig) -> list[str]:
    from taugrid.spec import models

    if "schema_version" in config.model_fields_set:
        return []
    return [
        f"no schema_version: assumed {models.SCHEMA_VERSION} (the current version); "
        f"add 'schema_version: {models.SCHEMA_VERSION}' to pin it"
    ]


@_app.run_app.command("validate")
def validate_command(
    file: pathlib.Path | None = typer.Argument(
        None, help="The tau.yaml to check (default ./tau.yaml).", show_default=False
    ),
    config: pathlib.Path | None = typer.Option(
        None, "-c", "--config", help="The tau.yaml to check (same as FILE)."
    ),
    workspace: str | None = typer.Option(
        None, "--workspace", help="Check it for this workspace (as tau run --workspace)."
    ),
    output: OutputFormat = typer.Option(OutputFormat.TEXT, "-o", "--output", help="text|json"),
) -> None:
    """Check a tau.yaml as tau run would, on the platform when one runs: tau run validate [FILE]."""
    if file is not None and config is not None and file != config:
        raise typer.BadParameter(f"two files given: {file} and -c {config}; pass one")
    path = file or config or pathlib.Path("tau.yaml")
    from taugrid.sdk.client import submit

    try:
        checked = submit.check(path)
    except spec_errors.SpecError as exc:
        if output is OutputFormat.JSON:
            problems = [p.to_dict() for p in exc.problems]
            _emit_json({"valid": False, "file": str(path), "problems": problems})
        else:
            _print_problems(exc)
        raise typer.Exit(_USER_ERROR_EXIT) from None
    try:
        platform = _ask_platform(checked, workspace)
    except errors.UserError as exc:  # the hub refused it: what submit would print
        _print_refusal(path, exc, output)
        raise typer.Exit(_USER_ERROR_EXIT) from None
    _print_valid(path, checked.config, platform, output)


def _ask_platform(checked: submit.Checked, workspace: str | None) -> _Platform:
    """Resolve the file on the hub this shell targets, storing nothing; never starts one.

    No platform reachable is not an error: the answer says why and what to do.
    """
    try:
        cli = embedded.ensure_client(lambda _message: None)
    except (embedded.PlatformNotRunning, errors.SystemFault) as exc:
        return _Platform(reason=exc.message, hint=exc.hint)
    try:
        answer = cli.submit(checked.text, str(checked.path), None, workspace, dry_run=True)
    except errors.SystemFault as exc:  # it stopped answering (or failed) meanwhile
        return _Platform(reason=exc.message, hint=exc.hint)
    finally:
        cli.close()
    return _Platform(url=cli.config.url, workspace=(answer.get("spec") or {}).get("workspace"))


def _labels(checks: tuple[str, ...]) -> str:
    return ", ".join(_LABELS.get(c, c) for c in checks)


def _print_refusal(path: pathlib.Path, exc: errors.UserError, output: OutputFormat) -> None:
    from taugrid.sdk.client import submit

    if output is OutputFormat.TEXT:
        views.report(exc)
        return
    api = exc if isinstance(exc, sdk_client.ApiError) else None  # None: no hub was asked
    remote = submit.PLATFORM_CHECKS if api is not None else ()
    _emit_json(
        {
            "valid": False,
            "file": str(path),
            "problems": api.body.get("problems", []) if api is not None else [],
            "error": {
                "status": api.status if api is not None else None,
                "message": exc.message,
                "hint": exc.hint,
            },
            "checked": [*submit.LOCAL_CHECKS, *remote],
            "unchecked": [c for c in submit.PLATFORM_CHECKS if c not in remote],
        }
    )


def _print_valid(
    path: pathlib.Path, parsed: models.TauConfig, platform: _Platform, output: OutputFormat
) -> None:
    from taugrid.sdk.client import submit

    line, notes = summarize(parsed), _notes(parsed)
    remote = submit.PLATFORM_CHECKS if platform.url is not None else ()
    if output is OutputFormat.JSON:
        _emit_json(
            {
                "valid": True,
                "file": str(path),
                "name": parsed.name,
                "summary": line,
                "config": parsed.model_dump(mode="json"),
                "notes": notes,
                "checked": [*submit.LOCAL_CHECKS, *remote],
                "unchecked": [c for c in submit.PLATFORM_CHECKS if c not in remote],
                "platform": platform.to_dict(),
            }
        )
        return
    console = rich.console.Console(highlight=False, soft_wrap=True)
    text = rich.text.Text(f"{path}: ", style="bold")
    text.append("valid", style="bold green")
    text.append(f"{'' if remote else ' (offline)'} - {line}")
    console.print(text)
    if platform.url is None:
        notes += [
            f"offline: {_labels(submit.PLATFORM_CHECKS)} not checked",
            f"no platform reachable: {platform.reason}; {platform.hint}",
        ]
    for note in notes:
        console.print(rich.text.Text(f"  note: {note}", style="dim"))
    if platform.url is not None:
        rest = _labels(tuple(c for c in remote if c != "workspace"))
        where = f"at {platform.url}: workspace '{platform.workspace}', {rest}"
        console.print(rich.text.Text(f"  checked on the platform {where}", style="dim"))


@_app.run_app.command("schema")
def schema_command() -> None:
    """Print the JSON Schema of tau.yaml (for editors and scripts)."""
    from taugrid.spec import schema

    _emit_json(schema.json_schema())
