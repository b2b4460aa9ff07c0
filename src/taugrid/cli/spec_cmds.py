"""``tau run validate`` and ``tau run schema``: check a tau.yaml and publish its schema.

Owns the two spec commands registered on ``cli.app.run_app``. Both work offline: they
only read the file and call ``taugrid.spec`` (no hub, no SDK). Output contract:

- ``validate [FILE]`` (or ``-c FILE``; default ``./tau.yaml``) prints one summary line
  and exits 0 when the file is valid — plus a ``note:`` line when it assumed the
  current ``schema_version`` because the file has none; otherwise
  every problem as ``file:line:col: error: message`` plus its hint, on stderr, and
  exits 2. ``-o json`` prints one JSON object on stdout in both cases
  (``{"valid": true, "file", "name", "summary", "config", "notes"}`` or
  ``{"valid": false, "file", "problems": [{file, line, column, message, hint, path}]}``).
- ``schema`` prints the JSON Schema of tau.yaml on stdout.

The pydantic models, the loader and the schema are imported by the commands, not with
this module (docs/ARCHITECTURE.md, "CLI start-up").
"""

from __future__ import annotations

import enum
import json
import pathlib
import sys
from typing import TYPE_CHECKING, Any

import rich.console
import rich.text
import typer

from taugrid.cli import app as _app
from taugrid.spec import errors as spec_errors
from taugrid.spec import units

if TYPE_CHECKING:
    from taugrid.spec import models

__all__ = ["OutputFormat", "schema_command", "summarize", "validate_command"]

_USER_ERROR_EXIT = 2


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
    output: OutputFormat = typer.Option(OutputFormat.TEXT, "-o", "--output", help="text|json"),
) -> None:
    """Check a tau.yaml offline: tau run validate [FILE]; every problem with file:line:col."""
    if file is not None and config is not None and file != config:
        raise typer.BadParameter(f"two files given: {file} and -c {config}; pass one")
    path = file or config or pathlib.Path("tau.yaml")
    from taugrid.spec import load

    try:
        parsed = load.load_tau_yaml(path)
    except spec_errors.SpecError as exc:
        if output is OutputFormat.JSON:
            problems = [p.to_dict() for p in exc.problems]
            _emit_json({"valid": False, "file": str(path), "problems": problems})
        else:
            _print_problems(exc)
        raise typer.Exit(_USER_ERROR_EXIT) from None
    _print_valid(path, parsed, output)


def _print_valid(path: pathlib.Path, parsed: models.TauConfig, output: OutputFormat) -> None:
    line, notes = summarize(parsed), _notes(parsed)
    if output is OutputFormat.JSON:
        dumped = parsed.model_dump(mode="json")
        _emit_json(
            {
                "valid": True,
                "file": str(path),
                "name": parsed.name,
                "summary": line,
                "config": dumped,
                "notes": notes,
            }
        )
        return
    console = rich.console.Console(highlight=False, soft_wrap=True)
    text = rich.text.Text(f"{path}: ", style="bold")
    text.append("valid", style="bold green")
    text.append(f" - {line}")
    console.print(text)
    for note in notes:
        console.print(rich.text.Text(f"  note: {note}", style="dim"))


@_app.run_app.command("schema")
def schema_command() -> None:
    """Print the JSON Schema of tau.yaml (for editors and scripts)."""
    from taugrid.spec import schema

    _emit_json(schema.json_schema())
