#!/usr/bin/env bash
# Builds sigs.k8s.io/kwok's controller from the Go module proxy (the version
# tools/kwok pins) into a cache directory keyed by version and go.sum, and
# prints that directory. It holds the `kwok` binary and `stages/`, the Stage
# documents kwok's module ships (node-initialize, node-heartbeat-with-lease,
# pod-ready, pod-complete, pod-delete and the node-not-ready chaos stage),
# which kube-env hands to kwok so simulated nodes and their Pods move through
# their lifecycle as kwokctl's default cluster does.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
module="$root/tools/kwok"
repo="sigs.k8s.io/kwok"
version="$(awk -v repo="$repo" '$1 == repo { print $2 }' "$module/go.mod")"
dir="${XDG_CACHE_HOME:-$HOME/.cache}/enka/kwok/$version-$(cat "$module/go.sum" "$0" | sha256sum | cut -c1-12)"
bin="$dir/kwok"
stages=(
    node/fast/node-initialize.yaml
    node/heartbeat-with-lease/node-heartbeat-with-lease.yaml
    node/chaos/node-not-ready.yaml
    pod/fast/pod-ready.yaml
    pod/fast/pod-complete.yaml
    pod/fast/pod-delete.yaml
)

if [[ -x "$bin" && -f "$dir/stages/.complete" ]]; then
    echo "$dir"
    exit 0
fi
command -v go >/dev/null || { echo "kwok: go is not installed; it is needed to build kwok" >&2; exit 1; }
mkdir -p "$dir"
echo "kwok: building $version into $dir (a few minutes, once)" >&2
start=$SECONDS
export GOTOOLCHAIN=local GOFLAGS=-mod=readonly GOPROXY="${GOPROXY:-https://proxy.golang.org}"
[[ "$GOPROXY" == *direct* ]] && export GOPROXY=https://proxy.golang.org
(cd "$module" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$bin.tmp" "$repo/cmd/kwok") >&2
source_dir="$(cd "$module" && go list -m -f '{{.Dir}}' "$repo")"
rm -rf "$dir/stages"
mkdir -p "$dir/stages"
for stage in "${stages[@]}"; do
    cp "$source_dir/kustomize/stage/$stage" "$dir/stages/"
done
chmod -R u+w "$dir/stages"
mv "$bin.tmp" "$bin"
touch "$dir/stages/.complete"
echo "kwok: built in $((SECONDS - start)) s" >&2
echo "$dir"
