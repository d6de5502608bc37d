#!/usr/bin/env bash
# Installs upstream's ansible-operator and the Python side it drives, from
# package registries only, into a cache directory keyed by version; prints
# that directory. `make bench` runs upstream from there, side by side with enka.
#
#   <dir>/bin/ansible-operator   built from the Go module proxy by the
#                                tools/upstream module, which pins the version
#   <dir>/venv                   ansible-core 2.18 (+ kubernetes.core from the
#                                `ansible` 11 bundle), ansible-runner 2.4, the
#                                kubernetes client and ansible-runner-http,
#                                the event plugin ansible-operator listens to
#   <dir>/collections            community.kubernetes 2.0.1, the collection
#                                the seed's role names (operator images of its
#                                day carried it; today's carry kubernetes.core,
#                                which 2.0.1 redirects to), from the `ansible`
#                                5.10.0 source release on PyPI
#
# Upstream's base image installs a vendored copy of ansible-runner-http; the
# 1.0.0 release on PyPI has the same code and entry point, so that is used.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
module="$root/tools/upstream"
repo="github.com/operator-framework/ansible-operator-plugins"
package="$repo/cmd/ansible-operator"
version="$(awk -v repo="$repo" '$1 == repo { print $2 }' "$module/go.mod")"
# The versions upstream's base image pins (images/ansible-operator/Pipfile),
# with the `ansible` bundle standing in for `ansible-galaxy collection
# install`, which needs Galaxy rather than a package registry.
#
# `upstream-ansible-operator.sh 2.19` makes the same with ansible-core 2.19
# (and the `ansible` 12 bundle, its collections) in a directory of its own:
# upstream as it runs once its base image moves to 2.19, the reference of
# `make differential-2.19`.
line="${1:-2.18}"
case "$line" in
2.18) core="ansible-core~=2.18.3" bundle="ansible>=11,<12" suffix="" ;;
2.19) core="ansible-core==2.19.14" bundle="ansible==12.3.0" suffix="-ansible-2.19" ;;
*)
    echo "upstream-ansible-operator.sh: unknown ansible-core line $line (2.18 or 2.19)" >&2
    exit 2
    ;;
esac
python_requirements=(
    "$bundle"
    "$core"
    "ansible-runner~=2.4.0"
    "kubernetes==33.1.0"
    "requests-unixsocket==0.4.1"
    "ansible-runner-http==1.0.0"
)
dir="${XDG_CACHE_HOME:-$HOME/.cache}/enka/upstream/ansible-operator-$version$suffix"
stamp="$dir/.complete"
want="recipe-2 $version $(sha256sum "$module/go.sum" | cut -c1-12) ${python_requirements[*]}"

community_kubernetes() {
    local target="$dir/collections/ansible_collections/community/kubernetes"
    local want="ansible-5.10.0 community.kubernetes"
    [[ -f "$target/.complete" && "$(cat "$target/.complete")" == "$want" ]] && return
    echo "upstream: extracting community.kubernetes from ansible 5.10.0 (PyPI) into $dir/collections" >&2
    local scratch
    scratch="$(mktemp -d)"
    "$dir/venv/bin/pip" download --quiet --disable-pip-version-check --no-deps --no-binary :all: \
        "ansible==5.10.0" -d "$scratch" >&2
    tar -xzf "$scratch/ansible-5.10.0.tar.gz" -C "$scratch" ansible-5.10.0/ansible_collections/community/kubernetes
    rm -rf "$target"
    mkdir -p "$(dirname "$target")"
    mv "$scratch/ansible-5.10.0/ansible_collections/community/kubernetes" "$target"
    rm -rf "$scratch"
    echo "$want" >"$target/.complete"
}

if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
    community_kubernetes
    echo "$dir"
    exit 0
fi

mkdir -p "$dir/bin"
echo "upstream: building ansible-operator $version into $dir/bin" >&2
(cd "$module" && GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-mod=readonly \
    go build -trimpath -ldflags "-X '$repo/internal/version.Version=$version' -X '$repo/internal/version.GitVersion=$version'" \
        -o "$dir/bin/ansible-operator" "$package") >&2
"$dir/bin/ansible-operator" version >&2

echo "upstream: installing ${python_requirements[*]} into $dir/venv" >&2
python3 -m venv "$dir/venv"
"$dir/venv/bin/pip" install --quiet --disable-pip-version-check "${python_requirements[@]}" >&2
"$dir/venv/bin/ansible-galaxy" collection list kubernetes.core >&2

community_kubernetes
echo "$want" >"$stamp"
echo "$dir"
