#!/usr/bin/env bash
# Installs the Debian packages named on the command line that are missing,
# so the README's `make test` and `make demo` work on a fresh machine of this
# kind. Each argument is `package` or `package:command` (installed when that
# command is not on PATH).
set -euo pipefail

missing=()
for spec in "$@"; do
    package="${spec%%:*}"
    command="${spec#*:}"
    if [[ "$spec" == *:* ]]; then
        command -v "$command" >/dev/null 2>&1 && continue
    else
        dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" && continue
    fi
    missing+=("$package")
done
((${#missing[@]})) || exit 0

if [[ "$(id -u)" != 0 ]]; then
    echo "ensure-packages: missing ${missing[*]}; install them (apt-get install ${missing[*]}) or run as root" >&2
    exit 1
fi
echo "ensure-packages: installing ${missing[*]}" >&2
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >&2
