#!/usr/bin/env bash
# Builds the test control plane (etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler, kubelet for the real node, kwok, Kueue, KubeRay's ray-operator) from
# source modules served by the Go module proxy, into
# ~/.cache/taugrid/k8s/<versions-hash>/bin/, and reuses binaries already there; `helm`
# (the chart tests) goes to ~/.cache/taugrid/k8s/helm-<HELM_VERSION>/bin/ instead.
# Nothing prebuilt is downloaded.
#
#   k8s/build.sh                 build (or reuse) every component, one at a time
#   k8s/build.sh etcd kwok       build (or reuse) only these
#   k8s/build.sh --print-bin     print the bin directory and exit
#   k8s/build.sh --print-bin helm  print helm's bin directory and exit
#   k8s/build.sh --share-only kueue kuberay
#                                only copy share/ files (CRDs) from those source modules
#
# Besides bin/, <cache>/share/ gets the files the harness needs from the same source
# modules: kwok's stage YAMLs (kwok-stages/), Kueue's and KubeRay's CRDs (kueue-crd/,
# kuberay-crd/).
#
# Each cold build's wall time goes to <cache>/times.txt (component seconds).
# TAU_K8S_CACHE overrides ~/.cache/taugrid/k8s.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=versions.env
source "$here/versions.env"

hash_inputs() {
    # helm has its own cache dir: its pin stays out of the control plane's key
    sed '/^# --- below: not part of/,$d' "$here/versions.env"
    for d in etcd kubernetes kwok kueue kuberay; do
        cat "$here/$d/go.mod"
        [ -f "$here/$d/main.go" ] && cat "$here/$d/main.go"
    done
    # the link flags below are part of what is built
    grep -E '^(kube_ldflags|common_flags)' "$0" || true
}
key="$(hash_inputs | sha256sum | cut -c1-16)"
root="${TAU_K8S_CACHE:-$HOME/.cache/taugrid/k8s}/$key"
bin="$root/bin"
helm_root="${TAU_K8S_CACHE:-$HOME/.cache/taugrid/k8s}/helm-$HELM_VERSION"

if [ "${1:-}" = "--print-bin" ]; then
    if [ "${2:-}" = "helm" ]; then echo "$helm_root/bin"; else echo "$bin"; fi
    exit 0
fi
mkdir -p "$bin" "$root/logs" "$root/src" "$root/share"

export GOFLAGS=-mod=mod CGO_ENABLED=0
kube_ldflags="-X k8s.io/component-base/version.gitVersion=$KUBERNETES_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=36 -X k8s.io/component-base/version.gitTreeState=clean -X k8s.io/component-base/version.buildDate=1970-01-01T00:00:00Z -X k8s.io/client-go/pkg/version.gitVersion=$KUBERNETES_VERSION -X k8s.io/client-go/pkg/version.gitMajor=1 -X k8s.io/client-go/pkg/version.gitMinor=36"
common_flags="-trimpath"

# component -> "wrapper-dir package extra-ldflags"
spec() {
    case "$1" in
        etcd) echo "etcd . " ;;
        kube-apiserver | kube-controller-manager | kube-scheduler | kubelet)
            echo "kubernetes k8s.io/kubernetes/cmd/$1 kube" ;;
        kwok) echo "kwok sigs.k8s.io/kwok/cmd/kwok " ;;
        kueue) echo "kueue sigs.k8s.io/kueue/cmd/kueue " ;;
        kuberay) echo "kuberay github.com/ray-project/kuberay/ray-operator " ;;
        *) echo "unknown component '$1' (known: etcd kube-apiserver kube-controller-manager kube-scheduler kubelet kwok kueue kuberay helm)" >&2
           exit 2 ;;
    esac
}

build_one() {
    local name="$1" wrapper pkg extra ldflags start end
    read -r wrapper pkg extra <<<"$(spec "$name")"
    # build in a copy so the repo's wrapper dirs stay clean (go.sum is written there)
    if [ ! -f "$root/src/$wrapper/go.mod" ]; then
        mkdir -p "$root/src/$wrapper"
        cp "$here/$wrapper"/go.mod "$root/src/$wrapper/"
        if [ -f "$here/$wrapper/main.go" ]; then cp "$here/$wrapper/main.go" "$root/src/$wrapper/"; fi
    fi
    if [ -x "$bin/$name" ]; then
        echo "reuse $bin/$name"
        return 0
    fi
    ldflags="-s -w"
    [ "$extra" = "kube" ] && ldflags="$ldflags $kube_ldflags"
    echo "build $name ($pkg) -> $bin/$name; log $root/logs/$name.log"
    start=$(date +%s)
    if ! (cd "$root/src/$wrapper" && go build $common_flags -ldflags "$ldflags" \
            -o "$bin/$name.tmp" "$pkg") >"$root/logs/$name.log" 2>&1; then
        tail -30 "$root/logs/$name.log" >&2
        echo "build of $name failed; full log: $root/logs/$name.log" >&2
        return 1
    fi
    mv "$bin/$name.tmp" "$bin/$name"
    end=$(date +%s)
    echo "$name $((end - start))" >>"$root/times.txt"
    echo "built $name in $((end - start))s"
}

# helm: `go install helm.sh/helm/v3/cmd/helm@$HELM_VERSION` (its own go.mod, no
# wrapper) into <cache>/helm-<version>/bin/, a cache of its own
build_helm() {
    local start end
    mkdir -p "$helm_root/bin" "$helm_root/logs"
    if [ -x "$helm_root/bin/helm" ]; then
        echo "reuse $helm_root/bin/helm"
        return 0
    fi
    echo "build helm $HELM_VERSION -> $helm_root/bin/helm; log $helm_root/logs/helm.log"
    start=$(date +%s)
    rm -rf "$helm_root/bin.tmp"
    if ! (cd "$helm_root" && GOFLAGS= GOBIN="$helm_root/bin.tmp" go install $common_flags \
            -ldflags "-s -w" "helm.sh/helm/v3/cmd/helm@$HELM_VERSION") \
            >"$helm_root/logs/helm.log" 2>&1; then
        tail -30 "$helm_root/logs/helm.log" >&2
        echo "build of helm failed; full log: $helm_root/logs/helm.log" >&2
        return 1
    fi
    mv "$helm_root/bin.tmp/helm" "$helm_root/bin/helm"
    rmdir "$helm_root/bin.tmp"
    end=$(date +%s)
    echo "helm $((end - start))" >>"$helm_root/times.txt"
    echo "built helm in $((end - start))s"
}

# module_dir WRAPPER MODULE: where the Go module cache holds MODULE for that wrapper
module_dir() {
    (cd "$root/src/$1" && go list -m -f '{{.Dir}}' "$2")
}

# Copies what the harness reads from a component's source module into share/.
share_files() {
    local dir
    case "$1" in
        kwok)
            dir="$(module_dir kwok sigs.k8s.io/kwok)"
            mkdir -p "$root/share/kwok-stages"
            cp "$dir"/kustomize/stage/node/fast/node-initialize.yaml \
                "$dir"/kustomize/stage/node/heartbeat/node-heartbeat.yaml \
                "$dir"/kustomize/stage/pod/fast/pod-*.yaml "$root/share/kwok-stages/"
            chmod -R u+w "$root/share/kwok-stages" ;;
        kueue)
            dir="$(module_dir kueue sigs.k8s.io/kueue)"
            rm -rf "$root/share/kueue-crd"
            cp -r "$dir/config/components/crd/bases" "$root/share/kueue-crd"
            # its webhook configurations and the CRD conversion patches, as the release
            # kustomizes them (the harness registers them by URL)
            rm -rf "$root/share/kueue-webhook"
            mkdir -p "$root/share/kueue-webhook"
            cp "$dir/config/components/webhook/manifests.yaml" \
                "$dir/config/components/webhook/kustomization.yaml" "$root/share/kueue-webhook/"
            cp -r "$dir/config/components/crd/patches" "$root/share/kueue-webhook/crd-patches"
            cp "$dir/config/components/crd/kustomization.yaml" \
                "$root/share/kueue-webhook/crd-patches/kustomization.yaml"
            chmod -R u+w "$root/share/kueue-crd" "$root/share/kueue-webhook" ;;
        kuberay)
            dir="$(module_dir kuberay github.com/ray-project/kuberay/ray-operator)"
            rm -rf "$root/share/kuberay-crd"
            cp -r "$dir/config/crd/bases" "$root/share/kuberay-crd"
            chmod -R u+w "$root/share/kuberay-crd" ;;
    esac
}

share_only=0
if [ "${1:-}" = "--share-only" ]; then
    share_only=1
    shift
fi
components=("$@")
if [ ${#components[@]} -eq 0 ]; then
    components=(etcd kube-apiserver kwok kube-controller-manager kube-scheduler kueue kuberay helm)
fi
for c in "${components[@]}"; do
    if [ "$c" = helm ]; then
        [ "$share_only" = 1 ] || build_helm
        continue
    fi
    if [ "$share_only" = 1 ]; then
        read -r wrapper _ _ <<<"$(spec "$c")"
        mkdir -p "$root/src/$wrapper"
        [ -f "$root/src/$wrapper/go.mod" ] || cp "$here/$wrapper/go.mod" "$root/src/$wrapper/"
    else
        build_one "$c"
    fi
    share_files "$c"
done
echo "$bin"
