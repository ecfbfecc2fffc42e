#!/usr/bin/env bash
# ctnn quick start: installs what this Debian machine lacks, configures and
# builds the release preset, then runs the Fashion-MNIST demo or the whole
# test suite.
#   scripts/quickstart.sh demo [epochs]   train and evaluate the MLP on Fashion-MNIST, then plot
#                                         its curves to build/release/mlp_history.png
#   scripts/quickstart.sh test            build and run every test; then the suite under ASan +
#                                         UBSan (built for AVX2 on an AVX-512 CPU), a short fuzzing
#                                         run, and the threaded data and train tests under ThreadSanitizer
#                                         (what CI runs)
set -euo pipefail
cd "$(dirname "$0")/.."

mode=${1:-}
case "$mode" in
  demo | test) ;;
  *) echo "usage: $0 demo [epochs] | test" >&2; exit 2 ;;
esac

packages=(cmake g++ make libxtensor-dev libxsimd-dev doctest-dev libbenchmark-dev zlib1g-dev nlohmann-json3-dev
          dataset-fashion-mnist gnuplot-nox)
# The test command also builds with clang 19 and its libFuzzer/sanitizer runtimes, and
# llvm-19 brings llvm-symbolizer-19, which names the source lines in ASan's stack traces.
[[ $mode == test ]] && packages+=(clang-19 libclang-rt-19-dev llvm-19)
# The optional ONNX component (ctnn::onnx) and its tests.
[[ $mode == test ]] && packages+=(libonnx-dev libprotobuf-dev)
# The optional MPI component (ctnn::mpi) and its tests, which mpirun starts (docs/distributed.md).
[[ $mode == test ]] && packages+=(libopenmpi-dev openmpi-bin)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  if [[ $(id -u) -eq 0 ]]; then
    echo "quickstart: installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q
    apt-get install -y -q --no-install-recommends "${missing[@]}"
  elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
    echo "quickstart: installing ${missing[*]} (sudo)"
    sudo DEBIAN_FRONTEND=noninteractive apt-get update -q
    sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
  else
    echo "quickstart: these Debian packages are missing: ${missing[*]}" >&2
    echo "quickstart: run as root, or install them first: sudo apt-get install ${missing[*]}" >&2
    exit 1
  fi
fi

# onnxruntime runs the exported ONNX models in tests/onnx, and its quantize_static (which needs the onnx
# package) makes the int8 graphs test_onnx_ort_qdq imports (they report themselves skipped without them).
if [[ $mode == test ]] && ! python3 -c 'import onnxruntime, onnx, numpy' 2>/dev/null; then
  python3 -m pip install -q onnxruntime onnx || echo "quickstart: onnxruntime or onnx not installed: the ONNX runtime tests will be skipped"
fi

jobs=$(nproc 2>/dev/null || echo 2)
cmake --preset release
cmake --build --preset release -j "$jobs"

if [[ $mode == demo ]]; then
  # The demo writes its history (csv_logger) and plots the training curves (gnuplot).
  ./build/release/examples/fashion_mnist_mlp "${2:-15}" "" build/release/mlp_history.csv
  exec scripts/plot_history.sh build/release/mlp_history.csv build/release/mlp_history.png \
    "Fashion-MNIST MLP (dense 256-128-10, Adam)"
else
  ctest --preset release -j "$jobs"
  # The whole suite but the demo built by clang 19 under AddressSanitizer + UndefinedBehaviorSanitizer,
  # with the libFuzzer targets replaying their seed corpora; then a short bounded fuzzing run of
  # each target (docs/fuzzing.md has the long-run command). On an AVX-512 CPU it is built for
  # x86-64-v3 (asan-avx2): the suite then also runs the code an AVX2-only CPU runs, the release
  # suite above having run the AVX-512 code (and its kernel tests fma3<avx2>, avx2 and sse2).
  asan=asan
  grep -qw avx512f /proc/cpuinfo 2>/dev/null && asan=asan-avx2
  cmake --preset "$asan"
  cmake --build --preset "$asan" -j "$jobs"
  ctest --preset "$asan" -j "$jobs"
  scripts/fuzz.sh "${CTNN_FUZZ_SECONDS:-10}"
  # The threaded input pipeline and training step under ThreadSanitizer (the data and train
  # test files that run threads of their own).
  cmake --preset tsan
  cmake --build --preset tsan -j "$jobs"
  exec ctest --preset tsan -j "$jobs"
fi
