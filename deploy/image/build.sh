#!/usr/bin/env bash
# TauGrid's container image, built here from Debian packages and PyPI: no base image, no
# registry download (issue 31 item 2; docs/kubernetes.md "The project image"). Two layers:
#   base  a Debian bookworm minbase root (mmdebstrap) with python3 and a venv at
#         /opt/taugrid holding the project's runtime dependencies (wheels made by the
#         host's pip from PyPI, installed offline inside the root);
#   app   the taugrid wheel installed into that venv: seconds, rebuilt when src/ changes.
# The result is an OCI archive (deploy/image/oci_archive.py) that `ctr images import`
# loads and a registry serves. Everything is cached under ~/.cache/taugrid/image/, keyed
# by its inputs' hashes; the archive's path is printed last.
#
#   deploy/image/build.sh                 build (or reuse) and print the archive's path
#   deploy/image/build.sh --print-archive print where the archive is or would be
# Needs root (a chroot), mmdebstrap (Debian) and network to Debian's mirror and PyPI.
set -euo pipefail
cd "$(dirname "$0")/../.."
CACHE="${TAU_IMAGE_CACHE:-$HOME/.cache/taugrid/image}"
SUITE=bookworm
MIRROR="${TAU_IMAGE_MIRROR:-http://deb.debian.org/debian}"
PY="${TAU_IMAGE_PYTHON:-python3}"  # the host's pip that makes the wheels (Python 3.11)
VERSION="$(sed -n 's/^version = "\(.*\)"/\1/p' pyproject.toml | head -1)"
NAME="${TAU_IMAGE_NAME:-taugrid.local/taugrid:$VERSION}"

# the base holds the runtime dependencies: keyed by them, not by the rest of pyproject.toml
# (a change to pytest's or ruff's settings does not rebuild 1.3 GB)
base_key="$(sed -n '/^dependencies = \[/,/^\]/p' pyproject.toml | cat deploy/image/build.sh - \
  | sha256sum | cut -c1-16)"
# src/ as the sources say: pip's egg-info under src/ changes with every build
app_key="$(echo "$base_key $(find src -type f ! -name '*.pyc' ! -path '*.egg-info/*' -print0 | sort -z | xargs -0 sha256sum | sha256sum)" | sha256sum | cut -c1-16)"
base="$CACHE/base-$base_key"
archive="$CACHE/taugrid-$app_key.oci.tar"
if [ "${1:-}" = "--print-archive" ]; then echo "$archive"; exit 0; fi
if [ -f "$archive" ]; then touch "$archive"; echo "reuse $archive" >&2; echo "$archive"; exit 0; fi

command -v mmdebstrap >/dev/null || { echo "needs mmdebstrap: apt-get install mmdebstrap" >&2; exit 1; }
mkdir -p "$CACHE"
exec 9>"$CACHE/lock"
flock 9  # one build at a time: the base root is shared

in_root() {  # runs "$@" chrooted in the base root, with /proc and the wheels mounted
  unshare --mount --fork bash -euc '
    root="$1"; wheels="$2"; shift 2
    mount -t proc proc "$root/proc"
    mkdir -p "$root/wheels" && mount --bind "$wheels" "$root/wheels"
    exec chroot "$root" env -i PATH=/opt/taugrid/bin:/usr/bin:/bin LANG=C.UTF-8 "$@"
  ' in_root "$base/root" "$1" "${@:2}"
}

layer_tar() {  # $1: out tar, $2: dir; the rest: find's arguments selecting entries
  local out="$1" dir="$2"; shift 2
  (cd "$dir" && find . "$@" -print0) \
    | tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner \
        --pax-option=delete=atime,delete=ctime -cf "$out.part" -C "$dir" --null --no-recursion -T -
  mv "$out.part" "$out"
}

t0=$SECONDS
if [ ! -f "$base/root.done" ]; then
  echo "image base: Debian $SUITE root with python3 (mmdebstrap, about a minute)" >&2
  rm -rf "$base" && mkdir -p "$base/wheels"
  mmdebstrap --variant=minbase --mode=root --quiet \
    --include=python3,python3-venv,ca-certificates,procps,tini \
    "$SUITE" "$base/root" "$MIRROR"
  echo "image base: the runtime dependencies' wheels from PyPI ($PY -m pip wheel)" >&2
  "$PY" -m pip wheel --quiet --wheel-dir "$base/wheels" .
  echo "image base: installing them into /opt/taugrid inside the root" >&2
  in_root "$base/wheels" python3 -m venv /opt/taugrid
  in_root "$base/wheels" /opt/taugrid/bin/pip install --quiet --no-index --find-links /wheels \
    --disable-pip-version-check taugrid
  in_root "$base/wheels" /opt/taugrid/bin/pip uninstall --quiet -y taugrid
  rm -rf "$base/root/var/cache/apt/"* "$base/root/var/lib/apt/lists/"* "$base/root/tmp/"* \
    "$base/root/root/.cache" "$base/wheels/"taugrid-*.whl
  rmdir "$base/root/wheels"
  touch "$base/root.done"
fi
if [ ! -f "$base/base.tar" ]; then
  layer_tar "$base/base.tar" "$base/root" \( -path ./proc/\* -o -path ./dev/\* -o -path ./sys/\* \) -prune -o
  echo "image base: $(du -h "$base/base.tar" | cut -f1) in $((SECONDS - t0)) s" >&2
fi

echo "image app: the taugrid wheel into the base's venv" >&2
app="$(mktemp -d "$CACHE/app.XXXXXX")"
trap 'rm -rf "$app"' EXIT
"$PY" -m pip wheel --quiet --no-deps --wheel-dir "$app/wheel" .
touch "$app/marker"
sleep 1  # a file the install writes in the same second as the marker is still newer
in_root "$app/wheel" /opt/taugrid/bin/pip install --quiet --no-index --no-deps \
  --disable-pip-version-check /wheels/"$(basename "$app"/wheel/taugrid-*.whl)"
layer_tar "$app/app.tar" "$base/root" \( -path ./proc -o -path ./wheels -o -path ./dev -o -path ./sys \) -prune -o -newer "$app/marker"
in_root "$app/wheel" /opt/taugrid/bin/pip uninstall --quiet -y taugrid  # the base stays as it was
rmdir "$base/root/wheels" 2>/dev/null || true
cat >"$app/config.json" <<EOF
{"Env": ["PATH=/opt/taugrid/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
         "LANG=C.UTF-8", "PYTHONUNBUFFERED=1"],
 "Entrypoint": ["/usr/bin/tini", "--"], "Cmd": ["tau", "--help"], "WorkingDir": "/"}
EOF
python3 deploy/image/oci_archive.py "$archive" "$NAME" "$app/config.json" "$base/base.tar" "$app/app.tar" >/dev/null
echo "image $NAME: $(du -h "$archive" | cut -f1) in $((SECONDS - t0)) s" >&2
# each archive holds the base layer (1.3 GB): keep this one and the one before it (another
# checkout's), and the two newest bases, so that the cache does not fill the disk
ls -t "$CACHE"/taugrid-*.oci.tar | tail -n +3 | xargs -r rm -f
ls -dt "$CACHE"/base-* | tail -n +3 | xargs -r rm -rf
echo "$archive"
