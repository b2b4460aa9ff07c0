#!/usr/bin/env bash
# Installs the MLflow tracking server the tracking tests mirror runs to (hub.tracking)
# from PyPI into a virtual environment of its own (its dependencies are not the
# project's) under ~/.cache/taugrid/mlflow/<version>/, and reuses it when it is there.
# Cold: about 45 s and 860 MB (docs/BENCHMARKS.md); concurrent calls wait for one build.
#
#   tracking/build.sh               build (or reuse); prints the `mlflow` command's path last
#   tracking/build.sh --print-bin   print where it is (or will be) and exit
#
# TAU_MLFLOW_CACHE overrides ~/.cache/taugrid/mlflow.
set -euo pipefail

version=3.17.2
root="${TAU_MLFLOW_CACHE:-$HOME/.cache/taugrid/mlflow}/$version"
bin="$root/venv/bin/mlflow"

if [ "${1:-}" = "--print-bin" ]; then
    echo "$bin"
    exit 0
fi
mkdir -p "$root"
exec 9>"$root/.lock"
flock 9
if [ -f "$root/.built" ] && [ -x "$bin" ]; then
    echo "reuse $bin" >&2
    echo "$bin"
    exit 0
fi
echo "install mlflow==$version -> $root/venv" >&2
start=$(date +%s)
rm -rf "$root/venv"
python3 -m venv "$root/venv"
"$root/venv/bin/pip" install -q --disable-pip-version-check "mlflow==$version"
touch "$root/.built"
echo "mlflow $(( $(date +%s) - start ))" >>"$root/times.txt"
echo "$bin"
