#!/usr/bin/env bash
# Makes the image's base without a registry: a Debian root file system from
# Debian's packages (debootstrap), with the Python the public base has
# (bookworm's python3.11 with pip, `python3` at /usr/local/bin as in
# python:3.11-slim-bookworm), imported into the local Docker engine.
# Prints the image's name, for `docker build --build-arg PYTHON_IMAGE=...`.
#
# The root file system is cached by suite and package list under
# ~/.cache/enka/image-base. On top of it go the CA certificates the build
# needs beyond Debian's: the build machine's own
# (/usr/local/share/ca-certificates; pip reaches PyPI through this
# network's TLS-inspecting proxy as the machine does) and any in
# ENKA_BASE_EXTRA_CA (colon-separated files; `make image-test` adds its
# Galaxy stand-in's). A base made here is for local builds, never shipped.
set -euo pipefail

suite="${ENKA_BASE_SUITE:-bookworm}"
mirror="${ENKA_BASE_MIRROR:-http://deb.debian.org/debian}"
packages="python3,python3-pip,python3-venv,ca-certificates"
docker="${DOCKER:-docker}"
root="$(cd "$(dirname "$0")/../.." && pwd)"
cache="${XDG_CACHE_HOME:-$HOME/.cache}/enka/image-base"

rootfs_key="$(printf '%s\n' "$suite" "$packages" | sha256sum | cut -c1-12)"
rootfs_image="enka.local/debian-rootfs:$suite-$rootfs_key"
tarball="$cache/$suite-$rootfs_key.tar"

cas=(/usr/local/share/ca-certificates/*.crt)
[[ -e "${cas[0]}" ]] || cas=()
IFS=: read -r -a extra <<<"${ENKA_BASE_EXTRA_CA:-}"
for ca in "${extra[@]}"; do
    [[ -n "$ca" ]] && cas+=("$ca")
done
key="$( (echo "$rootfs_key"; cat "${cas[@]}" /dev/null) | sha256sum | cut -c1-12)"
image="enka.local/debian-python:$suite-$key"

if "$docker" image inspect "$image" >/dev/null 2>&1; then
    echo "$image"
    exit 0
fi

work="$(mktemp -d "${TMPDIR:-/tmp}/enka-base.XXXXXX")"
trap 'rm -rf "$work"' EXIT

if [[ ! -f "$tarball" ]]; then
    bash "$root/scripts/ensure-packages.sh" debootstrap:debootstrap >&2
    rootfs="$work/rootfs"
    echo "image-base: debootstrap $suite ($packages) from $mirror (a few minutes, once)" >&2
    if ! debootstrap --variant=minbase --include="$packages" "$suite" "$rootfs" "$mirror" \
        >"$work/debootstrap.log" 2>&1; then
        tail -30 "$work/debootstrap.log" >&2
        echo "image-base: debootstrap failed" >&2
        exit 1
    fi
    # As in the python image: pip may install into the image's Python, and
    # `python3` is /usr/local/bin/python3.
    rm -f "$rootfs"/usr/lib/python3*/EXTERNALLY-MANAGED
    ln -sf /usr/bin/python3 "$rootfs/usr/local/bin/python3"
    ln -sf /usr/bin/python3 "$rootfs/usr/local/bin/python"
    ln -sf /usr/bin/pip3 "$rootfs/usr/local/bin/pip"
    chroot "$rootfs" apt-get clean
    rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/*.bin "$rootfs"/tmp/* \
        "$rootfs"/proc/* "$rootfs"/sys/* "$rootfs"/dev/*
    mkdir -p "$cache"
    tar --numeric-owner -C "$rootfs" -cf "$tarball.tmp" .
    mv "$tarball.tmp" "$tarball"
    rm -rf "$rootfs"
fi
if ! "$docker" image inspect "$rootfs_image" >/dev/null 2>&1; then
    echo "image-base: importing $tarball as $rootfs_image" >&2
    "$docker" import "$tarball" "$rootfs_image" >&2
fi

mkdir -p "$work/context"
i=0
for ca in "${cas[@]}"; do
    cp "$ca" "$work/context/local-$i.crt"
    i=$((i + 1))
done
cat >"$work/context/Dockerfile" <<DOCKERFILE
FROM $rootfs_image
COPY . /usr/local/share/ca-certificates/
RUN rm /usr/local/share/ca-certificates/Dockerfile && update-ca-certificates
ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8
CMD ["python3"]
DOCKERFILE
echo "image-base: $image ($rootfs_image with ${#cas[@]} local CA certificates)" >&2
DOCKER_BUILDKIT=1 "$docker" build --quiet --tag "$image" "$work/context" >&2
echo "$image"
