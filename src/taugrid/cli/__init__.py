"""The ``tau`` command line: one module per command group, talking to hubs only through
``taugrid.sdk`` (an import-linter contract), presentation in ``views``. Commands import
the heavy layers where they use them (docs/ARCHITECTURE.md, "CLI start-up").
"""
