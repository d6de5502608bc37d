#!/usr/bin/env bash
# Smoke test of the image's binary: statically linked, and it runs the
# project's watches.yaml and roles/ from the image's layout.
set -euo pipefail
cd "$(dirname "$0")/.."
binary=$(realpath "$1")
if readelf -l "$binary" | grep -q "Requesting program interpreter"; then
    echo "$binary is dynamically linked; the distroless static image cannot run it" >&2
    exit 1
fi
home=$(mktemp -d)
trap 'rm -rf "$home"' EXIT
cp watches.yaml "$home/watches.yaml"
cp -r roles "$home/roles"
(cd "$home" && env -i "$binary" check --watches-file=./watches.yaml)
# The image links ansible-operator to enka: upstream's command line works.
ln -s "$binary" "$home/ansible-operator"
version=$("$home/ansible-operator" version)
if [[ "$version" != "ansible-operator version: "* ]]; then
    echo "ansible-operator version printed: $version" >&2
    exit 1
fi
echo "$version"
echo "static binary ok: $("$binary" --version), $(du -h "$binary" | cut -f1)"
