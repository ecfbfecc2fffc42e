// backends/cpu/fused_mlp.hpp: the CPU's fused small-MLP inference (ops<cpu<Arch>>'s hook of
// core/fused_mlp_hook.hpp) against the unfused layers and the scalar reference
// (cpu<xsimd::unavailable>: the same network on gemm.hpp's reference loops), on every
// architecture this CPU runs, over one short tile, whole tiles and a partial last tile; its
// bits whatever the thread count; which networks fit; and that the model uses it only when
// model.fused_mlp().forward is set (off by default on the CPU: docs/performance.md).
#include <doctest/doctest.h>

#include <ctnn/backends/cpu/fused_mlp.hpp>  // the header under test
#include <ctnn/ctnn.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <string>
#include <vector>

#include "kernels/archs.hpp"

namespace {
using namespace ctnn;

using small = sequential<input<64>, dense<64, relu>, dense<64, ctnn::tanh>, dense<64>>;
using mnist = sequential<input<28, 28>, flatten, dense<128, relu>, dense<64, leaky_relu<0.1>>, dense<10>>;
using odd = sequential<input<3, 7>, flatten, dense<37, sigmoid>, reshape<37>, dense<256, relu>, dense<5, ctnn::tanh>>;
using with_dropout = sequential<input<64>, dense<64, relu>, dropout<0.25f>, dense<10>>;
using with_softmax = sequential<input<64>, dense<64, relu>, dense<10, softmax>>;
using too_wide = sequential<input<64>, dense<257, relu>, dense<10>>;
using up_to_width = sequential<input<64>, dense<up_to<64>, relu>, dense<10>>;

template <class Net, class B = cpu<>>
using layers_of = typename model<Net, float, B>::layers;

// which networks fit: dense (element-wise activation, at most 256 outputs) and reshape layers
static_assert(kernels::cpu::fused_mlp_fits<layers_of<small>, cpu<>::arch>());
static_assert(kernels::cpu::fused_mlp_fits<layers_of<mnist>, cpu<>::arch>());
static_assert(kernels::cpu::fused_mlp_fits<layers_of<odd>, cpu<>::arch>());
static_assert(!kernels::cpu::fused_mlp_fits<layers_of<with_dropout>, cpu<>::arch>());
static_assert(!kernels::cpu::fused_mlp_fits<layers_of<with_softmax>, cpu<>::arch>());
static_assert(!kernels::cpu::fused_mlp_fits<layers_of<too_wide>, cpu<>::arch>());
static_assert(!kernels::cpu::fused_mlp_fits<layers_of<up_to_width>, cpu<>::arch>());
// the hook exists for those networks only, and for cpu<Arch>'s own layers (not an inheriting backend's)
static_assert(has_fused_mlp_forward<cpu<>, layers_of<mnist>, float>);
static_assert(has_fused_mlp_forward<cpu<>, layers_of<small>, float>);
static_assert(!has_fused_mlp_forward<cpu<>, layers_of<with_dropout>, float>);
static_assert(!has_fused_mlp_forward<cpu<>, layers_of<too_wide>, float>);
static_assert(!has_fused_mlp_backward<cpu<>, layers_of<mnist>, float>);  // inference only
static_assert(!kernels::cpu::fused_mlp_fits<layers_of<mnist, cpu<xsimd::unavailable>>, xsimd::unavailable>());
// tiles: two buffers of 8192 values, 16 to 64 rows
static_assert(kernels::cpu::fused_tile_rows<layers_of<small>, cpu<>::arch> == 64);
static_assert(kernels::cpu::fused_tile_rows<layers_of<mnist>, cpu<>::arch> == 32);
static_assert(kernels::cpu::fused_tile_rows<layers_of<odd>, cpu<>::arch> == 16);

template <class Net>
std::vector<float> inputs(std::size_t n) {
  std::vector<float> x(n * Net::input_shape.size);
  rng g(n + 3);
  for (auto& v : x) v = float(g.uniform(-1, 1));
  return x;
}

// The largest |a - b| relative to max(1, |b|).
double max_error(const std::vector<float>& a, const std::vector<float>& b) {
  REQUIRE(a.size() == b.size());
  double e = 0;
  for (std::size_t i = 0; i < a.size(); ++i)
    e = std::max(e, std::abs(double(a[i]) - double(b[i])) / std::max(1.0, std::abs(double(b[i]))));
  return e;
}

// Net on cpu<Arch> fused and unfused, against the scalar reference model of the same seed.
template <class Net, class Arch>
void compare(const char* arch) {
  auto fused = make_model<Net, float, cpu<Arch>>(11);
  auto plain = make_model<Net, float, cpu<Arch>>(11);
  auto scalar = make_model<Net, float, cpu<xsimd::unavailable>>(11);
  fused.fused_mlp().forward = true;
  plain.fused_mlp().forward = false;
  REQUIRE(fused.fused_mlp_active());
  REQUIRE_FALSE(plain.fused_mlp_active());
  REQUIRE_FALSE(scalar.fused_mlp_active());
  for (std::size_t batch : {1, 5, 16, 64, 130, 300}) {
    CAPTURE(arch);
    CAPTURE(batch);
    const auto x = inputs<Net>(batch);
    const auto yf = fused.predict(x.data(), batch, batch);
    const auto yp = plain.predict(x.data(), batch, batch);
    const auto ys = scalar.predict(x.data(), batch, batch);
    CHECK(max_error(yf, ys) < 2e-5);
    CHECK(max_error(yp, ys) < 2e-5);
    CHECK(max_error(yf, yp) < 2e-5);
  }
}
}  // namespace

TEST_CASE("fused_mlp: the CPU's fused inference equals the unfused layers and the scalar reference") {
  const int ran = test::for_each_arch("fused MLP inference", [](auto arch, const char* name) {
    using A = decltype(arch);
    compare<small, A>(name);
    compare<mnist, A>(name);
    compare<odd, A>(name);
  });
  CHECK(ran >= 1);
}

TEST_CASE("fused_mlp: the fused inference gives the same bits whatever the thread count") {
  auto m = make_model<mnist>(4);
  m.fused_mlp().forward = true;
  const auto x = inputs<mnist>(300);
  kernels::cpu::set_threads(1);
  const auto one = m.predict(x.data(), 300, 300);
  for (std::size_t t : {2, 3}) {
    kernels::cpu::set_threads(t);
    CHECK(m.predict(x.data(), 300, 300) == one);
  }
  kernels::cpu::set_threads(1);
}

TEST_CASE("fused_mlp: a cpu<> model runs its inference fused only when fused_mlp().forward is set") {
  auto m = make_model<mnist>(4);
  CHECK(m.fused_mlp().forward == kernels::cpu::fused_mlp_default<layers_of<mnist>, cpu<>::arch>);
  CHECK_FALSE(m.fused_mlp().backward);
  CHECK(m.fused_mlp_active() == m.fused_mlp().forward);
  m.fused_mlp().forward = true;
  CHECK(m.fused_mlp_active());
  m.fused_mlp().backward = true;  // no fused backward on the CPU: training's backward runs the layers
  CHECK_FALSE(m.fused_mlp_backward_active());
  m.fused_mlp().forward = false;
  CHECK_FALSE(m.fused_mlp_active());
  auto d = make_model<with_dropout>(4);
  d.fused_mlp().forward = true;
  CHECK_FALSE(d.fused_mlp_active());  // the network does not fit: the layers run
  // training still trains through the layers (the forward of a training step is never the hook's)
  m.fused_mlp().forward = true;
  m.fused_mlp().backward = false;
  std::vector<std::int32_t> y(64);
  for (std::size_t i = 0; i < y.size(); ++i) y[i] = std::int32_t(i % 10);
  const auto x = inputs<mnist>(64);
  const data::in_memory<shape<28, 28>, sparse_labels> train{x, y};
  auto u = make_model<mnist>(4);
  u.fused_mlp().forward = false;
  const sparse_categorical_crossentropy loss{.from_logits = true};
  adam o1, o2;
  const auto hf = fit(m, loss, o1, train.batch(16), epochs{1});
  const auto hu = fit(u, loss, o2, train.batch(16), epochs{1});
  CHECK(hf["loss"] == hu["loss"]);
}
