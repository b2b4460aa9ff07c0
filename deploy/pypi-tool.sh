#!/usr/bin/env bash
# Installs a tool from PyPI whose dependencies are not the project's into a virtual
# environment of its own under ~/.cache/taugrid/<name>/<version>/, and reuses it when it is
# there; concurrent calls wait for one build (a lock). Its callers name the tool:
# tracking/build.sh (the MLflow server), jupyter/build.sh (JupyterLab of `tau dev`).
#
#   deploy/pypi-tool.sh NAME PACKAGE VERSION COMMAND             build (or reuse); prints
#                                                                the command's path last
#   deploy/pypi-tool.sh NAME PACKAGE VERSION COMMAND --print-bin print where it is (or will
#                                                                be) and exit
#
# TAU_<NAME>_CACHE (NAME in upper case) overrides ~/.cache/taugrid/<name>. A finished build
# is marked by <version>/.built; its wall seconds are appended to <name>/<version>/times.txt.
set -euo pipefail

name="$1" package="$2" version="$3" command="$4"
shift 4
override="TAU_${name^^}_CACHE"
root="${!override:-$HOME/.cache/taugrid/$name}/$version"
bin="$root/venv/bin/$command"

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
echo "install $package==$version -> $root/venv" >&2
start=$(date +%s)
rm -rf "$root/venv"
python3 -m venv "$root/venv"
"$root/venv/bin/pip" install -q --disable-pip-version-check "$package==$version"
touch "$root/.built"
echo "$name $(( $(date +%s) - start ))" >>"$root/times.txt"
echo "$bin"
