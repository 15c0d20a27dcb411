#!/usr/bin/env bash
# Runs every fuzz target for SECONDS each (default 600, the issue's ten
# minutes) with cargo-fuzz on the nightly toolchain, then keeps a
# minimized corpus in fuzz/corpus (replayed by tests/fuzz_corpus.rs in CI)
# and copies any crash into fuzz/regressions/TARGET/ for the same test.
# Prints one line per target: executions, coverage, corpus, crashes.
#   cargo install cargo-fuzz; bench/fuzz.sh [SECONDS] [TARGET...]
set -euo pipefail
cd "$(dirname "$0")/../fuzz"
secs=${1:-600}; shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(control study_toml lab_spec nfqueue results_json memcache udp_header)
command -v cargo-fuzz >/dev/null || { echo "cargo-fuzz missing: cargo install cargo-fuzz" >&2; exit 1; }
cargo +nightly fuzz build -O >/dev/null
# The fuzzers run from a copy of the built binaries: `cargo fuzz run`
# rebuilds (minutes) whenever a source file changed since, and an hour of
# fuzzing should not depend on nobody editing meanwhile.
bins=$(mktemp -d); trap 'rm -rf "$bins"' EXIT
for t in "${targets[@]}"; do cp "target/x86_64-unknown-linux-gnu/release/$t" "$bins/"; done
# The merge keeps only inputs that add coverage, but a merged corpus still
# ran to 23,500 files (results_json alone 11,941), more than tools that
# read the tree cope with. So each target keeps at most KEEP hash-named
# inputs (named seeds always stay), spread evenly over the sizes: pruning
# to the smallest (as this script once did) dropped the deep inputs,
# which are the largest (results_json's kept coverage fell from 7,499 to
# 3,062 edges), while an even spread keeps large and small ones alike.
keep=${KEEP:-250}
prune() {
  mapfile -t files < <(ls -S -r "$1" | grep -E '^[0-9a-f]{40}$')
  local n=${#files[@]}
  [ "$n" -le "$keep" ] && return
  declare -A pick=()
  for ((i = 0; i < keep; i++)); do pick[$(( i * (n - 1) / (keep - 1) ))]=1; done
  for ((i = 0; i < n; i++)); do [ -n "${pick[$i]:-}" ] || rm -f "$1/${files[$i]}"; done
}
for t in "${targets[@]}"; do
  log=$(mktemp)
  mkdir -p "corpus/$t" "artifacts/$t"
  # -rss_limit_mb: a parser that allocates without bound is a crash too.
  if "$bins/$t" "corpus/$t" -artifact_prefix="artifacts/$t/" -max_total_time="$secs" \
       -rss_limit_mb=2048 -timeout=5 -print_final_stats=1 >"$log" 2>&1; then
    status=clean
  else
    status=CRASH
  fi
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo 0)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*' || echo 0)
  # Minimize the corpus to the inputs that add coverage (the replay test
  # runs them all on every CI run); prune only past the KEEP guard.
  merged=$(mktemp -d)
  if "$bins/$t" -merge=1 "$merged" "corpus/$t" >/dev/null 2>&1; then
    # Hash-named inputs are the fuzzer's: replaced by the merge's; named
    # seeds stay as they are.
    find "corpus/$t" -maxdepth 1 -regextype egrep -regex '.*/[0-9a-f]{40}' -delete
    cp "$merged"/* "corpus/$t/" 2>/dev/null || true
  fi
  rm -rf "$merged"
  prune "corpus/$t"
  n=$(ls "corpus/$t" | wc -l)
  # What the saved corpus itself reaches: what the CI replay exercises.
  kept=$("$bins/$t" "corpus/$t" -runs=0 2>&1 | grep -o 'DONE *cov: [0-9]*' | grep -o '[0-9]*$' || echo 0)
  crashes=$(ls "artifacts/$t" 2>/dev/null | wc -l)
  if [ "$crashes" -gt 0 ]; then
    mkdir -p "regressions/$t"
    cp "artifacts/$t"/* "regressions/$t/"
  fi
  printf '%-13s %s  %9s execs  cov %5s  corpus %4s (cov %5s, %s)  crashes %s\n' \
    "$t" "$status" "$execs" "$cov" "$n" "$kept" "$(du -sh --apparent-size "corpus/$t" | cut -f1)" "$crashes"
  rm -f "$log"
done
