#!/usr/bin/env bash
# Builds SeaweedFS's `weed` (the S3-compatible server the object-store tests start) from
# its source module served by the Go module proxy, into
# ~/.cache/taugrid/seaweedfs/<key>/bin/weed, and reuses the binary when it is there.
# Nothing prebuilt is downloaded.
#
#   s3/build.sh               build (or reuse) weed; prints the binary's path last
#   s3/build.sh --print-bin   print where the binary is (or will be) and exit
#
# `go install …/weed@<version>` is refused (the module's go.mod has replace directives),
# so the module is fetched with `go mod download -json`, copied (the module cache is
# read-only) and built in the copy with `go build ./weed`, under `nice -n 10`.
# Each cold build's wall time goes to <cache>/times.txt ("weed <seconds>").
# TAU_S3_CACHE overrides ~/.cache/taugrid/seaweedfs.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=versions.env
source "$here/versions.env"

build_flags="-trimpath -ldflags=-s -ldflags=-w"
key="$( (cat "$here/versions.env"; echo "$build_flags") | sha256sum | cut -c1-16)"
root="${TAU_S3_CACHE:-$HOME/.cache/taugrid/seaweedfs}/$key"
bin="$root/bin"

if [ "${1:-}" = "--print-bin" ]; then
    echo "$bin/weed"
    exit 0
fi
if [ -x "$bin/weed" ]; then
    echo "reuse $bin/weed" >&2
    echo "$bin/weed"
    exit 0
fi
command -v go >/dev/null || { echo "s3/build.sh needs the Go toolchain (go) on PATH" >&2; exit 1; }
mkdir -p "$bin" "$root/logs"
log="$root/logs/weed.log"
echo "build weed ($SEAWEEDFS_MODULE@$SEAWEEDFS_VERSION) -> $bin/weed; log $log" >&2
start=$(date +%s)
export CGO_ENABLED=0 GOFLAGS=-mod=mod
if ! {
    dir="$(cd "$root" && go mod download -json "$SEAWEEDFS_MODULE@$SEAWEEDFS_VERSION" |
        python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')"
    rm -rf "$root/src"
    cp -r "$dir" "$root/src"
    chmod -R u+w "$root/src"
    (cd "$root/src" && nice -n 10 go build $build_flags -o "$bin/weed.tmp" ./weed)
} >"$log" 2>&1; then
    tail -30 "$log" >&2
    echo "build of weed failed; full log: $log" >&2
    exit 1
fi
mv "$bin/weed.tmp" "$bin/weed"
rm -rf "$root/src"  # 100+ MB of sources; the module cache still holds them
end=$(date +%s)
echo "weed $((end - start))" >>"$root/times.txt"
echo "built weed in $((end - start))s" >&2
echo "$bin/weed"
