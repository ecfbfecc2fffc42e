#!/usr/bin/env bash
# Issue 25's table in one command: ctnn against PyTorch 2.x (PyPI) on the MLP,
# the CNN and batch-1 inference, each figure also read against the FMA peak
# measured in the same run, for cpu<fma3<avx2>> and cpu<avx512bw>.
#
#   bench/peers/compare.sh [-r ROUNDS] [-a ARCHS] [-o OUT] [-B] [-T]
#
# Python of the peer: $PEER_PYTHON, else build/peers-venv/bin/python (made by
# bench/peers/setup.sh) when it exists, else Debian's /usr/bin/python3.
# Builds ctnn_bench and bench_cnn per architecture in OUT/build-ARCH (default
# OUT build/peers-compare; Release, -O3 -march=M -DNDEBUG, tests, examples and
# CUDA off, ccache, nice -n 19, -j2; -B reuses them) as scripts/bench-compare.sh:
#   avx2    -march=x86-64-v3  -> cpu<fma3<avx2>>  (PyTorch limited to AVX2 too:
#           ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2 MKL_ENABLE_INSTRUCTIONS=AVX2)
#   avx512  -march=native     -> cpu<avx512bw>    (only when the CPU has avx512bw)
# Then ROUNDS rounds (default 3), per architecture ctnn then PyTorch (A B A B):
#   one thread (taskset -c 0, CTNN_NUM_THREADS=1): peak/fma, mlp/train_step at
#   batch 16/64/256, mlp/epoch (fit) at 64/256, mlp/infer, cnn_train_step;
#   two threads (CTNN_NUM_THREADS=2): the same at 2; PyTorch: torch_mlp.py and
#   cnn_torch.py at --threads 1 (pinned alike) and 2.
# The 1-minute load average is logged before every run (with the CPU count in
# OUT/runs/cpus: the report calls a run above it loaded). -T only prints the
# table of OUT/runs (bench/report.py compare); a new run moves an old
# OUT/runs aside. 3 rounds of both took 17 minutes under load 2-8 (2026-12-03,
# 2 cores; PyTorch's two-thread runs suffer most); quiet, about 8 expected.
set -euo pipefail

rounds=3
archs=
out=build/peers-compare
build=1
table_only=0
usage() { sed -n 6p "$0" | sed 's/^# *//' >&2; exit 2; }
while getopts "r:a:o:BT" opt; do
  case $opt in
    r) rounds=$OPTARG ;;
    a) archs=$OPTARG ;;
    o) out=$OPTARG ;;
    B) build=0 ;;
    T) table_only=1 ;;
    *) usage ;;
  esac
done
shift $((OPTIND - 1))
[ $# -eq 0 ] || usage

here=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$out"
out=$(cd "$out" && pwd)
runs=$out/runs
if [ $table_only = 1 ]; then exec python3 "$here/bench/report.py" compare "$runs"; fi

py=${PEER_PYTHON:-}
if [ -z "$py" ]; then
  py=/usr/bin/python3
  [ -x "$here/build/peers-venv/bin/python" ] && py=$here/build/peers-venv/bin/python
fi
"$py" -c 'import torch, numpy' 2> /dev/null || {
  echo "$0: $py cannot import torch and numpy: run bench/peers/setup.sh or set PEER_PYTHON" >&2
  exit 1
}

if [ -z "$archs" ]; then
  archs=avx2
  grep -qw avx512bw /proc/cpuinfo && archs="avx2 avx512"
fi
march_of() { case $1 in avx2) echo x86-64-v3 ;; avx512) echo native ;; *) echo "$0: unknown arch $1" >&2; exit 2 ;; esac; }
# The peer limited to the same instruction set (its own dispatch, oneDNN, MKL).
isa_env() { [ "$1" = avx2 ] && echo "ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2 MKL_ENABLE_INSTRUCTIONS=AVX2"; true; }

echo "ctnn: $here ($(git -C "$here" rev-parse --short HEAD)$(git -C "$here" diff --quiet HEAD -- include bench || echo +dirty))"
echo "cpu: $(lscpu | sed -n 's/^Model name: *//p' | head -n 1) (family $(lscpu | sed -n 's/^CPU family: *//p'), model $(lscpu | sed -n 's/^Model: *//p')), $(nproc) cores; $(g++ --version | head -n 1)"
echo "peer: $("$py" "$here/bench/peers/torch_env.py" 2> /dev/null || "$py" -c 'import torch; print(torch.__version__)')"

probe=$out/arch_probe.cpp
printf '#include <xsimd/xsimd.hpp>\n#include <cstdio>\nint main() { std::puts(xsimd::default_arch::name()); }\n' > "$probe"
for a in $archs; do
  g++ -std=c++20 -O1 -march="$(march_of "$a")" "$probe" -o "$out/arch_probe_$a"
  echo "arch $a: -march=$(march_of "$a") -> xsimd default_arch $("$out/arch_probe_$a")"
  if [ $build = 1 ]; then
    dir=$out/build-$a
    cmake -S "$here" -B "$dir" -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_CXX_FLAGS_RELEASE="-O3 -march=$(march_of "$a") -DNDEBUG" \
      -DCTNN_BUILD_BENCHMARKS=ON -DCTNN_BUILD_TESTS=OFF -DCTNN_BUILD_EXAMPLES=OFF -DCTNN_CUDA=OFF \
      -DCMAKE_CXX_COMPILER_LAUNCHER=ccache > "$dir.configure.log"
    nice -n 19 cmake --build "$dir" -j2 --target ctnn_bench bench_cnn > "$dir.build.log"
    echo "built $dir"
  fi
  for prog in ctnn_bench bench_cnn; do
    [ -x "$out/build-$a/bench/$prog" ] || { echo "$0: no $out/build-$a/bench/$prog (run without -B)" >&2; exit 1; }
  done
done

[ -d "$runs" ] && mv "$runs" "$runs.$(date -u -r "$runs" +%Y%m%dT%H%M%S)"
mkdir -p "$runs"
nproc > "$runs/cpus"  # report.py calls a load average above this "loaded"
peer() { env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE "$@"; }
load() { echo "$1 $(cut -d' ' -f1 /proc/loadavg)" >> "$runs/load"; }
ctnn() {  # ROUND ARCH THREADS
  local bin=$out/build-$2/bench pin=() t=$3
  [ "$t" = 1 ] && pin=(taskset -c 0)
  load "$2"
  peer CTNN_NUM_THREADS="$t" "${pin[@]}" "$bin/ctnn_bench" --benchmark_min_time=0.3 \
    --benchmark_filter="^(peak/fma(_independent)?/$t/|mlp/train_step/batch:(16|64|256)/threads:$t/|mlp/epoch/batch:(64|256)/threads:$t/|mlp/infer/batch:1/threads:$t/)" \
    --benchmark_out="$runs/$1-$2-ctnn-$t.json" --benchmark_out_format=json > /dev/null 2>> "$runs/stderr"
  load "$2"
  peer CTNN_NUM_THREADS="$t" "${pin[@]}" "$bin/bench_cnn" --benchmark_filter='^cnn_train_step' \
    --benchmark_out="$runs/$1-$2-cnn-$t.json" --benchmark_out_format=json > /dev/null 2>> "$runs/stderr"
}
torch() {  # ROUND ARCH THREADS
  local pin=() t=$3
  [ "$t" = 1 ] && pin=(taskset -c 0)
  load "$2"
  # shellcheck disable=SC2046  # isa_env is a list of NAME=VALUE words
  peer OPENBLAS_NUM_THREADS="$t" $(isa_env "$2") "${pin[@]}" "$py" "$here/bench/peers/torch_mlp.py" \
    --threads "$t" --batches 64,256 > "$runs/$1-$2-torch-$t.txt" 2>> "$runs/stderr"
  load "$2"
  # shellcheck disable=SC2046
  peer OPENBLAS_NUM_THREADS="$t" MALLOC_MMAP_THRESHOLD_=33554432 MALLOC_TRIM_THRESHOLD_=4294967296 $(isa_env "$2") \
    "${pin[@]}" "$py" "$here/bench/peers/cnn_torch.py" --threads "$t" --steps 50 --repeats 3 \
    > "$runs/$1-$2-tcnn-$t.txt" 2>> "$runs/stderr"
}
echo "start $(date -u +%FT%TZ), $rounds rounds, archs: $archs"
for ((r = 1; r <= rounds; r++)); do
  for a in $archs; do
    for t in 1 2; do
      ctnn "$r" "$a" "$t"
      torch "$r" "$a" "$t"
    done
  done
  echo "round $r done $(date -u +%TZ), load $(cut -d' ' -f1-3 /proc/loadavg)"
done
echo "end $(date -u +%FT%TZ)"
python3 "$here/bench/report.py" compare "$runs" | tee "$out/report.md"
