// cuda/fused_mlp.cuh's tile logic (the __host__ __device__ phases of the
// fused forward and backward kernels), run on the host: a loop over the
// threads of a block simulates each phase, tile by tile, and the results are
// checked against the CPU model. This part needs no device. (The device case
// of the fused kernels against the unfused layers goes with the generic
// model's fused-MLP hook: the CUDA fork's model options are gone.)
#include "cuda_test.hpp"

// The header under test, by name (cuda_test.hpp includes it through ctnn/backends/cuda/cuda.cuh).
#include <ctnn/backends/cuda/fused_mlp.cuh>

#include <algorithm>
#include <cstddef>
#include <vector>

using namespace ctnn_test;
using dev = ctnn::cuda<90>;

namespace {
// every activation with a rule of kernels/functors.hpp (the ones the CPU fuses into its GEMM)
using mlp = ctnn::sequential<ctnn::input<12>, ctnn::dense<16, ctnn::relu>, ctnn::dense<8, ctnn::tanh>,
                             ctnn::dense<6, ctnn::sigmoid>, ctnn::dense<5, ctnn::leaky_relu<0.1>>, ctnn::dense<4>>;
using cpu_layers = ctnn::model<mlp, ctnn::precision::float32>::layers;
using dev_layers = ctnn::model<mlp, ctnn::precision::float32, dev>::layers;
// the fused kernel's activation list is the layers' functors, in order, with their parameters
using acts = ctnn::cuda_detail::fused_plan<cpu_layers>::acts;
static_assert(std::is_same_v<acts, ctnn::cuda_detail::fused_acts<ctnn::fn::relu_fn, ctnn::fn::tanh_fn, ctnn::fn::sigmoid_fn,
                                                                 ctnn::fn::leaky_relu_fn<float>, ctnn::fn::identity_fn>>);
static_assert(ctnn::fused_mlp_fits<dev_layers>());
// the hook (core/fused_mlp_hook.hpp) exists for this network and not for one that does not fit
static_assert(ctnn::has_fused_mlp_forward<dev, dev_layers, float>);
static_assert(ctnn::has_fused_mlp_backward<dev, dev_layers, float>);
using with_softmax = ctnn::sequential<ctnn::input<12>, ctnn::dense<16, ctnn::relu>, ctnn::dense<4, ctnn::softmax>>;
using with_dropout = ctnn::sequential<ctnn::input<12>, ctnn::dense<16, ctnn::relu>, ctnn::dropout<0.5f>, ctnn::dense<4>>;
using too_wide = ctnn::sequential<ctnn::input<12>, ctnn::dense<129, ctnn::relu>, ctnn::dense<4>>;
static_assert(!ctnn::fused_mlp_fits<ctnn::model<with_softmax, ctnn::precision::float32, dev>::layers>());
static_assert(!ctnn::has_fused_mlp_forward<dev, ctnn::model<with_softmax, ctnn::precision::float32, dev>::layers, float>);
static_assert(!ctnn::has_fused_mlp_forward<dev, ctnn::model<with_dropout, ctnn::precision::float32, dev>::layers, float>);
static_assert(!ctnn::has_fused_mlp_backward<dev, ctnn::model<too_wide, ctnn::precision::float32, dev>::layers, float>);
constexpr int W = int(ctnn::fused_mlp_width), R = int(ctnn::fused_mlp_rows);
constexpr int nt = 7;  // threads of the simulated block: fewer than the elements, so each takes several

struct dense_ref {
  int k = 0, n = 0;
  std::vector<float> w, b;          // the CPU model's kernel [k, n] and bias [n]
  std::size_t grad_offset = 0;      // where its gradients start in the CPU model's gradient region (floats)
};

// The CPU model's dense layers, in order.
template <class M>
std::vector<dense_ref> dense_layers(const M& m) {
  std::vector<dense_ref> ls;
  m.for_each_variable([&](const ctnn::variable_ref& v) {
    const float* p = reinterpret_cast<const float*>(v.data);
    if (v.name == "kernel") {
      dense_ref d;
      d.k = int(v.dims[0]);
      d.n = int(v.dims[1]);
      d.w.assign(p, p + v.extent);
      d.grad_offset = v.offset / sizeof(float);
      ls.push_back(d);
    } else if (v.name == "bias") {
      ls.back().b.assign(p, p + v.extent);
    }
  });
  return ls;
}
}  // namespace

TEST_CASE("the fused MLP's tile phases, simulated on the host, give the CPU model's output and weight gradients") {
  // no device needed: the tile functions are __host__ __device__
  auto cm = ctnn::make_model<mlp, ctnn::precision::float32>(21);
  const auto layers = dense_layers(cm);
  REQUIRE(layers.size() == 5);
  // the activation rules as the kernel gets them (leaky_relu's slope included)
  const acts rules = ctnn::cuda_detail::fused_plan<cpu_layers>::acts_of::make(ctnn::cuda_detail::fused_rules<cpu_layers>());
  const std::size_t L = layers.size();
  for (std::size_t batch : {std::size_t(5), std::size_t(2 * R + 3)}) {  // one partial tile; two full and a partial one
    INFO("batch = " << batch);
    const auto x = random_values(batch * 12, 200 + unsigned(batch));
    const auto dy = random_values(batch * 4, 300 + unsigned(batch));
    // the CPU model: forward (training) and backward from dy
    const auto* cy = cm.forward(x.data(), batch, true);
    const std::vector<float> want_y(cy, cy + batch * 4);
    std::copy(dy.begin(), dy.end(), cm.output_gradient());
    cm.backward();
    const std::vector<float> want_g(cm.gradients().begin(), cm.gradients().end());

    // the fused forward, tile by tile; each layer's output rows kept "in global memory" for the backward
    std::vector<std::vector<float>> out(L);
    for (std::size_t l = 0; l < L; ++l) out[l].assign(batch * layers[l].n, 0.0f);
    for (std::size_t r0 = 0; r0 < batch; r0 += R) {
      const int nr = int(std::min<std::size_t>(R, batch - r0));
      std::vector<float> a(R * W), o(R * W);
      for (int i = 0; i < nr * 12; ++i) a[(i / 12) * W + i % 12] = x[(r0 + i / 12) * 12 + i % 12];
      for (std::size_t l = 0; l < L; ++l) {
        const auto& d = layers[l];
        rules.visit(int(l), [&](auto act) {
          for (int t = 0; t < nt; ++t)
            ctnn::cuda_detail::fused_tile_forward<float>(t, nt, a.data(), d.w.data(), d.b.data(), d.k, d.n, act, nr,
                                                         o.data());
        });
        for (int i = 0; i < nr * d.n; ++i) out[l][(r0 + i / d.n) * d.n + i % d.n] = o[(i / d.n) * W + i % d.n];
        std::swap(a, o);
      }
    }
    CHECK(relative_error(out[L - 1], want_y) <= 1e-5);

    // the fused backward: per tile, from the last layer down, the kernel's phases in its order
    std::vector<std::vector<float>> dw(L), db(L);
    for (std::size_t l = 0; l < L; ++l) {
      dw[l].assign(layers[l].w.size(), 0.0f);
      db[l].assign(layers[l].b.size(), 0.0f);
    }
    for (std::size_t r0 = 0; r0 < batch; r0 += R) {
      const int nr = int(std::min<std::size_t>(R, batch - r0));
      std::vector<float> a(R * W), d(R * W), e(R * W);
      for (int i = 0; i < nr * 4; ++i) d[(i / 4) * W + i % 4] = dy[(r0 + i / 4) * 4 + i % 4];
      for (std::size_t l = L; l-- > 0;) {
        const auto& ly = layers[l];
        const std::vector<float>& in = l == 0 ? x : out[l - 1];
        for (int i = 0; i < nr * ly.k; ++i) a[(i / ly.k) * W + i % ly.k] = in[(r0 + i / ly.k) * ly.k + i % ly.k];
        rules.visit(int(l), [&](auto act) {
          for (int t = 0; t < nt; ++t)
            ctnn::cuda_detail::fused_tile_activation_backward<float>(t, nt, out[l].data() + r0 * ly.n, ly.n, d.data(),
                                                                     ly.n, act, nr);
        });
        for (int t = 0; t < nt; ++t)
          ctnn::cuda_detail::fused_tile_weight_gradient(t, nt, a.data(), d.data(), ly.k, ly.n, nr, dw[l].data(),
                                                        db[l].data());
        if (l > 0)
          for (int t = 0; t < nt; ++t)
            ctnn::cuda_detail::fused_tile_input_gradient<float>(t, nt, d.data(), ly.w.data(), ly.k, ly.n, nr,
                                                                e.data());
        std::swap(d, e);
      }
    }
    for (std::size_t l = 0; l < L; ++l) {
      INFO("dense layer " << l + 1);
      const auto& ly = layers[l];
      const std::vector<float> gw(want_g.begin() + ly.grad_offset, want_g.begin() + ly.grad_offset + ly.w.size());
      const std::vector<float> gb(want_g.begin() + ly.grad_offset + ly.w.size(),
                                  want_g.begin() + ly.grad_offset + ly.w.size() + ly.b.size());
      CHECK(relative_error(dw[l], gw) <= 1e-5);
      CHECK(relative_error(db[l], gb) <= 1e-5);
    }
  }
}
