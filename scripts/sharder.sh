#!/usr/bin/env bash
# Builds timebertt/kubernetes-controller-sharding's sharder from the Go module
# proxy (the version tools/sharder pins) into a cache directory keyed by
# version and go.sum; prints the directory, which holds the `sharder` binary
# and the module's config/ (the ControllerRing CRD). The sharding test and
# benchmark run enka replicas as shards of a ring it manages.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
module="$root/tools/sharder"
repo="github.com/timebertt/kubernetes-controller-sharding"
version="$(awk -v repo="$repo" '$1 == repo { print $2 }' "$module/go.mod")"
dir="${XDG_CACHE_HOME:-$HOME/.cache}/enka/sharder/$version-$(sha256sum "$module/go.sum" | cut -c1-12)"
bin="$dir/sharder"

if [[ -x "$bin" && -f "$dir/crds/sharding.timebertt.dev_controllerrings.yaml" ]]; then
    echo "$dir"
    exit 0
fi
mkdir -p "$dir"
echo "sharder: building $version into $dir (a few minutes, once)" >&2
# The checksum database does not list every version the proxy serves;
# go.sum pins the module's hash, so it is not asked.
export GOTOOLCHAIN=local GOFLAGS=-mod=readonly GONOSUMDB="$repo" \
    GOPROXY="${GOPROXY:-https://proxy.golang.org}"
(cd "$module" && CGO_ENABLED=0 go build -trimpath -o "$bin.tmp" "$repo/cmd/sharder") >&2
source_dir="$(cd "$module" && go list -m -f '{{.Dir}}' "$repo")"
mkdir -p "$dir/crds"
cp "$source_dir"/config/crds/*.yaml "$dir/crds/"
chmod u+w "$dir"/crds/*.yaml
mv "$bin.tmp" "$bin"
echo "$dir"
