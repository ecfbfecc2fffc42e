#!/usr/bin/env bash
# scripts/device-check.sh — the CUDA backend on a machine with an NVIDIA GPU.
#
# For a machine with nvcc, a C++20 host compiler and PyTorch but none of
# ctnn's Debian packages and no network. Beforehand, on the Debian machine:
#   scripts/device-deps.sh        # headers, libz.a, Fashion-MNIST -> build/device-deps
# then carry build/device-deps to the GPU machine with the working tree and run
#   scripts/device-check.sh       # figures -> $OUT/device-figures.txt (OUT defaults to build/device-out)
# It builds tests/cuda and bench/cuda with nvcc directly (no CMake, so no
# find_package of packages that are not there), runs every CUDA test (every
# tests/cuda/test_*.cu, the CPU-vs-CUDA parity test over every layer type and policy
# with tests/parity/parity.hpp and distributed::nccl's where NCCL is found included;
# a file that fails to build is reported and left out, the others run), then
# bench_cuda and the PyTorch peer bench/peers/torch_cuda.py, and writes every
# figure, the test summary and the ratios of ctnn to its peers to ONE file.
# Each stage has a time limit (build 200 s, tests 100 s, bench 90 s, peer 90 s:
# 480 s at worst), so the whole run stays within 8 minutes.
# Modes: `scripts/device-check.sh build` builds only (on a machine with nvcc and no GPU:
# build/device/test_cuda and bench_cuda, for sm_90 unless CTNN_CUDA_ARCH says otherwise);
# `scripts/device-check.sh run` runs those prebuilt programs when they load there (ldd finds
# every library, /usr/local/cuda/lib64 added) and builds them first otherwise; no argument
# (or `all`) builds, then runs. Building ahead saves the GPU machine's time.
# Environment: CTNN_CUDA_ARCH (default: the device's, else 90), NVCC, CTNN_DEVICE_DEPS, OUT, CTNN_COMMIT,
# CTNN_DEVICE_BUILD_TIMEOUT (seconds per nvcc process, default 200).
set -uo pipefail
mode=${1:-all}
[[ $mode == all || $mode == build || $mode == run ]] || { echo "usage: $0 [all|build|run]" >&2; exit 2; }
cd "$(dirname "$0")/.."
root=$(pwd)
deps=${CTNN_DEVICE_DEPS:-build/device-deps}
out=${OUT:-build/device-out}
mkdir -p "$out" build/device
fig="$out/device-figures.txt"
: >"$fig"
t_start=$(date +%s)
# the tree's commit (-dirty: the tree differs from it); CTNN_COMMIT names it where the copy's git
# metadata is not the tree's own (a device tool that copies the working tree)
commit=${CTNN_COMMIT:-$(git describe --always --dirty 2>/dev/null || echo unknown)}
note() { echo "$*" | tee -a "$fig"; }
elapsed() { echo $(($(date +%s) - t_start)); }

[[ -d $deps/include/xtensor ]] || { note "device-check: $deps is missing: run scripts/device-deps.sh first"; exit 1; }
nvcc=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
arch=${CTNN_CUDA_ARCH:-$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n1 | tr -d '.')}
arch=${arch:-90}
note "# ctnn device check, $(date -u +%Y-%m-%dT%H:%M:%SZ), commit $commit"
note "# gpu: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -n1)"
note "# nvcc: $("$nvcc" --version | tail -n1); host compiler: $(c++ --version 2>/dev/null | head -n1); sm_$arch"
note "# cpu: $(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -n1), $(nproc) cores"

flags=(-std=c++20 -O3 -DNDEBUG "-arch=sm_$arch" --expt-relaxed-constexpr -diag-suppress=1675,186
       -Iinclude "-I$deps/include" -Itests)
libs=(-lcublasLt -lcudart "$deps/lib/libz.a" -lpthread)
# relative to the repository root, where the tests run, so that a build made on another
# machine finds the files in the copy of the tree there
fm="$deps/fashion-mnist"
b=build/device
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
# a GPU machine's image may hold NCCL (or cuBLASLt) only in Python's nvidia-* packages
for lib in libnccl.so.2 libcublasLt.so.13; do
  if ! ldconfig -p 2>/dev/null | grep -q "$lib" && [[ ! -e /usr/local/cuda/lib64/$lib ]]; then
    found=$(find /usr/local /opt /usr/lib -name "$lib" 2>/dev/null | head -n1)
    [[ -n $found ]] && export LD_LIBRARY_PATH=$(dirname "$found"):$LD_LIBRARY_PATH
  fi
done
need_build=1
if [[ $mode == run && -x $b/test_cuda && -x $b/bench_cuda ]]; then
  if ldd $b/test_cuda $b/bench_cuda | grep -q "not found"; then
    note "build: the prebuilt programs do not load here ($(ldd $b/test_cuda | grep 'not found' | head -n2 | tr '\n' ' ')): building"
  else
    need_build=0
    note "build: prebuilt build/device/test_cuda and bench_cuda ($(cat $b/built-at 2>/dev/null || echo 'origin unknown'))"
  fi
fi

# ---- build: ten nvcc processes in parallel (old outputs removed first, so a failed build runs nothing stale) ----
build() {
rm -f $b/*.o $b/test_cuda $b/bench_cuda
bt=${CTNN_DEVICE_BUILD_TIMEOUT:-200}
timeout $bt "$nvcc" "${flags[@]}" -c tests/main.cpp -o $b/main.o >$b/main.log 2>&1 &
p1=$!
# every tests/cuda/test_*.cu, one nvcc each, in parallel; distributed::nccl's test where NCCL is there
nccl_flags=()
nccl_libs=()
for d in /usr/local/cuda/lib /usr/local/cuda/lib64 /usr/lib/x86_64-linux-gnu; do
  if [[ -e $d/libnccl.so && -f /usr/local/cuda/include/nccl.h ]]; then
    nccl_flags=(-DCTNN_TEST_NCCL)
    nccl_libs=("-L$d" -lnccl)
    break
  fi
done
if ((!${#nccl_libs[@]})); then  # else Python's nvidia-nccl package (PyTorch's), which has no unversioned libnccl.so
  pd=$(${PYTHON:-python3} -c 'import nvidia.nccl as n; print(list(n.__path__)[0])' 2>/dev/null)
  if [[ -n $pd && -f $pd/include/nccl.h && -e $pd/lib/libnccl.so.2 ]]; then
    nccl_flags=(-DCTNN_TEST_NCCL "-I$pd/include")
    nccl_libs=(-Xlinker "$pd/lib/libnccl.so.2" -Xlinker -rpath -Xlinker "$pd/lib")  # nvcc takes no .so.2 input
    note "build: NCCL from Python's nvidia-nccl package ($pd)"
  fi
fi
((${#nccl_libs[@]})) || note "build: NCCL not found: tests/cuda/test_nccl.cu compiles to nothing"
names=()
pids=()
for f in tests/cuda/test_*.cu; do
  n=$(basename "$f" .cu)
  timeout $bt "$nvcc" "${flags[@]}" "${nccl_flags[@]}" "-DCTNN_FASHION_MNIST_DIR=\"$fm\"" -c "$f" -o "$b/$n.o" \
    >"$b/$n.log" 2>&1 &
  names+=("$n")
  pids+=($!)
done
timeout $bt "$nvcc" "${flags[@]}" bench/cuda/bench_cuda.cu -o $b/bench_cuda "${libs[@]}" >$b/bench.log 2>&1 &
p4=$!
build_ok=1
wait $p1 || build_ok=0
wait $p4 || note "build: bench/cuda/bench_cuda.cu FAILED to build"
objs=()
for k in "${!names[@]}"; do
  if wait "${pids[$k]}"; then
    objs+=("$b/${names[$k]}.o")
  else
    note "build: tests/cuda/${names[$k]}.cu FAILED to build; the other tests run"
  fi
done
((${#objs[@]})) || build_ok=0
cat $b/*.log >"$out/build.log"
if ((build_ok)) && "$nvcc" "${flags[@]}" $b/main.o "${objs[@]}" -o $b/test_cuda "${libs[@]}" "${nccl_libs[@]}" \
  >>"$out/build.log" 2>&1; then
  note "build: ok ($(elapsed) s; ${#objs[@]} of ${#names[@]} test files)"
else
  note "build: FAILED ($(elapsed) s); the errors are in $out/build.log:"
  grep -m 20 -E "error" "$out/build.log" | tee -a "$fig"
fi
echo "built $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname), commit $commit, sm_$arch" >$b/built-at
}
((need_build)) && build
[[ $mode == build ]] && { note "total: $(elapsed) s (build only)"; exit 0; }

# ---- tests ----
if [[ -x $b/test_cuda ]]; then
  timeout 100 $b/test_cuda --duration=true >"$out/test_cuda.txt" 2>&1
  rc=$?
  note "tests: exit $rc; $(grep -E '^\[doctest\] (test cases|assertions)' "$out/test_cuda.txt" | tr '\n' ' ')"
  skips=$(grep -c "CTNN_SKIP" "$out/test_cuda.txt")
  ((skips)) && note "tests: $skips test cases SKIPPED: $(grep -m1 -o 'CTNN_SKIP: .*' "$out/test_cuda.txt")"
  grep -E "MESSAGE|ERROR|CHECK|REQUIRE|relative error|device MLP" "$out/test_cuda.txt" | grep -v CTNN_SKIP |
    head -n 60 >>"$fig"
fi

# ---- benchmarks: ctnn, then the PyTorch peer ----
if [[ -x $b/bench_cuda ]]; then
  timeout 90 $b/bench_cuda all 2>&1 | tee -a "$fig"
  note "bench_cuda: done ($(elapsed) s)"
fi
py=${PYTHON:-$(command -v python3 || command -v python)}
if [[ -n $py ]] && timeout 90 "$py" bench/peers/torch_cuda.py all 2>&1 | tee -a "$fig"; then
  note "torch peer: done ($(elapsed) s)"
else
  note "torch peer: failed or missing ($(elapsed) s)"
fi

# ---- ratios, each from figures of this run ----
"${py:-python3}" - "$fig" <<'PY' 2>&1 | tee -a "$fig.ratios"
import sys
v = {}
for line in open(sys.argv[1]):
    p = line.split()
    if len(p) == 3 and not line.startswith("#"):
        try:
            v[p[0]] = float(p[1])
        except ValueError:
            pass
def ratio(label, a, b):
    if a in v and b in v and v[b] > 0:
        print(f"ratio {label} {v[a] / v[b]:.3f}")
for net in ("mlp", "cnn"):
    for batch in (256, 8192):
        c = f"train_{net}_float32_batch{batch}_samples_per_s"
        ratio(f"ctnn_float32/torch_autocast_{net}_batch{batch}", c, f"torch_train_{net}_autocast_batch{batch}_samples_per_s")
        ratio(f"ctnn_float32/torch_float32_{net}_batch{batch}", c, f"torch_train_{net}_float32_batch{batch}_samples_per_s")
        ratio(f"torch_autocast/torch_float32_{net}_batch{batch}", f"torch_train_{net}_autocast_batch{batch}_samples_per_s",
              f"torch_train_{net}_float32_batch{batch}_samples_per_s")
for net in ("mlp", "cnn"):
    for p in ("mixed_float16", "mixed_bfloat16"):
        ratio(f"ctnn_{p}/ctnn_float32_{net}_batch8192", f"train_{net}_{p}_batch8192_samples_per_s",
              f"train_{net}_float32_batch8192_samples_per_s")
        ratio(f"ctnn_{p}/torch_autocast_{net}_batch8192", f"train_{net}_{p}_batch8192_samples_per_s",
              f"torch_train_{net}_autocast_batch8192_samples_per_s")
ratio("ctnn_graph/ctnn_nograph_mlp_batch256", "train_mlp_float32_batch256_samples_per_s",
      "train_mlp_float32_batch256_nograph_samples_per_s")
ratio("torch_latency/ctnn_latency_mlp_batch1", "torch_infer_mlp_batch1_latency", "infer_mlp_batch1_latency")
ratio("torch_latency/ctnn_graph_latency_mlp_batch1", "torch_infer_mlp_batch1_latency", "infer_mlp_batch1_graph_latency")
for t in ("float", "half", "bfloat16"):
    for shape in ("256x784x256", "256x256x128", "8192x784x256", "8192x256x128", "4096x4096x4096"):
        k = f"gemm_{t}_{shape}_ratio"
        if k in v:
            print(f"ratio ctnn_gemm/cublaslt_{t}_{shape} {v[k]:.3f}")
PY
cat "$fig.ratios" >>"$fig" 2>/dev/null && rm -f "$fig.ratios"
note "total: $(elapsed) s"
