#!/usr/bin/env bash
# Installs the Python side of enka's Ansible worker from PyPI into a
# virtualenv cached by its requirements, and prints that virtualenv's python.
# `make test`, `make demo` and `make run` point ENKA_ANSIBLE_PYTHON at it.
#
# Usage: ansible-venv.sh [LINE], LINE being the ansible-core release line:
#   2.18 (the default) requirements.txt + requirements-collections.txt;
#   2.19               requirements-2.19.txt + requirements-collections-2.19.txt,
#                      on this machine's python3 like 2.18;
#   2.21               needs Python >= 3.12, which this machine lacks: handed
#                      to scripts/ansible-chroot.sh, which prints a python that
#                      runs in a Debian 13 root.
#
# The default line's ansible-core is pinned below 2.19 (whose data tagging
# replaced the unsafe types enka mirrors); the other lines are there to run
# enka against the newer releases. The `ansible` bundle of each line's release
# carries the collections real operators use (kubernetes.core,
# community.general, …), since Galaxy is not a package registry; `kubernetes`
# is what kubernetes.core's modules import; `jmespath` is json_query's,
# `passlib` password_hash's.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
line="${1:-2.18}"
case "$line" in
    2.18) suffix="" ;;
    2.19) suffix="-2.19" ;;
    2.21) exec bash "$root/scripts/ansible-chroot.sh" ;;
    *)
        echo "ansible-venv: no ansible-core line $line (2.18, 2.19 or 2.21)" >&2
        exit 2
        ;;
esac
requirements="$root/crates/enka-worker/requirements$suffix.txt"
collections="$root/crates/enka-worker/requirements-collections$suffix.txt"
# Keyed by the pinned packages alone: a comment edit reinstalls nothing.
key="$(grep -hv '^#' "$requirements" "$collections" | sha256sum | cut -c1-12)"
# The default line's virtualenvs are where enka looks for one when
# ENKA_ANSIBLE_PYTHON is not set (the newest under enka/ansible); the other
# lines' stay apart, so that finding one never changes the line.
dir="${XDG_CACHE_HOME:-$HOME/.cache}/enka/ansible${suffix}/$key"
stamp="$dir/.complete"

if [[ -f "$stamp" ]]; then
    echo "$dir/venv/bin/python"
    exit 0
fi

python="${ENKA_BOOTSTRAP_PYTHON:-python3}"
if ! "$python" -c 'import venv, ensurepip' 2>/dev/null; then
    echo "ansible-venv: $python cannot make a virtualenv; installing python3-venv" >&2
    bash "$root/scripts/ensure-packages.sh" python3-venv >&2
fi
echo "ansible-venv: installing $(grep -hv '^#' "$requirements" "$collections" | xargs) into $dir/venv" >&2
rm -rf "$dir"
mkdir -p "$dir"
"$python" -m venv "$dir/venv"
"$dir/venv/bin/pip" install --quiet --disable-pip-version-check -r "$requirements" -r "$collections" >&2
"$dir/venv/bin/python" -c 'import ansible.release, sys; assert ansible.release.__version__.startswith(sys.argv[1] + "."), ansible.release.__version__' "$line" >&2
touch "$stamp"
echo "$dir/venv/bin/python"
