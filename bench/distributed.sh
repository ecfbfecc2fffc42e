#!/bin/sh
# bench/distributed.sh [-r ROUNDS] [-b BUILD] [-o DIR]: issue 26's side-by-side figures on one host:
# 1 process x 2 threads against 2 processes x 1 thread (mpirun -np 2 --bind-to core), the
# MLP and CNN training steps of bench_distributed (same global batch), alternating ROUNDS times
# (default 3); JSON per run in DIR, then a table of medians (samples/s, the all-reduce's share).
# Needs the bench preset built with MPI: cmake --preset bench && cmake --build build/bench.
set -e
rounds=3
build=build/bench
out=bench-distributed-$(date +%Y%m%d-%H%M%S)
while getopts r:b:o: f; do
  case $f in
    r) rounds=$OPTARG ;;
    b) build=$OPTARG ;;
    o) out=$OPTARG ;;
    *) echo "usage: $0 [-r rounds] [-b build] [-o dir]" >&2; exit 2 ;;
  esac
done
prog=$build/bench/bench_distributed
[ -x "$prog" ] || { echo "$0: $prog not built (cmake --preset bench with libopenmpi-dev installed)" >&2; exit 1; }
mkdir -p "$out"
lscpu | grep -E "Model name|^CPU\(s\)" > "$out/cpu.txt"
i=1
while [ "$i" -le "$rounds" ]; do
  taskset -c 0,1 "$prog" --benchmark_filter='threads:2' --benchmark_out="$out/one-x2-$i.json" \
    --benchmark_out_format=json > /dev/null
  mpirun -np 2 --bind-to core --allow-run-as-root "$prog" --benchmark_filter='threads:1|all_reduce' \
    --benchmark_out="$out/two-x1-$i.json" --benchmark_out_format=json > /dev/null
  i=$((i + 1))
done
python3 - "$out" <<'PY'
import glob, json, statistics, sys
out = sys.argv[1]
rows = {}
for f in sorted(glob.glob(out + "/*.json")):
    kind = "2 processes x 1 thread" if "/two-" in f else "1 process x 2 threads"
    for b in json.load(open(f))["benchmarks"]:
        if "all_reduce" in b["name"]:
            rows.setdefault((b["name"].split("/iter")[0], "2 processes: one all-reduce"), []).append(
                (b["bytes/s"], b["real_time"]))
            continue
        name = b["name"].split("/threads")[0]
        rows.setdefault((name, kind), []).append((b["samples/s"], b["allreduce_share"]))
print("| step (global batch) | run | samples/s (median) | all-reduce share |")
print("| --- | --- | --- | --- |")
for (name, kind), v in sorted(rows.items()):
    if "all_reduce" in name:
        print(f"| {name} | {kind} | {statistics.median(x for x, _ in v) / 1e9:.2f} GB/s | {statistics.median(s for _, s in v):.1f} us |")
        continue
    print(f"| {name} | {kind} | {statistics.median(x for x, _ in v):,.0f} | {statistics.median(s for _, s in v):.1%} |")
PY
