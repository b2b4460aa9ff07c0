"""Terminal views shared by commands: error printing, phase trees, tables, sparklines.

Owns presentation only (Rich). ``guard`` turns TauErrors into a message, a hint and an
exit code (2: the user can fix it; 1: a system fault) — never a traceback. Output to a
terminal fits its width; output to a pipe or file is never wrapped (tables and lines
whole), whatever ``COLUMNS`` says. Text that comes from a hub, an agent or a job (reasons,
log lines, error messages) is never read as Rich markup: ``[exit_nonzero]`` stays in
the line and ``[/INST]`` does not stop the command (``plain``, table cells, ``report``).
"""

from __future__ import annotations

import functools
import json
import sys
import time
from collections.abc import Callable, Sequence
from typing import Annotated, Any, ParamSpec, TypeVar

import rich.console
import rich.table
import rich.text
import typer

from taugrid import errors
from taugrid.lifecycle import node_ids as shown_ids
from taugrid.spec import errors as spec_errors
from taugrid.spec import units

__all__ = [
    "Output",
    "SubmitOutput",
    "age",
    "console",
    "emit_json",
    "guard",
    "node_id",
    "node_ids",
    "phase_tree",
    "plain",
    "progress",
    "report",
    "sparkline",
    "table",
]


def _one_of(*formats: str) -> Callable[[str], str]:
    def check(value: str) -> str:
        if value not in formats:
            raise typer.BadParameter(f"{value!r} is not one of: {', '.join(formats)}")
        return value

    return check


Output = Annotated[
    str, typer.Option("-o", "--output", help="text or json", callback=_one_of("text", "json"))
]
"""``-o``/``--output`` of every command: ``text`` (a table for a person) or ``json``; any
other value is a usage error, never a silent table."""

Target = Annotated[str | None, typer.Argument(help="Directory with tau.yaml, or the file")]
"""What ``tau run`` and ``tau sweep submit`` submit: a directory with tau.yaml, or the file."""
ConfigFile = Annotated[str | None, typer.Option("-c", "--config", help="tau.yaml to use")]
WorkspaceOverride = Annotated[
    str | None, typer.Option("--workspace", help="Override policy.workspace")
]

SubmitOutput = Annotated[
    str,
    typer.Option(
        "-o",
        "--output",
        help="text or json; yaml too with --dry-run",
        callback=_one_of("text", "json", "yaml"),
    ),
]
"""``-o`` of ``tau run``: as ``Output``, and ``yaml`` for the objects ``--dry-run`` prints."""

_UNWRAPPED = 100_000  # columns of a console that is not a terminal: nothing wraps


def _console(stderr: bool) -> rich.console.Console:
    stream = sys.stderr if stderr else sys.stdout
    tty = hasattr(stream, "isatty") and stream.isatty()
    return rich.console.Console(
        stderr=stderr, highlight=False, width=None if tty else _UNWRAPPED, soft_wrap=not tty
    )


console = _console(stderr=False)
err_console = _console(stderr=True)
P = ParamSpec("P")
R = TypeVar("R")

_ICON = {
    "done": "[green]✓[/]",
    "active": "[cyan]●[/]",
    "pending": "[dim]○[/]",
    "warning": "[yellow]![/]",
    "failed": "[red]✗[/]",
    "skipped": "[dim]-[/]",
}
_LABEL = {
    "submitted": "Submitted",
    "admitted": "Admitted",
    "placed": "Placed",
    "scheduled": "Scheduled",
    "gpu_healthy": "GPU healthy",
    "progressing": "Progressing",
    "completed": "Completed",
    "artifacts_saved": "Artifacts saved",
    "released": "Released",
}


def report(exc: errors.TauError) -> int:
    """Print a TauError as message + hint on stderr; the exit code it deserves."""
    if isinstance(exc, spec_errors.SpecError):  # already file:line:col: error: ... lines
        err_console.print(rich.text.Text(exc.message))
        return 2
    err_console.print(rich.text.Text.assemble(("error:", "red"), " ", exc.message))
    if exc.hint:
        err_console.print(rich.text.Text.assemble("  ", ("hint:", "dim"), " ", exc.hint))
    return 1 if isinstance(exc, errors.SystemFault) else 2


def guard(fn: Callable[P, R]) -> Callable[P, R]:
    """Print TauErrors as message + hint and exit 2 (user) or 1 (system)."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        except errors.TauError as exc:
            raise typer.Exit(report(exc)) from None

    return wrapper


def emit_json(doc: Any) -> None:
    typer.echo(json.dumps(doc, indent=2, sort_keys=True, default=str))


def age(ts: float | None) -> str:
    if not ts:
        return "-"
    s = max(0, int(time.time() - ts))
    return f"{s}s" if s < 120 else f"{s // 60}m" if s < 7200 else f"{s // 3600}h"


def table(
    columns: Sequence[str], rows: Sequence[Sequence[Any]], title: str | None = None
) -> rich.table.Table:
    t = rich.table.Table(title=title, header_style="bold", box=None, pad_edge=False)
    for c in columns:
        t.add_column(c)
    for r in rows:
        t.add_row(*(_cell(x) for x in r))
    return t


def _cell(value: Any) -> rich.text.Text:
    """One table cell on one line: no tab or line break of a server's text reaches it,
    and no markup is read from it (a ``styled`` cell keeps its style)."""
    if isinstance(value, rich.text.Text):
        return value
    return plain("-" if value is None else " ".join(str(value).split()))


def plain(text: str, style: str = "") -> rich.text.Text:
    """``text`` as it is, in ``style``: square brackets are not Rich markup (server and
    job text; a table cell of our own in a colour: ``plain("ok", "green")``)."""
    return rich.text.Text(text, style=style)


def progress(msg: str) -> None:
    """A progress line on stderr, dim, printed as it is (never read as markup)."""
    err_console.print(plain(msg, "dim"))


def node_id(node: str) -> str:
    """A node ID as the CLI shows it (``lifecycle.node_ids``); ``-o json`` has it whole."""
    return shown_ids.short(node)


def node_ids(nodes: Sequence[str], sep: str = ",") -> str:
    """Several node IDs, each as ``node_id`` shows it."""
    return sep.join(node_id(n) for n in nodes)


def gpus_text(spec: dict[str, Any]) -> str:
    """``2 x 4 GPUs`` or ``1 x 0.5 GPU (shared)``: workers times GPUs per worker."""
    each = float(spec.get("gpus_per_worker") or 0)
    if 0 < each < 1:
        return f"{spec.get('workers', 1)} x {each:g} GPU (shared)"
    return f"{spec.get('workers', 1)} x {units.plural(each, 'GPU')}"


def phase_tree(run: dict[str, Any]) -> rich.table.Table:
    """The nine phases with status, source, reason and time; the stuck one named."""
    head = f"run {run['id']}  state: {run['state']}  cluster: {run.get('cluster_id') or '-'}"
    head += f"  attempts: {len(run.get('attempts', []))}"
    head += f"  gpus: {gpus_text(run.get('spec') or {})}" if run.get("gpus") else ""
    if run["state"] == "queued" and run.get("attempts") and run.get("reason"):
        head += f"\n{run['reason']}"  # waiting for a retry: which attempt failed, and when
    t = rich.table.Table(
        title=plain(head), title_justify="left", box=None, show_header=False, pad_edge=False
    )
    for col in ("icon", "phase", "source", "reason", "time"):
        t.add_column(col, overflow="fold")
    for p in run["phases"]:
        when = (
            time.strftime("%H:%M:%S", time.localtime(p["ts"])) if p["status"] != "pending" else ""
        )
        reason = rich.text.Text(p["reason"][:300])
        t.add_row(
            _ICON.get(p["status"], "?"),
            _LABEL.get(p["phase"], p["phase"]),
            p["source"],
            reason,
            when,
        )
    stuck = next((p for p in run["phases"] if p["status"] in ("active", "warning", "failed")), None)
    if stuck and run["state"] not in ("succeeded", "failed", "cancelled"):
        t.caption = _caption(stuck)
        t.caption_justify = "left"
    return t


def gap_line(gap: dict[str, Any]) -> str:
    """One hole in the hub's copy of a run's log (``hub.agents.delivery``), said plainly."""
    size = int(gap.get("to", 0)) - int(gap.get("from", 0))
    return (
        f"missing: {size} characters of attempt {gap.get('attempt')}'s driver log "
        f"(from character {gap.get('from')}): {gap.get('why', 'not delivered')}"
    )


def source_line(source: dict[str, Any]) -> str:
    """``source: 1a2b3c4d5e6f on main (uncommitted changes)``: where the code came from."""
    line = f"source: {source['commit'][:12]}"
    line += f" on {source['branch']}" if source.get("branch") else " (detached HEAD)"
    return line + (" (uncommitted changes)" if source.get("dirty") else "")


def _caption(phase: dict[str, Any]) -> str:
    """What the run waits on; a job reporting progress is running, not stuck."""
    if phase["phase"] == "progressing" and phase["status"] == "active":
        when = age(phase["ts"])
        return f"running: last progress {when} ago; if that is old, look at {phase['look_at']}"
    return f"waiting on {_LABEL[phase['phase']]}: look at {phase['look_at']}"


_BARS = "▁▂▃▄▅▆▇█"


def sparkline(values: Sequence[float], width: int = 50) -> str:
    if not values:
        return ""
    if len(values) > width:
        step = len(values) / width
        values = [values[int(i * step)] for i in range(width)]
    lo, hi = min(values), max(values)
    span = (hi - lo) or 1.0
    return "".join(_BARS[int((v - lo) / span * (len(_BARS) - 1))] for v in values)
