// backends/cpu/fused_mlp.hpp: the CPU's fused small-MLP inference (ops<cpu<Arch>>'s hook of
// core/fused_mlp_hook.hpp) against the unfused layers and the scalar reference
// (cpu<xsimd::unavailable>: the same network on gemm.hpp's reference loops), on every
// architecture this CPU runs, over one short tile, whole tiles and a partial last tile; its
// bits whatever the thread count; which networks fit; and when the model uses it
// (model.fused_mlp().forward, on by default for float on AVX-512 and FMA3 + AVX2 where it
// measured faster, docs/performance.md; from fused_mlp_min_batch samples on).
#include <doctest/doctest.h>

#include <ctnn/backends/cpu/fused_mlp.hpp>  // the header under test
#include <ctnn/ctnn.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <string>
#include <utility>
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

// a small MLP: at most fused_mlp_max_layers (32) bound layers; a deeper network never runs fused
// (and its layer list is not folded over: the 300-layer compile_time tests)
template <std::size_t>
using dense8 = dense<8, relu>;
template <class Seq>
struct deep_of;
template <std::size_t... I>
struct deep_of<std::index_sequence<I...>> {
  using type = sequential<input<8>, dense8<I>...>;
};
template <std::size_t N>
using deep = typename deep_of<std::make_index_sequence<N>>::type;

// which networks fit: dense (element-wise activation, at most 256 outputs) and reshape layers
static_assert(kernels::cpu::fused_mlp_fits<layers_of<small>, cpu<>::arch>());
static_assert(kernels::cpu::fused_mlp_fits<layers_of<mnist>, cpu<>::arch>());
static_assert(kernels::cpu::fused_mlp_fits<layers_of<odd>, cpu<>::arch>());
static_assert(!kernels::cpu::fused_mlp_fits<layers_of<with_dropout>, cpu<>::arch>());
static_assert(!kernels::cpu::fused_mlp_fits<layers_of<with_softmax>, cpu<>::arch>());
static_assert(!kernels::cpu::fused_mlp_fits<layers_of<too_wide>, cpu<>::arch>());
static_assert(!kernels::cpu::fused_mlp_fits<layers_of<up_to_width>, cpu<>::arch>());
static_assert(kernels::cpu::fused_mlp_max_layers == 32);
static_assert(kernels::cpu::fused_mlp_fits<layers_of<deep<32>>, cpu<>::arch>());
static_assert(!kernels::cpu::fused_mlp_fits<layers_of<deep<33>>, cpu<>::arch>());
// the hook exists for those networks only, and for cpu<Arch>'s own layers (not an inheriting backend's)
static_assert(has_fused_mlp_forward<cpu<>, layers_of<mnist>, float>);
static_assert(has_fused_mlp_forward<cpu<>, layers_of<small>, float>);
static_assert(!has_fused_mlp_forward<cpu<>, layers_of<with_dropout>, float>);
static_assert(!has_fused_mlp_forward<cpu<>, layers_of<too_wide>, float>);
static_assert(has_fused_mlp_backward<cpu<>, layers_of<mnist>, float>);  // and training's backward
static_assert(!has_fused_mlp_backward<cpu<>, layers_of<with_dropout>, float>);
static_assert(!kernels::cpu::fused_mlp_fits<layers_of<mnist, cpu<xsimd::unavailable>>, xsimd::unavailable>());
// on by default for float on AVX-512 and FMA3 + AVX2 (where it measured faster), from one tile of rows on
static_assert(kernels::cpu::fused_mlp_default<layers_of<mnist, cpu<xsimd::avx512bw>>, xsimd::avx512bw>);
static_assert(kernels::cpu::fused_mlp_default<layers_of<mnist, cpu<xsimd::fma3<xsimd::avx2>>>, xsimd::fma3<xsimd::avx2>>);
static_assert(!kernels::cpu::fused_mlp_default<layers_of<mnist, cpu<xsimd::sse2>>, xsimd::sse2>);
static_assert(!kernels::cpu::fused_mlp_default<typename model<mnist, double>::layers, cpu<>::arch>);
static_assert(fused_mlp_defaults<cpu<>, layers_of<mnist>>().forward ==
              kernels::cpu::fused_mlp_default<layers_of<mnist>, cpu<>::arch>);
static_assert(fused_mlp_defaults<cpu<>, layers_of<mnist>>().backward ==
              kernels::cpu::fused_mlp_backward_default<layers_of<mnist>, cpu<>::arch>);
static_assert(!fused_mlp_defaults<cpu<>, layers_of<mnist>>().training_forward);
// the training backward on by default for float on AVX-512 and FMA3 + AVX2, for networks 64 to 256 wide (measured)
#if defined(__AVX512BW__)
static_assert(kernels::cpu::fused_mlp_backward_default<layers_of<mnist, cpu<xsimd::avx512bw>>, xsimd::avx512bw>);
#endif
#if defined(__AVX2__) && defined(__FMA__)
static_assert(kernels::cpu::fused_mlp_backward_default<layers_of<small, cpu<xsimd::fma3<xsimd::avx2>>>, xsimd::fma3<xsimd::avx2>>);
#endif
static_assert(!kernels::cpu::fused_mlp_backward_default<layers_of<mnist, cpu<xsimd::sse2>>, xsimd::sse2>);
static_assert(!kernels::cpu::fused_mlp_backward_default<typename model<mnist, double>::layers, cpu<>::arch>);
using narrow = sequential<input<12>, dense<16, ctnn::tanh>, dense<3>>;
static_assert(kernels::cpu::fused_mlp_fits<layers_of<narrow>, cpu<>::arch>());
static_assert(!kernels::cpu::fused_mlp_backward_default<layers_of<narrow>, cpu<>::arch>);
// and from batch 4 on (below 256 with AVX-512)
static_assert(!kernels::cpu::fused_mlp_train_batch<layers_of<mnist, cpu<xsimd::fma3<xsimd::avx2>>>, xsimd::fma3<xsimd::avx2>>(3));
static_assert(kernels::cpu::fused_mlp_train_batch<layers_of<mnist, cpu<xsimd::fma3<xsimd::avx2>>>, xsimd::fma3<xsimd::avx2>>(4));
static_assert(kernels::cpu::fused_mlp_train_batch<layers_of<mnist, cpu<xsimd::fma3<xsimd::avx2>>>, xsimd::fma3<xsimd::avx2>>(1024));
static_assert(kernels::cpu::fused_mlp_train_batch<layers_of<mnist, cpu<xsimd::avx512bw>>, xsimd::avx512bw>(255));
static_assert(!kernels::cpu::fused_mlp_train_batch<layers_of<mnist, cpu<xsimd::avx512bw>>, xsimd::avx512bw>(256));
// without AVX-512 not from 128 to 384 rows where the first layer's kernel has 784 x 256 values or more
// (the layers' dW there one K block, the fused backward's once a tile of 64 rows)
using wide_first = sequential<input<28, 28>, flatten, dense<256, relu>, dense<128, relu>, dense<10>>;
using avx2_arch = xsimd::fma3<xsimd::avx2>;
static_assert(kernels::cpu::fused::plan<layers_of<wide_first, cpu<avx2_arch>>, avx2_arch>::first_kernel == 784 * 256);
static_assert(kernels::cpu::fused_mlp_train_batch<layers_of<wide_first, cpu<avx2_arch>>, avx2_arch>(127));
static_assert(!kernels::cpu::fused_mlp_train_batch<layers_of<wide_first, cpu<avx2_arch>>, avx2_arch>(128));
static_assert(!kernels::cpu::fused_mlp_train_batch<layers_of<wide_first, cpu<avx2_arch>>, avx2_arch>(256));
static_assert(!kernels::cpu::fused_mlp_train_batch<layers_of<wide_first, cpu<avx2_arch>>, avx2_arch>(384));
static_assert(kernels::cpu::fused_mlp_train_batch<layers_of<wide_first, cpu<avx2_arch>>, avx2_arch>(385));
static_assert(kernels::cpu::fused_mlp_train_batch<layers_of<mnist, cpu<avx2_arch>>, avx2_arch>(256));  // 784 x 128
static_assert(kernels::cpu::fused_mlp_train_batch<layers_of<odd, cpu<avx2_arch>>, avx2_arch>(256));    // 21 x 37 first
static_assert(fused_mlp_train_batch<cpu<>, layers_of<mnist>>(64) && !fused_mlp_train_batch<cpu<>, layers_of<mnist>>(2));
static_assert(fused_mlp_train_batch<cpu<>, layers_of<with_dropout>>(2));  // no rule: every batch
static_assert(has_fused_mlp_training_forward<cpu<>, layers_of<mnist>, float>);
static_assert(!has_fused_mlp_training_forward<cpu<>, layers_of<with_dropout>, float>);
static_assert(fused_mlp_min_batch<cpu<>, layers_of<mnist>>() == kernels::cpu::fused_tile_rows<layers_of<mnist>, cpu<>::arch>);
static_assert(fused_mlp_min_batch<cpu<>, layers_of<with_dropout>>() == 1);
// tiles: two buffers of at most 8192 values, whole row blocks (MR 12 with AVX-512, 6 with AVX2), 16 to 64 rows
// rounded up to MR
// (each where the build can instantiate the architecture's registers: the asan-avx2 stage builds for AVX2)
#if defined(__AVX512BW__)
static_assert(kernels::cpu::fused_tile_rows<layers_of<small, cpu<xsimd::avx512bw>>, xsimd::avx512bw> == 60);
static_assert(kernels::cpu::fused_tile_rows<layers_of<mnist, cpu<xsimd::avx512bw>>, xsimd::avx512bw> == 24);
static_assert(kernels::cpu::fused_tile_rows<layers_of<odd, cpu<xsimd::avx512bw>>, xsimd::avx512bw> == 24);
#endif
#if defined(__AVX2__) && defined(__FMA__)
static_assert(kernels::cpu::fused_tile_rows<layers_of<small, cpu<xsimd::fma3<xsimd::avx2>>>, xsimd::fma3<xsimd::avx2>> == 60);
static_assert(kernels::cpu::fused_tile_rows<layers_of<mnist, cpu<xsimd::fma3<xsimd::avx2>>>, xsimd::fma3<xsimd::avx2>> == 30);
static_assert(kernels::cpu::fused_tile_rows<layers_of<odd, cpu<xsimd::fma3<xsimd::avx2>>>, xsimd::fma3<xsimd::avx2>> == 18);
#endif

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

TEST_CASE("fused_mlp: below one tile the hook runs the layers' kernels, with the tiles' results") {
  // the model calls the hook from one tile on; called directly, a shorter batch runs dense_forward
  using L = layers_of<mnist>;
  constexpr std::size_t R = kernels::cpu::fused_tile_rows<L, cpu<>::arch>;
  std::vector<float> w1(784 * 128 + 128), w2(128 * 64 + 64), w3(64 * 10 + 10);
  rng g(9);
  for (auto* w : {&w1, &w2, &w3})
    for (auto& v : *w) v = float(g.uniform(-0.1, 0.1));
  const float* params[] = {nullptr, w1.data(), w2.data(), w3.data()};
  const auto x = inputs<mnist>(R + 7);
  std::vector<float> tiled((R + 7) * 10), short_batch(5 * 10);
  ops<cpu<>>::fused_mlp_forward<L>(x.data(), tiled.data(), R + 7, params);
  ops<cpu<>>::fused_mlp_forward<L>(x.data(), short_batch.data(), 5, params);
  tiled.resize(5 * 10);
  CHECK(max_error(short_batch, tiled) < 2e-5);
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

TEST_CASE("fused_mlp: a cpu<> model runs its inference fused where fused_mlp().forward is set (its default: fused_mlp_default)") {
  auto m = make_model<mnist>(4);
  CHECK(m.fused_mlp().forward == kernels::cpu::fused_mlp_default<layers_of<mnist>, cpu<>::arch>);
  CHECK(m.fused_mlp().backward == kernels::cpu::fused_mlp_backward_default<layers_of<mnist>, cpu<>::arch>);
  CHECK_FALSE(m.fused_mlp().training_forward);
  CHECK(m.fused_mlp_active() == m.fused_mlp().forward);
  m.fused_mlp().forward = true;
  CHECK(m.fused_mlp_active());
  m.fused_mlp().backward = true;
  CHECK(m.fused_mlp_backward_active());
  m.fused_mlp().backward = false;
  CHECK_FALSE(m.fused_mlp_backward_active());
  m.fused_mlp().training_forward = true;
  CHECK(m.fused_mlp_training_forward_active());
  m.fused_mlp().training_forward = false;
  CHECK_FALSE(m.fused_mlp_training_forward_active());
  m.fused_mlp().forward = false;
  CHECK_FALSE(m.fused_mlp_active());
  auto d = make_model<with_dropout>(4);
  d.fused_mlp() = {true, true, true};
  CHECK_FALSE(d.fused_mlp_active());  // the network does not fit: the layers run
  CHECK_FALSE(d.fused_mlp_backward_active());
  CHECK_FALSE(d.fused_mlp_training_forward_active());
  // with the training hooks off, training runs the layers whether inference is fused or not
  m.fused_mlp() = {true, false, false};
  std::vector<std::int32_t> y(64);
  for (std::size_t i = 0; i < y.size(); ++i) y[i] = std::int32_t(i % 10);
  const auto x = inputs<mnist>(64);
  const data::in_memory<shape<28, 28>, sparse_labels> train{x, y};
  auto u = make_model<mnist>(4);
  u.fused_mlp() = {false, false, false};
  const sparse_categorical_crossentropy loss{.from_logits = true};
  adam o1, o2;
  const auto hf = fit(m, loss, o1, train.batch(16), epochs{1});
  const auto hu = fit(u, loss, o2, train.batch(16), epochs{1});
  CHECK(hf["loss"] == hu["loss"]);
}

namespace {
// One training forward (fwd: the fused training forward) and backward (bwd: the fused backward) of
// Net on cpu<Arch> from dL/dy = g: the outputs, then the gradients (every layer's dW and db, in the
// plan's order).
template <class Net, class Arch>
std::vector<float> gradients(bool fwd, bool bwd, const std::vector<float>& x, const std::vector<float>& g,
                             std::size_t batch) {
  auto m = make_model<Net, float, cpu<Arch>>(11);
  m.fused_mlp().training_forward = fwd;
  m.fused_mlp().backward = bwd;
  constexpr bool hook = !std::is_same_v<Arch, xsimd::unavailable>;
  REQUIRE(m.fused_mlp_training_forward_active() == (fwd && hook));
  REQUIRE(m.fused_mlp_backward_active() == (bwd && hook));
  const float* y = m.forward(x.data(), batch, true);
  std::vector<float> r(y, y + batch * Net::output_shape.size);
  std::copy(g.begin(), g.end(), m.output_gradient());
  m.backward();
  const auto d = m.gradients();
  r.insert(r.end(), d.begin(), d.end());
  return r;
}

template <class Net, class Arch>
void compare_backward(const char* arch) {
  // (the model runs the fused passes where fused_mlp_train_batch: batch 1 runs the layers, 250 is two tiles)
  for (std::size_t batch : {1, 5, 64, 130, 250}) {
    CAPTURE(arch);
    CAPTURE(batch);
    const auto x = inputs<Net>(batch);
    std::vector<float> g(batch * Net::output_shape.size);
    rng r(batch);
    for (auto& v : g) v = float(r.uniform(-1, 1)) / float(batch);
    const auto gp = gradients<Net, Arch>(false, false, x, g, batch);
    const auto gs = gradients<Net, xsimd::unavailable>(false, false, x, g, batch);
    CHECK(max_error(gp, gs) < 2e-5);
    for (auto [fwd, bwd] : {std::pair{true, true}, std::pair{true, false}, std::pair{false, true}}) {
      CAPTURE(fwd);
      CAPTURE(bwd);
      const auto gf = gradients<Net, Arch>(fwd, bwd, x, g, batch);
      CHECK(max_error(gf, gs) < 2e-5);
      CHECK(max_error(gf, gp) < 2e-5);
    }
  }
}
}  // namespace

TEST_CASE("fused_mlp: the CPU's fused training forward and backward give the unfused layers' outputs and gradients, and the scalar reference's") {
  const int ran = test::for_each_arch("fused MLP backward", [](auto arch, const char* name) {
    using A = decltype(arch);
    compare_backward<small, A>(name);
    compare_backward<mnist, A>(name);
    compare_backward<odd, A>(name);
  });
  CHECK(ran >= 1);
}

TEST_CASE("fused_mlp: the fused training forward's outputs and the fused backward's gradients have the same bits whatever the thread count") {
  const auto x = inputs<mnist>(250);
  std::vector<float> g(250 * 10);
  rng r(2);
  for (auto& v : g) v = float(r.uniform(-1, 1));
  REQUIRE(fused_mlp_train_batch<cpu<>, layers_of<mnist>>(250));
  kernels::cpu::set_threads(1);
  const auto one = gradients<mnist, cpu<>::arch>(true, true, x, g, 250);
  for (std::size_t t : {2, 3}) {
    kernels::cpu::set_threads(t);
    CHECK(gradients<mnist, cpu<>::arch>(true, true, x, g, 250) == one);
  }
  kernels::cpu::set_threads(1);
}

TEST_CASE("fused_mlp: training with the fused forward and backward follows the unfused training (same optimizer update)") {
  std::vector<std::int32_t> y(256);
  for (std::size_t i = 0; i < y.size(); ++i) y[i] = std::int32_t(i % 10);
  const auto x = inputs<mnist>(256);
  const data::in_memory<shape<28, 28>, sparse_labels> train{x, y};
  auto f = make_model<mnist>(4);
  auto u = make_model<mnist>(4);
  f.fused_mlp().backward = f.fused_mlp().training_forward = true;
  u.fused_mlp().backward = u.fused_mlp().training_forward = false;
  const sparse_categorical_crossentropy loss{.from_logits = true};
  adam o1, o2;
  const auto hf = fit(f, loss, o1, train.batch(128), epochs{2});
  const auto hu = fit(u, loss, o2, train.batch(128), epochs{2});
  CHECK(std::abs(hf["loss"].back() - hu["loss"].back()) < 1e-4 * std::max(1.0, std::abs(hu["loss"].back())));
  const auto pf = f.predict(x.data(), 256);
  const auto pu = u.predict(x.data(), 256);
  CHECK(max_error(pf, pu) < 1e-4);
}

TEST_CASE("fused_mlp: in double the fused training passes (opt-in there) give the layers' gradients") {
  using M = model<mnist, double>;
  static_assert(!kernels::cpu::fused_mlp_backward_default<M::layers, cpu<>::arch>);  // not measured: off
  auto run = [](bool fused) {
    auto m = make_model<mnist, double>(3);
    m.fused_mlp().backward = m.fused_mlp().training_forward = fused;
    REQUIRE(m.fused_mlp_backward_active() == fused);
    std::vector<double> x(130 * 784);
    rng g(5);
    for (auto& v : x) v = g.uniform(-1, 1);
    m.forward(x.data(), 130, true);
    double* d = m.output_gradient();
    for (std::size_t i = 0; i < 130 * 10; ++i) d[i] = g.uniform(-1, 1) / 130;
    m.backward();
    const auto s = m.gradients();
    return std::vector<double>(s.begin(), s.end());
  };
  const auto f = run(true), u = run(false);
  REQUIRE(f.size() == u.size());
  double e = 0;
  for (std::size_t i = 0; i < f.size(); ++i) e = std::max(e, std::abs(f[i] - u[i]) / std::max(1.0, std::abs(u[i])));
  CHECK(e < 1e-12);
}
