#!/usr/bin/env bash
# Builds enka's image with the local Docker engine and no registry: the base
# from Debian's packages (scripts/image/base.sh), the static binary built as
# `make image-check` builds it (the Rust stage's image cannot be pulled
# here), and everything else as the Dockerfile says. Prints the image's name.
#
# IMAGE names it (default enka.local/enka:dev); ENKA_IMAGE_LINE picks the
# worker's ansible-core line: 2.18 (default, upstream's), 2.19, or 2.21 (on
# a Debian 13 base, whose Python 3.13 it needs).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"
docker="${DOCKER:-docker}"
image="${IMAGE:-enka.local/enka:dev}"

case "${ENKA_IMAGE_LINE:-2.18}" in
    2.18) suite=bookworm requirements=requirements.txt ;;
    2.19) suite=bookworm requirements=requirements-2.19.txt ;;
    2.21) suite=trixie requirements=requirements-2.21.txt ;;
    *)
        echo "image: no ansible-core line ${ENKA_IMAGE_LINE} (2.18, 2.19 or 2.21)" >&2
        exit 2
        ;;
esac
base="$(ENKA_BASE_SUITE="$suite" bash scripts/image/base.sh)"
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
    --build-arg "WORKER_REQUIREMENTS=crates/enka-worker/$requirements" \
    --build-arg "ENKA_GIT_COMMIT=$commit" \
    --tag "$image" . >&2
echo "$image"
