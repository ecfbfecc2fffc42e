// Training throughput (samples/s) of the Fashion-MNIST CNN of
// examples/fashion_mnist_cnn.cpp: one step = forward in training mode, loss,
// backward, regularization gradients and one adam update, on a fixed batch
// of synthetic 28x28 images (the data does not change the work). ctnn runs on
// one thread. Peer: bench/peers/cnn_torch.py (same network, batch, optimizer).
// conv2/...: the second convolution's kernels alone (13x13x32 -> 11x11x64, batch 64, float, the
// build's architecture), y and dx by Winograd F(4x4, 3x3) (M:4, what the layer runs) and F(2x2, 3x3) (M:2),
// dW and db by F(3x3, 4x4) (M:4, what the layer runs) and F(3x3, 2x2) (M:2) (winograd.hpp), and by
// the chunked im2col products it replaced (conv.hpp), in the same binary; conv1/...: the first
// convolution's direct forward and dW; pool1/2_pass: the max poolings' forward and backward.
//   build/bench/bench/bench_cnn --benchmark_repetitions=3
#include <benchmark/benchmark.h>

#include <ctnn/backends/cpu/conv.hpp>
#include <ctnn/backends/cpu/pooling.hpp>
#include <ctnn/ctnn.hpp>

#include "train_step_bench.hpp"

#include <algorithm>
#include <cstdint>
#include <vector>

namespace {

using net = ctnn::sequential<ctnn::input<28, 28>,
                             ctnn::conv2d<32, 3, 3, 1, ctnn::padding::valid, ctnn::relu>,
                             ctnn::max_pool2d<2>,
                             ctnn::batch_norm,
                             ctnn::conv2d<64, 3, 3, 1, ctnn::padding::valid, ctnn::relu>,
                             ctnn::max_pool2d<2>,
                             ctnn::batch_norm,
                             ctnn::flatten,
                             ctnn::dense<128, ctnn::relu>,
                             ctnn::dropout<0.5f>,
                             ctnn::dense<10>>;

void cnn_train_step(benchmark::State& st) { ctnn_bench::train_step<net>(st, ctnn::adam{1e-3}); }

constexpr ctnn::kernels::conv_geometry conv2{13, 13, 32, 64, 3, 3, 1, 11, 11, 0, 0};
using arch = ctnn::kernels::cpu::default_arch;
constexpr std::size_t conv_batch = 64;

struct conv_data {
  std::vector<float> x, w, b, y, dy, dx, dw, db, cols;
  conv_data()
      : x(conv_batch * conv2.in_size()), w(conv2.patch() * conv2.f), b(conv2.f), y(conv_batch * conv2.out_size()),
        dy(y.size()), dx(x.size()), dw(w.size()), db(b.size()), cols(conv_batch * conv2.oh * conv2.ow * conv2.patch()) {
    ctnn::rng g(3);
    for (auto* v : {&x, &w, &b, &dy})
      for (auto& e : *v) e = float(g.uniform(-1, 1));
    std::copy(x.begin(), x.end(), cols.begin());  // the chunked backward's copy of x
  }
};

// y and dx by Winograd F(M x M, 3x3): the Arg M = 4 (what the layer runs, winograd_m) or 2
template <std::size_t M>
void conv2_forward_winograd_m(conv_data& d) {
  ctnn::kernels::cpu::winograd_forward<conv2, arch, float, ctnn::fn::identity_fn, M>(d.x.data(), d.w.data(), d.b.data(),
                                                                                    d.y.data(), conv_batch);
}
void conv2_forward_winograd(benchmark::State& st) {
  conv_data d;
  for (auto _ : st) st.range(0) == 4 ? conv2_forward_winograd_m<4>(d) : conv2_forward_winograd_m<2>(d);
}
void conv2_forward_im2col(benchmark::State& st) {
  conv_data d;
  for (auto _ : st)
    ctnn::kernels::cpu::detail::conv_forward_chunked<conv2, arch>(d.x.data(), d.w.data(), d.b.data(), d.y.data(),
                                                                  d.cols.data(), conv_batch);
}
void conv2_dx_winograd(benchmark::State& st) {
  conv_data d;
  for (auto _ : st)
    st.range(0) == 4
        ? ctnn::kernels::cpu::winograd_backward_input<conv2, arch, float, 4>(d.dy.data(), d.w.data(), d.dx.data(), conv_batch)
        : ctnn::kernels::cpu::winograd_backward_input<conv2, arch, float, 2>(d.dy.data(), d.w.data(), d.dx.data(), conv_batch);
}
// dW and db by Winograd F(3x3, M x M): the Arg M = 4 (what the layer runs; db the chunks' column sums in its tasks) or 2
template <std::size_t M>
void conv2_dw_winograd_m(conv_data& d) {
  ctnn::kernels::cpu::winograd_backward_weights<conv2, arch, float, M>(d.x.data(), d.dy.data(), d.dw.data(),
                                                                       d.cols.data() + conv_batch * conv2.in_size(),
                                                                       conv_batch, d.db.data());
}
void conv2_dw_winograd(benchmark::State& st) {
  conv_data d;
  for (auto _ : st) st.range(0) == 4 ? conv2_dw_winograd_m<4>(d) : conv2_dw_winograd_m<2>(d);
}
// conv1 (28x28x1 -> 26x26x32, the direct kernels): dW + db of a relu layer (the mask read with dy), batch 64
constexpr ctnn::kernels::conv_geometry conv1{28, 28, 1, 32, 3, 3, 1, 26, 26, 0, 0};
void conv1_dw_direct(benchmark::State& st) {
  std::vector<float> x(conv_batch * conv1.in_size()), dy(conv_batch * conv1.out_size()), y(dy.size()),
      dw(conv1.patch() * conv1.f), db(conv1.f), partial(conv_batch * (dw.size() + db.size()));
  ctnn::rng g(5);
  for (auto* v : {&x, &dy, &y})
    for (auto& e : *v) e = float(g.uniform(-1, 1));
  for (auto _ : st)
    ctnn::kernels::cpu::detail::direct_backward_weights<conv1, arch>(x.data(), dy.data(), dw.data(), db.data(),
                                                                     partial.data(), conv_batch, y.data());
}
// the max pooling after each convolution (forward: maxima and offsets; backward: dx from the offsets), batch 64
template <ctnn::kernels::conv_geometry P>
void pool_pass(benchmark::State& st) {
  std::vector<float> x(conv_batch * P.in_size()), y(conv_batch * P.out_size()), dx(x.size());
  std::vector<unsigned char> idx(y.size() * sizeof(std::uint32_t));
  ctnn::rng g(7);
  for (auto& e : x) e = float(g.uniform(-1, 1));
  ctnn::kernels::cpu::max_pool_forward<P, arch>(x.data(), y.data(), idx.data(), conv_batch);
  const bool backward = st.range(0) != 0;
  for (auto _ : st)
    if (backward) ctnn::kernels::cpu::max_pool_backward<P, arch>(idx.data(), y.data(), dx.data(), conv_batch);
    else ctnn::kernels::cpu::max_pool_forward<P, arch>(x.data(), y.data(), idx.data(), conv_batch);
}
constexpr ctnn::kernels::conv_geometry pool1{26, 26, 32, 32, 2, 2, 2, 13, 13, 0, 0};
constexpr ctnn::kernels::conv_geometry pool2{11, 11, 64, 64, 2, 2, 2, 5, 5, 0, 0};
void pool1_pass(benchmark::State& st) { pool_pass<pool1>(st); }
void pool2_pass(benchmark::State& st) { pool_pass<pool2>(st); }
// conv1's direct forward (relu fused, and the copy of x for the dW), batch 64
void conv1_forward_direct(benchmark::State& st) {
  std::vector<float> x(conv_batch * conv1.in_size()), w(conv1.patch() * conv1.f), b(conv1.f),
      y(conv_batch * conv1.out_size()), cols(conv_batch * conv1.oh * conv1.ow * conv1.patch());
  ctnn::rng g(6);
  for (auto* v : {&x, &w, &b})
    for (auto& e : *v) e = float(g.uniform(-1, 1));
  for (auto _ : st)
    ctnn::kernels::cpu::conv_forward<conv1, arch>(x.data(), w.data(), b.data(), y.data(), cols.data(), conv_batch,
                                                  ctnn::fn::relu_fn{});
}
// dW + db + dx by the chunked im2col products (dx: dcols = dY W^T and col2im) and dW + db alone: dx's cost is
// the difference
void conv2_backward_im2col(benchmark::State& st) {
  conv_data d;
  const bool dx = st.range(0) != 0;
  for (auto _ : st)
    ctnn::kernels::cpu::detail::conv_backward_chunked<conv2, arch>(d.dy.data(), d.w.data(), d.dw.data(), d.db.data(),
                                                                   dx ? d.dx.data() : nullptr, d.cols.data(), conv_batch);
}

}  // namespace

BENCHMARK(cnn_train_step)->Arg(64)->Unit(benchmark::kMillisecond)->MinTime(3.0)->UseRealTime();
BENCHMARK(conv2_forward_winograd)->ArgName("M")->Arg(4)->Arg(2)->Unit(benchmark::kMicrosecond);
BENCHMARK(conv2_forward_im2col)->Unit(benchmark::kMicrosecond);
BENCHMARK(conv2_dx_winograd)->ArgName("M")->Arg(4)->Arg(2)->Unit(benchmark::kMicrosecond);
BENCHMARK(conv2_dw_winograd)->ArgName("M")->Arg(4)->Arg(2)->Unit(benchmark::kMicrosecond);
BENCHMARK(conv1_forward_direct)->Unit(benchmark::kMicrosecond);
BENCHMARK(conv1_dw_direct)->Unit(benchmark::kMicrosecond);
BENCHMARK(pool1_pass)->ArgName("backward")->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);
BENCHMARK(pool2_pass)->ArgName("backward")->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);
BENCHMARK(conv2_backward_im2col)->ArgName("dx")->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);

BENCHMARK_MAIN();
