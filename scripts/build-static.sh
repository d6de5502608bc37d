#!/usr/bin/env bash
# The enka binary the container image ships: a static musl build with the
# locked dependencies. The Dockerfile runs this script, and `make test` runs
# it outside Docker, so the image's binary is the one the tests build.
# Prints the binary's path.
set -euo pipefail
cd "$(dirname "$0")/.."
target="${ENKA_STATIC_TARGET:-$(uname -m)-unknown-linux-musl}"
if command -v rustup >/dev/null && ! rustup target list --installed | grep -qx "$target"; then
    rustup target add "$target" >&2
fi
cargo build --release --locked --target "$target" -p enka >&2
echo "target/$target/release/enka"
