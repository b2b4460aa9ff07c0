#!/usr/bin/env bash
# Installs the MLflow tracking server the tracking tests mirror runs to (hub.tracking)
# from PyPI into a virtual environment of its own under ~/.cache/taugrid/mlflow/<version>/
# (deploy/pypi-tool.sh; cold: about 45 s and 860 MB, docs/BENCHMARKS.md), and reuses it
# when it is there.
#
#   tracking/build.sh               build (or reuse); prints the `mlflow` command's path last
#   tracking/build.sh --print-bin   print where it is (or will be) and exit
#
# TAU_MLFLOW_CACHE overrides ~/.cache/taugrid/mlflow.
exec "$(dirname "$0")/../deploy/pypi-tool.sh" mlflow mlflow 3.17.2 mlflow "$@"
