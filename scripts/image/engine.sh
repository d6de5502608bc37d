#!/usr/bin/env bash
# Docker Engine for `make image-test`, from Debian's packages.
#
#   engine.sh up     installs docker.io when dockerd is missing, starts
#                    dockerd unless one answers, and prints the CLI to use
#   engine.sh down   removes the test's containers and stops the dockerd
#                    `up` started (one that was already running stays)
#
# The CLI is the docker.io package's own (/usr/bin/docker): a newer CLI on
# PATH without the buildx plugin refuses BuildKit, which the Dockerfile's
# `prebuilt` stage needs.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
state="${ENKA_DOCKER_STATE:-/tmp/enka-docker-engine}"
cli=/usr/bin/docker

case "${1:-}" in
up)
    bash "$root/scripts/ensure-packages.sh" docker.io:dockerd >&2
    [[ -x "$cli" ]] || cli="$(command -v docker)"
    if ! "$cli" info >/dev/null 2>&1; then
        mkdir -p "$state"
        echo "engine: starting dockerd (log: $state/dockerd.log)" >&2
        setsid dockerd --pidfile "$state/dockerd.pid" >"$state/dockerd.log" 2>&1 </dev/null &
        echo $! >"$state/started"
        for _ in $(seq 120); do
            "$cli" info >/dev/null 2>&1 && break
            sleep 0.5
        done
        if ! "$cli" info >/dev/null 2>&1; then
            echo "engine: dockerd did not answer within 60 s:" >&2
            tail -20 "$state/dockerd.log" >&2
            exit 1
        fi
    fi
    echo "$cli"
    ;;
down)
    [[ -x "$cli" ]] || cli="$(command -v docker || echo docker)"
    if "$cli" info >/dev/null 2>&1; then
        ids="$("$cli" ps -aq --filter label=enka-image-test=1)"
        [[ -z "$ids" ]] || "$cli" rm -f $ids >/dev/null
    fi
    if [[ -f "$state/started" ]]; then
        pid="$(cat "$state/dockerd.pid" 2>/dev/null || cat "$state/started")"
        echo "engine: stopping the dockerd it started (pid $pid)" >&2
        kill "$pid" 2>/dev/null || true
        for _ in $(seq 60); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.5
        done
        if kill -0 "$pid" 2>/dev/null; then
            echo "engine: dockerd $pid did not stop; killing it" >&2
            kill -9 "$pid" 2>/dev/null || true
        fi
        # dockerd's own containerd goes with it; make sure.
        pkill -f "containerd --config /var/run/docker/containerd/containerd.toml" 2>/dev/null || true
        rm -f "$state/started"
    fi
    ;;
*)
    echo "usage: $0 up|down" >&2
    exit 2
    ;;
esac
