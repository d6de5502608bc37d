#!/usr/bin/env bash
# Builds etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kubectl from the
# pinned Go modules in this directory into a cache keyed by version, outside
# target/, and prints that directory. A warm call only checks a stamp file.
#
#   tools/kube-env/build.sh            # prints the bin dir
#   ENKA_KUBE_ENV_CACHE=/path ...      # overrides the cache root
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
kube_version="$(awk '$1=="k8s.io/kubernetes"{print $2; exit}' "$here/go.mod")"
etcd_version="$(awk '$1=="go.etcd.io/etcd/server/v3"{print $2; exit}' "$here/go.mod")"
# The key covers every input of the build: the pinned module graph and our mains.
key="$(cat "$here/go.mod" "$here/go.sum" "$here"/cmd/*/main.go "$0" | sha256sum | cut -c1-12)"
cache_root="${ENKA_KUBE_ENV_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/enka/kube-env}"
bin="$cache_root/$kube_version-$key"
stamp="$bin/.complete"

if [[ -f "$stamp" ]]; then
  echo "$bin"
  exit 0
fi

command -v go >/dev/null || { echo "kube-env: go is not installed; it is needed to build the control plane" >&2; exit 1; }

major_minor="${kube_version#v}"; major="${major_minor%%.*}"; rest="${major_minor#*.}"; minor="${rest%%.*}"
ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags+=" -X $pkg.gitVersion=$kube_version -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
  ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
done
ldflags+=" -X go.etcd.io/etcd/api/v3/version.GitSHA=module-${etcd_version}"

export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS="-trimpath -mod=readonly"
export GOPROXY="${GOPROXY:-https://proxy.golang.org}"
[[ "$GOPROXY" == *direct* ]] && export GOPROXY=https://proxy.golang.org

mkdir -p "$bin.tmp"
start=$SECONDS
echo "kube-env: building $kube_version (etcd $etcd_version) into $bin; a cold build takes several minutes" >&2
(cd "$here" && go mod download)
(cd "$here" && go build -ldflags "$ldflags" -o "$bin.tmp/" ./cmd/etcd ./cmd/kube-apiserver ./cmd/kube-controller-manager ./cmd/kube-scheduler ./cmd/kubectl)
rm -rf "$bin"
mv "$bin.tmp" "$bin"
echo "$kube_version" > "$stamp"
echo "kube-env: built in $((SECONDS - start)) s" >&2
echo "$bin"
