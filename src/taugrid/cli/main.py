"""Entry point of the ``tau`` console script: imports every command module, runs the app.

User errors (``TauUserError`` subclasses from any layer) are printed as a message
with a hint and exit code 2 — never a traceback.
"""

from __future__ import annotations

import sys

from taugrid.cli import app as _app

__all__ = ["main"]


def _register() -> None:
    # Imported for their side effect: each module registers its commands on cli.app.
    import importlib

    for name in ("spec_cmds", "platform_cmds", "run_cmds", "ops_cmds"):
        try:
            importlib.import_module(f"taugrid.cli.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"taugrid.cli.{name}":
                raise


def main() -> None:
    """Run the ``tau`` command line."""
    _register()
    sys.exit(_app.app(standalone_mode=True))
