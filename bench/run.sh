#!/bin/sh
# Runs the benchmark suite and its PyTorch peer back to back and prints the
# tables of docs/performance.md. OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE are
# unset for the whole run (the peers need their own kernels for this CPU).
#   cmake --preset bench && cmake --build --preset bench -j2 && bench/run.sh [outdir]
# The peer's Python: $PEER_PYTHON, else build/peers-venv/bin/python (PyTorch
# 2.x from PyPI, made by bench/peers/setup.sh) when it exists, else Debian's
# /usr/bin/python3 (python3-torch 1.13). Issue 25's table for both
# architectures, in alternating rounds: bench/peers/compare.sh.
set -eu
out=${1:-build/bench/results}
mkdir -p "$out"
py=${PEER_PYTHON:-}
if [ -z "$py" ]; then
  py=/usr/bin/python3
  [ -x build/peers-venv/bin/python ] && py=build/peers-venv/bin/python
fi
echo "bench/run.sh: peer python $py" | tee "$out/peer.txt"
peer() { env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE "$@"; }
# Five repetitions of every benchmark in random interleaved order; the
# report uses the medians (single runs on a shared 2-core machine swing by
# 10-15 %).
peer ./build/bench/bench/ctnn_bench --benchmark_min_time=0.2 --benchmark_repetitions=5 \
  --benchmark_enable_random_interleaving=true --benchmark_report_aggregates_only=true \
  --benchmark_out="$out/bench.json" --benchmark_out_format=json | tee "$out/bench.txt"
peer OPENBLAS_NUM_THREADS=1 "$py" bench/peers/torch_mlp.py --threads 1 | tee "$out/torch1.txt"
peer OPENBLAS_NUM_THREADS=2 "$py" bench/peers/torch_mlp.py --threads 1 --batches 256 | tee "$out/torch2a.txt"
peer OPENBLAS_NUM_THREADS=2 "$py" bench/peers/torch_mlp.py --threads 2 --batches 256 | tee "$out/torch2b.txt"
if [ -x ./build/bench/bench/peer_dlib_mlp ]; then
  peer OPENBLAS_NUM_THREADS=1 ./build/bench/bench/peer_dlib_mlp --benchmark_min_time=0.3 \
    --benchmark_out="$out/dlib.json" --benchmark_out_format=json | tee "$out/dlib.txt"
else
  echo "bench/run.sh: peer_dlib_mlp not built (apt-get install libdlib-dev, then cmake --preset bench)" >&2
fi
cnn=""
if [ -x ./build/bench/bench/bench_cnn ]; then  # the CNN and its peer, each thread count back to back
  for t in 1 2; do
    peer CTNN_NUM_THREADS=$t ./build/bench/bench/bench_cnn --benchmark_out="$out/cnn$t.json" \
      --benchmark_out_format=json | tee "$out/cnn$t.txt"
    peer MALLOC_MMAP_THRESHOLD_=33554432 MALLOC_TRIM_THRESHOLD_=4294967296 "$py" bench/peers/cnn_torch.py \
      --threads $t --steps 50 | tee "$out/tcnn$t.txt"
  done
  cnn="--cnn $out/cnn1.json $out/tcnn1.txt $out/cnn2.json $out/tcnn2.txt"
fi
dl=""; [ -f "$out/dlib.json" ] && dl="--dlib $out/dlib.json"
# shellcheck disable=SC2086  # $dl and $cnn are lists of words
python3 bench/report.py "$out/bench.json" "$out/torch1.txt" "$out/torch2a.txt" "$out/torch2b.txt" $dl $cnn | tee "$out/report.md"
