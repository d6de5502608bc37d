#!/usr/bin/env bash
# Runs each cargo-fuzz target (fuzz/fuzz_targets) for a bounded time.
#   scripts/fuzz.sh SECONDS [TARGET...]
# The corpus starts from fuzz/regressions/<target> (inputs that once crashed,
# kept as regression tests) plus the repository's own watches files, task
# files and templates, and grows under target/fuzz-corpus. A crash fails the
# run; copy the artifact it names into fuzz/regressions/<target>/.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds="${1:?seconds per target}"
shift
targets=("$@")
((${#targets[@]})) || targets=(watches role template custom_resource inventory)

cargo_fuzz_version=0.13.2
if ! cargo fuzz --version 2>/dev/null | grep -q "$cargo_fuzz_version"; then
  echo "fuzz: installing cargo-fuzz $cargo_fuzz_version from crates.io"
  cargo install cargo-fuzz --locked --version "$cargo_fuzz_version" --quiet
fi

# libFuzzer's instrumentation needs nightly flags. The machine's nightly
# toolchain is used when there is one; otherwise stable is told to accept
# them, without AddressSanitizer (which needs a nightly standard library).
if rustup run nightly rustc --version >/dev/null 2>&1; then
  fuzz=(cargo +nightly fuzz)
  sanitizer=(--sanitizer address)
else
  export RUSTC_BOOTSTRAP=1
  fuzz=(cargo fuzz)
  sanitizer=(--sanitizer none)
fi

seed() {
  local target=$1 dir=target/fuzz-corpus/$1
  mkdir -p "$dir"
  cp fuzz/regressions/"$target"/* "$dir"/
  case "$target" in
    watches) find . -maxdepth 4 -name 'watches*.yaml' -not -path './target/*' ;;
    role) find roles tests -path '*/tasks/*.yml' ;;
    template) find roles tests -name '*.j2' ;;
    custom_resource) find tests/catalogue/project/config -name '*.yaml' ;;
  esac | while read -r file; do cp "$file" "$dir/seed-$(echo "$file" | tr '/' '_')"; done
}

free_gib() { df -Pk target | awk 'NR == 2 { printf "%d", $4 / 1048576 }'; }

echo "fuzz: building ${targets[*]} (${fuzz[*]}, ${sanitizer[*]}; $(free_gib) GiB free)"
mkdir -p target
if ! "${fuzz[@]}" build -O "${sanitizer[@]}" >target/fuzz-build.log 2>&1; then
  tail -30 target/fuzz-build.log >&2
  # A linker killed by SIGBUS is how a full disk shows up in the instrumented
  # build; say so rather than leave a linker crash to be puzzled over.
  echo "fuzz: the build failed with $(free_gib) GiB free on target/'s disk (full log: target/fuzz-build.log)" >&2
  exit 1
fi
for target in "${targets[@]}"; do
  seed "$target"
  echo "fuzz: $target for ${seconds}s"
  log=target/fuzz-$target.log
  if ! "${fuzz[@]}" run -O "${sanitizer[@]}" "$target" "target/fuzz-corpus/$target" -- \
      -max_total_time="$seconds" -rss_limit_mb=4096 -timeout=10 -max_len=65536 -print_final_stats=1 >"$log" 2>&1; then
    grep -E "panicked|ERROR|SUMMARY|Test unit written|artifact" "$log" | head -20 >&2
    echo "fuzz: $target found a crash (full log: $log); keep the input in fuzz/regressions/$target/" >&2
    exit 1
  fi
  runs=$(grep -Eo 'stat::number_of_executed_units: *[0-9]+' "$log" | grep -Eo '[0-9]+$' || echo '?')
  echo "fuzz: $target ok, $runs inputs, no crash"
done
