#!/usr/bin/env bash
# Makes a python for enka's Ansible worker on the ansible-core 2.21 line and
# prints its path: `scripts/ansible-venv.sh 2.21` hands over to this script,
# and tests point ENKA_ANSIBLE_PYTHON at what it prints.
#
# ansible-core 2.21 needs Python >= 3.12 and this machine (Debian 12) has
# 3.11, so the interpreter lives in a Debian 13 (trixie) root file system made
# once with debootstrap from Debian's mirror, with a virtualenv at
# /opt/enka-venv holding crates/enka-worker/requirements-2.21.txt and
# requirements-collections-2.21.txt from PyPI. The host's extra CAs
# (/usr/local/share/ca-certificates) are trusted inside too, so pip works
# behind a TLS-intercepting proxy. All of it is cached under
# ~/.cache/enka/ansible-chroot/<key>/, keyed by the suite, the Debian packages
# and the pinned requirements.
#
# What it prints, <key>/bin/python, is a drop-in for a python path: it runs
# the root's /opt/enka-venv/bin/python with its arguments, in the caller's
# working directory and environment, stdin/stdout/stderr and exit status
# passed through. It enters a private mount namespace (so nothing it mounts
# outlives it), mounts /proc and binds /dev, /tmp, /work, the top-level
# directory of the working directory, ~/.cache/enka, $TMPDIR, /etc/resolv.conf
# and /etc/hosts into the root at the same paths (and any of ENKA_CHROOT_BIND,
# colon-separated; never over the root's own /usr, /etc, /var, …), then
# chroots. <key>/bin/enter does the same for any
# command (`enter /usr/bin/python3 -V`). Both need root, for unshare, mount
# and chroot.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
requirements="$root/crates/enka-worker/requirements-2.21.txt"
collections="$root/crates/enka-worker/requirements-collections-2.21.txt"
suite=trixie
# openssh-client: Ansible's ssh connection runs the ssh client, as tasks
# delegated to a remote host do (the play corpus has such cases).
packages=python3,python3-venv,ca-certificates,openssh-client
mirror=http://deb.debian.org/debian
# Keyed by the suite, the packages and the pinned lines alone: a comment edit
# rebuilds nothing.
key="$({ echo "$suite $packages"; grep -hv '^#' "$requirements" "$collections"; } | sha256sum | cut -c1-12)"
base="${XDG_CACHE_HOME:-$HOME/.cache}/enka/ansible-chroot"
dir="$base/$key"
rootfs="$dir/root"
stamp="$dir/.complete"

# The wrappers are written on every run (when they changed), so an edit of
# them here reaches a cached root without rebuilding it.
write_wrappers() {
    mkdir -p "$dir/bin"
    local enter python
    enter="$(cat <<EOF
#!/usr/bin/env bash
# Written by scripts/ansible-chroot.sh: runs a command inside $rootfs
# (Debian $suite) in the caller's working directory and environment.
set -euo pipefail
rootfs='$rootfs'
if [[ "\${1:-}" != --enka-chroot-inside ]]; then
    # A private mount namespace: the mounts below vanish with the command.
    exec unshare --mount --propagation private -- '$dir/bin/enter' --enka-chroot-inside "\$@"
fi
shift
(( \$# )) || { echo "enter: no command given" >&2; exit 2; }
# Binds host path \$1 at the same path inside, unless it is there already.
share() {
    local path="\$1"
    [[ -e "\$path" ]] || return 0
    # Never over the root's own directories (/dev, /proc and two files of
    # /etc are done apart).
    [[ "\$path" == / ]] && return 0
    local own
    for own in /bin /boot /dev /etc /lib /lib32 /lib64 /opt /proc /run /sbin /sys /usr /var; do
        [[ "\$path" == "\$own" || "\$path" == "\$own"/* ]] && return 0
    done
    if [[ -d "\$path" ]]; then
        mountpoint -q "\$rootfs\$path" 2>/dev/null && return 0
        mkdir -p "\$rootfs\$path"
    else
        mkdir -p "\$rootfs\$(dirname "\$path")"
        [[ -e "\$rootfs\$path" ]] || touch "\$rootfs\$path"
    fi
    mount --bind "\$path" "\$rootfs\$path"
}
mount -t proc proc "\$rootfs/proc"
mount --rbind /dev "\$rootfs/dev"
for file in /etc/resolv.conf /etc/hosts; do
    [[ -f "\$file" && -f "\$rootfs\$file" ]] && mount --bind "\$file" "\$rootfs\$file"
done
share /tmp
share /work
cwd="\$(pwd -P)"
top="\${cwd#/}"
share "/\${top%%/*}"
cache="\${XDG_CACHE_HOME:-\${HOME:+\$HOME/.cache}}"
[[ -z "\$cache" ]] || share "\$cache/enka"
[[ -z "\${TMPDIR:-}" ]] || share "\$TMPDIR"
IFS=: read -r -a extra <<< "\${ENKA_CHROOT_BIND:-}"
for path in "\${extra[@]}"; do
    [[ -n "\$path" ]] && share "\$path"
done
exec unshare --root="\$rootfs" --wd="\$cwd" -- "\$@"
EOF
)"
    python="$(cat <<EOF
#!/usr/bin/env bash
# Written by scripts/ansible-chroot.sh: the ansible-core 2.21 line's python,
# /opt/enka-venv/bin/python inside $rootfs.
exec '$dir/bin/enter' /opt/enka-venv/bin/python "\$@"
EOF
)"
    local name content
    for name in enter python; do
        content="${!name}"
        if [[ "$(cat "$dir/bin/$name" 2>/dev/null)" != "$content" ]]; then
            printf '%s\n' "$content" >"$dir/bin/.$name.new"
            chmod +x "$dir/bin/.$name.new"
            mv -f "$dir/bin/.$name.new" "$dir/bin/$name"
        fi
    done
}

if [[ -f "$stamp" ]]; then
    write_wrappers
    echo "$dir/bin/python"
    exit 0
fi

mkdir -p "$base"
# One build at a time; a second caller waits for it and takes its result.
exec 9>"$base/$key.lock"
flock 9
if [[ -f "$stamp" ]]; then
    write_wrappers
    echo "$dir/bin/python"
    exit 0
fi

if [[ "$(id -u)" != 0 ]]; then
    echo "ansible-chroot: debootstrap, unshare, mount and chroot need root" >&2
    exit 1
fi
bash "$root/scripts/ensure-packages.sh" debootstrap:debootstrap >&2
# Every mount of a build or a run is made in a private mount namespace, but
# never delete through one that somehow survived into the host's /dev or /work.
if grep -qF " $dir/" /proc/self/mountinfo; then
    echo "ansible-chroot: something is mounted under $dir; unmount it (umount -R) first" >&2
    exit 1
fi
echo "ansible-chroot: making a Debian $suite root with $packages and $(grep -hv '^#' "$requirements" "$collections" | xargs) in $dir" >&2
rm -rf "$dir"
mkdir -p "$dir"
log="$dir/debootstrap.log"
started=$SECONDS
if ! unshare --mount --propagation private -- \
    debootstrap --variant=minbase --include="$packages" "$suite" "$rootfs" "$mirror" >"$log" 2>&1; then
    echo "ansible-chroot: debootstrap failed; the end of $log:" >&2
    tail -n 30 "$log" >&2
    exit 1
fi
echo "ansible-chroot: debootstrap took $((SECONDS - started))s" >&2
rm -rf "$rootfs/var/cache/apt/archives/"*.deb
write_wrappers
enter() { (cd / && "$dir/bin/enter" "$@"); }

shopt -s nullglob
cas=(/usr/local/share/ca-certificates/*.crt)
if ((${#cas[@]})); then
    cp "${cas[@]}" "$rootfs/usr/local/share/ca-certificates/"
fi
enter /usr/sbin/update-ca-certificates >"$dir/update-ca-certificates.log" 2>&1 || {
    tail -n 20 "$dir/update-ca-certificates.log" >&2
    exit 1
}

mkdir -p "$rootfs/opt/enka-requirements"
cp "$requirements" "$collections" "$rootfs/opt/enka-requirements/"
enter /usr/bin/python3 -m venv /opt/enka-venv
# The root's CA bundle now holds the host's CAs too; find-links paths of the
# host's pip settings are not there.
enter /usr/bin/env -u PIP_FIND_LINKS PIP_CERT=/etc/ssl/certs/ca-certificates.crt \
    /opt/enka-venv/bin/pip install --quiet --disable-pip-version-check --no-cache-dir \
    -r "/opt/enka-requirements/$(basename "$requirements")" \
    -r "/opt/enka-requirements/$(basename "$collections")" >&2
"$dir/bin/python" -c 'import ansible.release, sys; assert ansible.release.__version__.startswith("2.21."), ansible.release.__version__' >&2
touch "$stamp"
echo "$dir/bin/python"
