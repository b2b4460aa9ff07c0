#!/usr/bin/env bash
# Installs JupyterLab, the server of interactive sessions (`tau dev`, docs/dev.md), from
# PyPI into a virtual environment of its own (its dependencies are not the project's)
# under ~/.cache/taugrid/jupyter/<version>/, and reuses it when it is there. Concurrent
# calls wait for one build (a lock). The session program finds it through TAU_JUPYTER
# (taugrid.home.jupyter_binary), which this script's last line names.
#
#   jupyter/build.sh               build (or reuse); prints the `jupyter` command's path last
#   jupyter/build.sh --print-bin   print where it is (or will be) and exit
#
# TAU_JUPYTER_CACHE overrides ~/.cache/taugrid/jupyter.
set -euo pipefail

version=4.6.6
root="${TAU_JUPYTER_CACHE:-$HOME/.cache/taugrid/jupyter}/$version"
bin="$root/venv/bin/jupyter"

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
echo "install jupyterlab==$version -> $root/venv" >&2
start=$(date +%s)
rm -rf "$root/venv"
python3 -m venv "$root/venv"
"$root/venv/bin/pip" install -q --disable-pip-version-check "jupyterlab==$version"
touch "$root/.built"
echo "jupyterlab $(( $(date +%s) - start ))" >>"$root/times.txt"
echo "$bin"
