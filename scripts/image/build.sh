#!/usr/bin/env bash
# Builds enka's image with the local Docker engine and no registry: the base
# from Debian's packages (scripts/image/base.sh), the static binary built as
# `make image-check` builds it (the Rust stage's image cannot be pulled
# here), and everything else as the Dockerfile says. Prints the image's name.
#
# IMAGE names it (default enka.local/enka:dev).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"
docker="${DOCKER:-docker}"
image="${IMAGE:-enka.local/enka:dev}"

base="$(bash scripts/image/base.sh)"
binary="$(bash scripts/build-static.sh)"
commit="$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)"
# The Dockerfile's `prebuilt` stage copies the binary from the context.
rm -rf .image
mkdir .image
trap 'rm -rf "$root/.image"' EXIT
cp "$binary" .image/enka

echo "image: docker build -t $image (base $base, binary $binary)" >&2
DOCKER_BUILDKIT=1 "$docker" build --quiet \
    --build-arg "PYTHON_IMAGE=$base" \
    --build-arg ENKA_BINARY=prebuilt \
    --build-arg "ENKA_GIT_COMMIT=$commit" \
    --tag "$image" . >&2
echo "$image"
