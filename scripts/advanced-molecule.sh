#!/usr/bin/env bash
# Generates upstream's advanced-molecule-operator with upstream's own
# generator (ansible-operator-plugins hack/generate/samples/molecule, a tool
# of tools/upstream, built from the Go module proxy; it scaffolds in-process,
# without operator-sdk), into a cache directory keyed by version; prints it.
#
# Then does what the sample's Dockerfile does, with the image's HOME
# (/opt/ansible) standing for that directory: the Vault password file and
# the encrypted vars file, the fixture collection installed as
# operator_sdk.test_fixtures (under <dir>/collections), and ansible.cfg's
# and the playbooks' /opt/ansible paths pointing at the directory, and the
# inventory's interpreter at the virtualenv's Python.
#
#   scripts/advanced-molecule.sh ANSIBLE_VENV_BIN
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
venv_bin="${1:?the bin directory of a virtualenv with ansible-core}"
module="$root/tools/upstream"
repo="github.com/operator-framework/ansible-operator-plugins"
version="$(awk -v repo="$repo" '$1 == repo { print $2 }' "$module/go.mod")"
dir="${XDG_CACHE_HOME:-$HOME/.cache}/enka/upstream/advanced-molecule-$version-$(sha256sum "$module/go.sum" "$0" | sha256sum | cut -c1-12)"
project="$dir/advanced-molecule-operator"

if [[ -f "$dir/.complete" ]]; then
    echo "$project"
    exit 0
fi
rm -rf "$dir"
mkdir -p "$dir"
echo "advanced-molecule: generating upstream's sample $version into $dir" >&2
(cd "$module" && GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-mod=readonly \
    go build -o "$dir/generate" "$repo/hack/generate/samples/molecule") >&2
# The generator copies its testdata relative to the working directory: the
# module's own root.
source_dir="$(cd "$module" && GOTOOLCHAIN=local GOFLAGS=-mod=readonly go list -m -f '{{.Dir}}' "$repo")"
(cd "$source_dir" && "$dir/generate" -sample advanced -samples-root "$dir") >&2

# The Dockerfile's steps, with /opt/ansible standing for $project.
echo abc123 >"$project/pwd.yml"
"$venv_bin/ansible-vault" encrypt_string --vault-password-file "$project/pwd.yml" 'thisisatest' \
    --name 'the_secret' >"$project/vars.yml" 2>/dev/null
mkdir -p "$project/collections/ansible_collections/operator_sdk"
cp -r "$project/fixture_collection" "$project/collections/ansible_collections/operator_sdk/test_fixtures"
grep -rl /opt/ansible "$project/ansible.cfg" "$project/playbooks" "$project/config/manager" |
    while read -r file; do sed -i "s#/opt/ansible#$project#g" "$file"; done
# The image's Python (with the kubernetes client) is the virtualenv's here.
sed -i "s#/usr/local/bin/python3#$venv_bin/python3#" "$project/inventory/hosts"
touch "$dir/.complete"
echo "$project"
