// Peer: dlib 19.24 (Debian's libdlib-dev) answering one Fashion-MNIST-sized
// image with the MLP of bench_mlp.cpp (784-256-128-10, relu), batch 1, the
// way a dlib user classifies one sample: net(image). Built by bench/ when
// find_package(dlib) succeeds; run by bench/run.sh after ctnn_bench. dlib's fc
// layers call BLAS (Debian: libblas.so, OpenBLAS through alternatives); the
// run sets OPENBLAS_NUM_THREADS=1 and unsets OPENBLAS_CORETYPE like the other peers.
//   build/bench/bench/peer_dlib_mlp --benchmark_min_time=0.3
#include <benchmark/benchmark.h>

#include <dlib/dnn.h>

#include <random>

namespace {

using net_type = dlib::loss_multiclass_log<
    dlib::fc<10, dlib::relu<dlib::fc<128, dlib::relu<dlib::fc<256, dlib::input<dlib::matrix<float>>>>>>>>;

void dlib_infer(benchmark::State& s) {
  net_type net;
  dlib::matrix<float> image(28, 28);
  std::mt19937 g(1);
  std::uniform_real_distribution<float> u(0.f, 1.f);
  for (long r = 0; r < image.nr(); ++r)
    for (long c = 0; c < image.nc(); ++c) image(r, c) = u(g);
  benchmark::DoNotOptimize(net(image));  // the first call allocates and initializes the parameters
  for (auto _ : s) benchmark::DoNotOptimize(net(image));
}

}  // namespace

BENCHMARK(dlib_infer)->Name("peer/dlib/infer/batch:1/threads:1")->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK_MAIN();
