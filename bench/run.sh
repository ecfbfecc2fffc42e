#!/bin/sh
# Runs the benchmark suite and its PyTorch peer back to back and prints the
# tables of docs/performance.md. OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE are
# unset for the whole run (the peers need their own kernels for this CPU).
#   cmake --preset bench && cmake --build --preset bench -j2 && bench/run.sh [outdir]
set -eu
out=${1:-build/bench/results}
mkdir -p "$out"
peer() { env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE "$@"; }
# Five repetitions of every benchmark in random interleaved order; the
# report uses the medians (single runs on a shared 2-core machine swing by
# 10-15 %).
peer ./build/bench/bench/ctnn_bench --benchmark_min_time=0.2 --benchmark_repetitions=5 \
  --benchmark_enable_random_interleaving=true --benchmark_report_aggregates_only=true \
  --benchmark_out="$out/bench.json" --benchmark_out_format=json | tee "$out/bench.txt"
peer OPENBLAS_NUM_THREADS=1 /usr/bin/python3 bench/peers/torch_mlp.py --threads 1 | tee "$out/torch1.txt"
peer OPENBLAS_NUM_THREADS=2 /usr/bin/python3 bench/peers/torch_mlp.py --threads 1 --batches 256 | tee "$out/torch2a.txt"
peer OPENBLAS_NUM_THREADS=2 /usr/bin/python3 bench/peers/torch_mlp.py --threads 2 --batches 256 | tee "$out/torch2b.txt"
if [ -x ./build/bench/bench/peer_dlib_mlp ]; then
  peer OPENBLAS_NUM_THREADS=1 ./build/bench/bench/peer_dlib_mlp --benchmark_min_time=0.3 \
    --benchmark_out="$out/dlib.json" --benchmark_out_format=json | tee "$out/dlib.txt"
else
  echo "bench/run.sh: peer_dlib_mlp not built (apt-get install libdlib-dev, then cmake --preset bench)" >&2
fi
dl=""; [ -f "$out/dlib.json" ] && dl="--dlib $out/dlib.json"
python3 bench/report.py "$out/bench.json" "$out/torch1.txt" "$out/torch2a.txt" "$out/torch2b.txt" $dl | tee "$out/report.md"
