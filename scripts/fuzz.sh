#!/usr/bin/env bash
# Runs ctnn's libFuzzer targets (tests/fuzz), each for a bounded time, starting from the
# seed corpus in tests/fuzz/corpus/<target> and growing a working corpus in
# $CTNN_FUZZ_BUILD/fuzz-corpus/<target> (kept between runs). Needs a build with the
# fuzzers: the 'asan' preset (clang 19 + ASan + UBSan; the default CTNN_FUZZ_BUILD=build/asan)
# or the 'clang' preset (CTNN_FUZZ_BUILD=build/clang):
#   cmake --preset asan && cmake --build --preset asan
#   scripts/fuzz.sh [seconds-per-target] [target...]     (default: 60 s, every target)
# CI runs it with 10 s per target (CTNN_FUZZ_SECONDS); for a long run, e.g. an hour each on 2 cores:
#   scripts/fuzz.sh 3600 idx weights
# A crash, a leak, a sanitizer report or a run past the limits below stops it with the
# reproducer written to $CTNN_FUZZ_BUILD/fuzz-artifacts/<target>/ (replay: $CTNN_FUZZ_BUILD/tests/fuzz/fuzz_<target> FILE).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
shift || true
targets=("$@")
build=${CTNN_FUZZ_BUILD:-build/asan}
# Default: every target the build has (one per tests/fuzz/fuzz_<name>.cpp); fuzz_onnx exists only
# in a build with ctnn::onnx (ONNX and protobuf found), so without it it is left out, saying so.
if ((${#targets[@]} == 0)); then
  for src in tests/fuzz/fuzz_*.cpp; do
    t=${src##*/fuzz_}
    t=${t%.cpp}
    if [[ $t == onnx && ! -x $build/tests/fuzz/fuzz_onnx ]]; then
      echo "fuzz.sh: fuzz_onnx left out: this build has no ctnn::onnx (Debian: libonnx-dev libprotobuf-dev)" >&2
      continue
    fi
    targets+=("$t")
  done
fi
for t in "${targets[@]}"; do
  bin=$build/tests/fuzz/fuzz_$t
  [[ -x $bin ]] || { echo "fuzz.sh: $bin is missing (cmake --preset asan && cmake --build --preset asan)" >&2; exit 2; }
done

# One target: fuzz for `seconds`, print its summary, fail with the reproducer's place.
fuzz_one() {
  local t=$1 bin=$build/tests/fuzz/fuzz_$1
  local work=$build/fuzz-corpus/$t art=$build/fuzz-artifacts/$t/
  local log=$build/fuzz-artifacts/$t.log rc=0
  mkdir -p "$work" "$art"
  # -rss_limit_mb: a reader that allocates what a small file announces (a gzip bomb, a huge header) fails here.
  "$bin" -max_total_time="$seconds" -rss_limit_mb=1024 -malloc_limit_mb=1024 -timeout=10 -print_final_stats=1 \
    -artifact_prefix="$art" "$work" "tests/fuzz/corpus/$t" >"$log" 2>&1 || rc=$?
  local summary
  summary=$(grep -E "^stat::number_of_executed_units|^SUMMARY|ERROR|^Done" "$log" || true)
  printf 'fuzz.sh: fuzz_%s, %s s:\n%s\n' "$t" "$seconds" "$summary"  # one write: parallel targets do not interleave
  if ((rc != 0)); then
    tail -n 60 "$log" >&2
    echo "fuzz.sh: fuzz_$t failed (exit $rc); reproducer in $art, log $log" >&2
    return 1
  fi
}

# As many targets at a time as there are cores (CTNN_FUZZ_JOBS overrides); each fuzzer is one process.
jobs=${CTNN_FUZZ_JOBS:-$(nproc 2>/dev/null || echo 1)}
((jobs >= 1)) || jobs=1
echo "fuzz.sh: ${#targets[@]} targets, ${seconds} s each, ${jobs} at a time"
failed=0
running=0
for t in "${targets[@]}"; do
  if ((running >= jobs)); then
    wait -n || failed=1
    running=$((running - 1))
  fi
  fuzz_one "$t" &
  running=$((running + 1))
done
while ((running > 0)); do
  wait -n || failed=1
  running=$((running - 1))
done
exit "$failed"
