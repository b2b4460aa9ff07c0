"""``tau lab up | down | status``: the local multi-region lab.

The lab itself (``taugrid.lab``) starts hub, agents, Ray clusters and network
namespaces; it sits beside the CLI in the top layer, so the CLI runs it as a process
(``python -m taugrid.lab``) instead of importing it. Needs root for namespaces.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Annotated

import typer

from taugrid import errors
from taugrid.cli import app, views

__all__: list[str] = []


def _lab(*args: str) -> None:
    cmd = [sys.executable, "-m", "taugrid.lab", *args]
    rc = subprocess.call(cmd)
    if rc == 2:
        raise typer.Exit(2)
    if rc != 0:
        raise errors.SystemFault(
            f"the lab exited with status {rc}", "see the lab's logs under $TAU_HOME/lab/logs"
        )


@app.lab_app.command("up")
@views.guard
def lab_up(
    regions: Annotated[int, typer.Option("--regions", min=1, max=8)] = 3,
    topology: Annotated[Path | None, typer.Option("--topology", help="links YAML")] = None,
    output: views.Output = "text",
) -> None:
    """Start a hub and REGIONS regions, each a real Ray cluster + agent, links shaped."""
    args = ["up", "--regions", str(regions), "-o", output]
    if topology is not None:
        args += ["--topology", str(topology)]
    _lab(*args)


@app.lab_app.command("down")
@views.guard
def lab_down() -> None:
    """Stop the lab: agents (and their Ray clusters), hub, namespaces and veths."""
    _lab("down")


@app.lab_app.command("status")
@views.guard
def lab_status(output: views.Output = "text") -> None:
    """What the lab runs (pids, namespaces, hub URL)."""
    _lab("status", "-o", output)
