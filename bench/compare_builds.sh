#!/bin/sh
# Runs the MLP and CNN training benchmarks of two bench builds alternately
# (A B A B ...) and prints, per benchmark, the median of each build and the
# ratio B / A (samples per second: above 1 means B is faster). For before /
# after comparisons on a shared machine, where single runs swing by 10-15 %.
#   bench/compare_builds.sh BUILD_A BUILD_B [rounds=5] [outdir=build/compare]
# BUILD_x is a bench preset's build directory (with bench/ctnn_bench and bench/bench_cnn).
set -eu
a=$1
b=$2
rounds=${3:-5}
out=${4:-build/compare}
mkdir -p "$out"
filter='mlp/(train_step|epoch)/batch:(16|64|256)/threads:1/'
i=0
while [ "$i" -lt "$rounds" ]; do
  for side in a b; do
    dir=$a
    [ "$side" = b ] && dir=$b
    "$dir/bench/ctnn_bench" --benchmark_filter="$filter" --benchmark_min_time=0.5 \
      --benchmark_out="$out/mlp-$side-$i.json" --benchmark_out_format=json > /dev/null
    CTNN_NUM_THREADS=1 "$dir/bench/bench_cnn" --benchmark_min_time=2 \
      --benchmark_out="$out/cnn-$side-$i.json" --benchmark_out_format=json > /dev/null
  done
  i=$((i + 1))
done
python3 - "$out" "$rounds" <<'PY'
import json, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
def rates(side):
    r = {}
    for i in range(rounds):
        for kind in ("mlp", "cnn"):
            for bm in json.load(open(f"{out}/{kind}-{side}-{i}.json"))["benchmarks"]:
                v = bm.get("samples/s") or bm.get("samples_per_s")
                r.setdefault(bm["name"].replace("/real_time", "").replace("/iterations:1", ""), []).append(v)
    return r
A, B = rates("a"), rates("b")
print(f"| benchmark | A samples/s (median of {rounds}) | B samples/s | B / A | B / A per round |")
print("| --- | --- | --- | --- | --- |")
for k in A:
    ma, mb = statistics.median(A[k]), statistics.median(B[k])
    per = ", ".join(f"{y / x:.3f}" for x, y in zip(A[k], B[k]))
    print(f"| {k} | {ma:,.0f} | {mb:,.0f} | {mb / ma:.3f} | {per} |")
PY
