#!/usr/bin/env bash
# Installs JupyterLab, the server of interactive sessions (`tau dev`, docs/dev.md), from
# PyPI into a virtual environment of its own under ~/.cache/taugrid/jupyter/<version>/
# (deploy/pypi-tool.sh; about 90 s cold), and reuses it when it is there. The session
# program finds it through TAU_JUPYTER (taugrid.home.jupyter_binary), which this script's
# last line names.
#
#   jupyter/build.sh               build (or reuse); prints the `jupyter` command's path last
#   jupyter/build.sh --print-bin   print where it is (or will be) and exit
#
# TAU_JUPYTER_CACHE overrides ~/.cache/taugrid/jupyter.
exec "$(dirname "$0")/../deploy/pypi-tool.sh" jupyter jupyterlab 4.6.6 jupyter "$@"
