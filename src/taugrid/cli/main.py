"""Entry point of the ``tau`` console script: registers every command module, runs the app.

Every command module is imported at every start, so each keeps its heavy imports (the
renderers, the models, the Kubernetes installer) inside the commands that need them
(docs/ARCHITECTURE.md, "CLI start-up"; tests/cli/test_startup.py checks it).

User errors (``UserError`` from any layer) print a message and a hint and exit 2;
system faults exit 1 — never a traceback. Commands wrap themselves with
``cli.views.guard``; ``main`` is the backstop for anything raised outside them.
"""

from __future__ import annotations

import sys

from taugrid import errors
from taugrid.cli import app as _app
from taugrid.cli import (  # noqa: F401 (imported to register their commands)
    cluster_cmds,
    context_cmds,
    data_cmds,
    dev_cmds,
    hub_cmds,
    lab_cmds,
    metrics_cmds,
    model_cmds,
    ops_cmds,
    pipeline_cmds,
    platform_cmds,
    run_cmds,
    secret_cmds,
    serve_cmds,
    spec_cmds,
    sweep_cmds,
    tenancy_cmds,
    views,
)

__all__ = ["app", "main"]

app = _app.app
"""The ``tau`` Typer app with every command registered (tests invoke it in-process)."""


def main() -> None:
    """Run the ``tau`` command line."""
    try:
        app(standalone_mode=True)
    except errors.TauError as exc:
        sys.exit(views.report(exc))
