#!/usr/bin/env bash
# `make demo`: a real local control plane, enka on this project's watches.yaml
# and roles/, and the sample Hikawa sung live until "Kiyoshi!". Everything it
# starts is stopped on exit, even on Ctrl-C.
set -euo pipefail
cd "$(dirname "$0")/.."

interval_ms=${INTERVAL_MS:-}
nodes=${NODES:-0}
seed=${SEED:-}
work=$(mktemp -d "${TMPDIR:-/tmp}/enka-demo.XXXXXX")
enka_pid=""

cleanup() {
    echo "==> cleaning up"
    if [[ -n "$enka_pid" ]]; then
        kill "$enka_pid" 2>/dev/null || true
        wait "$enka_pid" 2>/dev/null || true
    fi
    ./target/release/kube-env down --dir "$work/control-plane" >/dev/null 2>&1 || true
    rm -rf "$work"
}
trap cleanup EXIT

echo "==> building the control plane from Go modules (cached by version) and enka (release)"
bin=$(bash tools/kube-env/build.sh)
cargo build --release --quiet -p enka -p kube-env
kubectl="$bin/kubectl"

export ENKA_KUBE_BIN_DIR="$bin"
if [[ "$nodes" != 0 ]]; then
    echo "==> starting etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok ($nodes simulated nodes) on 127.0.0.1"
    ENKA_KWOK_DIR="$(bash scripts/kwok.sh)"
    export ENKA_KWOK_DIR
else
    echo "==> starting etcd, kube-apiserver and kube-controller-manager on 127.0.0.1"
fi
eval "$(./target/release/kube-env up --dir "$work/control-plane" --nodes "$nodes")"

echo "==> installing the CRDs"
"$kubectl" apply -f config/crd/bases >/dev/null
"$kubectl" wait --for condition=established --timeout=60s -f config/crd/bases >/dev/null
# kubectl discovers the new kinds once here, not on the song's clock.
"$kubectl" get hikawas,zundokos,kiyoshis >/dev/null 2>&1 || true

echo "==> starting enka (log: $work/enka.log)"
ENKA_LOG=info ./target/release/enka run \
    --watches-file watches.yaml ${seed:+--random-seed "$seed"} \
    --metrics-bind-address 0 --health-probe-bind-address 0 \
    >"$work/enka.log" 2>&1 &
enka_pid=$!
for _ in $(seq 300); do
    grep -q "enka is running" "$work/enka.log" && break
    if ! kill -0 "$enka_pid" 2>/dev/null; then
        echo "enka did not start; its log:" >&2
        cat "$work/enka.log" >&2
        exit 1
    fi
    sleep 0.1
done

sample=config/samples/zundokokiyoshi_v1beta2_hikawa.yaml
if [[ -n "$interval_ms" ]]; then
    sed "s/intervalMillis: .*/intervalMillis: $interval_ms/" "$sample" >"$work/hikawa.yaml"
    sample="$work/hikawa.yaml"
fi
echo "==> applying the Hikawa ($(grep intervalMillis "$sample" | tr -d ' '))${seed:+, seed $seed}"
start=$(date +%s%N)
"$kubectl" apply -f "$sample" >/dev/null

elapsed() { printf '%6.2f s' "$(( ($(date +%s%N) - start) / 1000000 ))e-3"; }
shown=0
while :; do
    if ! kill -0 "$enka_pid" 2>/dev/null; then
        echo "enka stopped unexpectedly; its log:" >&2
        tail -n 40 "$work/enka.log" >&2
        exit 1
    fi
    says=$("$kubectl" get zundokos -l hikawa.zundokokiyoshi.kaitoy.github.com=hikawa \
        --sort-by=.metadata.name -o jsonpath='{range .items[*]}{.spec.say}{"\n"}{end}')
    mapfile -t song < <(printf '%s' "$says" | sed '/^$/d')
    while (( shown < ${#song[@]} )); do
        shown=$((shown + 1))
        printf '%s  %4d  %s\n' "$(elapsed)" "$shown" "${song[shown - 1]}"
    done
    if [[ "$("$kubectl" get hikawa hikawa -o jsonpath='{.status.kiyoshied}')" == "true" ]]; then
        kiyoshi=$("$kubectl" get kiyoshi hikawa-kiyoshi -o jsonpath='{.spec.say}')
        printf '%s        Ki-yo-shi!  (hikawa-kiyoshi says "%s" after %d Zundokos)\n' "$(elapsed)" "$kiyoshi" "$shown"
        echo
        "$kubectl" get hikawa hikawa
        break
    fi
    if (( ($(date +%s%N) - start) / 1000000000 > 600 )); then
        echo "no Kiyoshi within 10 minutes; enka's log:" >&2
        tail -n 40 "$work/enka.log" >&2
        exit 1
    fi
    sleep 0.1
done
