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
# `enka version` and ansible_operator_build_info name the commit, as
# upstream's release builds do; the Dockerfile passes it as a build arg
# since the build context has no .git.
if [[ -z "${ENKA_GIT_COMMIT:-}" ]]; then
    ENKA_GIT_COMMIT="$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)"
fi
export ENKA_GIT_COMMIT
cargo build --release --locked --target "$target" -p enka >&2
echo "target/$target/release/enka"
