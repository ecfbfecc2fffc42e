// tests/quantization/test_quantized_conv2d_pool.cpp — a max_pool2d fused into a full-integer
// quantized_conv2d's store (quantized_conv2d<..., Pool>, int8::conv_s8_pool_requantize,
// backends/cpu/int8_conv.hpp): bit for bit the unfused layer then the pool on every architecture
// (the scalar path, avx2, avx512bw: VNNI where the CPU has it), int8 and float inputs and outputs,
// the saturation count of the pooled values against an independent count, the unfused fallback
// where the requantization could wrap, quantized_t's pairing (and the pools it leaves alone), whole
// models against their float-between models, and the windows kernel re-packed when the kernel changes.
#include <doctest/doctest.h>

#include <ctnn/ctnn.hpp>
#include <ctnn/layers/quantized_conv2d.hpp>
#include <ctnn/quantization/convert.hpp>

#include "kernels/archs.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

using namespace ctnn;

namespace {

namespace i8 = kernels::cpu::int8;
using fi = quantization::full_integer;

// A conv (F, KH x KW, stride St, padding Pad, Act, IO) on In with the max pooling Pool fused
// (fused<B>) and without (plain<B>): the same buffers.
template <std::size_t F, std::size_t KH, std::size_t KW, std::size_t St, padding Pad, class Act, class IO, class Pool,
          class In>
struct fusion_case {
  template <class B>
  using fused = quantized_conv2d_layer<quantized_conv2d<F, KH, KW, St, Pad, Act, fi, IO, Pool>, In, precision::float32, B>;
  template <class B>
  using plain = quantized_conv2d_layer<quantized_conv2d<F, KH, KW, St, Pad, Act, fi, IO>, In, precision::float32, B>;
  using io = IO;
  using act = Act;
};

// A layer's state (64-byte aligned) with random int8 weights and parameters as a converter sets them;
// shift_of: a column's shift instead of quantize_multiplier's (the fallback case)
struct state {
  std::vector<std::uint64_t> mem;
  std::byte* base;
  template <class L>
  static state make(std::uint64_t seed, int big_shift = 0) {
    state s;
    s.mem.assign(L::state_bytes / 8 + 16, 0);
    s.base = reinterpret_cast<std::byte*>((reinterpret_cast<std::uintptr_t>(s.mem.data()) + 63) / 64 * 64);
    layer_slot<float> slot;
    slot.state = reinterpret_cast<float*>(s.base);
    rng g(seed);
    L::init(slot, g);
    auto v = L::view(s.base);
    std::vector<std::int8_t> w(L::N * L::K);
    for (auto& e : w) e = std::int8_t(std::lround(g.uniform(-127.4, 127.4)));
    kernels::cpu::int8::pack(L::K, L::N, w.data(), L::K, v.kernel);
    kernels::cpu::int8::packed_sums(L::N, L::K, v.kernel, v.kernel_sum);
    for (std::size_t j = 0; j < L::N; ++j) v.kernel_scale[j] = float(g.uniform(0.001, 0.01));
    *v.in_scale = 0.02f;
    *v.in_zp = -17;
    *v.out_scale = 0.05f;  // narrow: some outputs saturate
    *v.out_zp = 9;
    for (std::size_t j = 0; j < L::N; ++j) {
      static_cast<std::int32_t*>(v.bias)[j] = std::int32_t(g.uniform(-3000, 3000));
      const auto m = quantization::quantize_multiplier(double(*v.in_scale) * v.kernel_scale[j] / *v.out_scale);
      v.mult[j] = m.q;
      v.shift[j] = m.shift;
    }
    if (big_shift) {
      v.mult[1] = 1 << 30;
      v.shift[1] = big_shift;
    }
    return s;
  }
  state copy() const {
    state s;
    s.mem = mem;
    s.base = reinterpret_cast<std::byte*>(s.mem.data()) + (base - reinterpret_cast<const std::byte*>(mem.data()));
    return s;
  }
};

template <class L>
using out_t = typename L::output_element;

// Layer L's outputs (n values) and saturation counts {inputs, outputs} on input x.
template <class L, class X>
std::pair<std::vector<out_t<L>>, std::pair<std::uint64_t, std::uint64_t>> run(const state& st, const std::vector<X>& x,
                                                                             std::size_t batch, std::size_t n) {
  state s = st.copy();
  std::vector<out_t<L>> y(n + 16, out_t<L>(99));  // beyond n: must stay untouched
  layer_slot<float> slot;
  slot.state = reinterpret_cast<float*>(s.base);
  L::forward(slot, reinterpret_cast<const float*>(x.data()), reinterpret_cast<float*>(y.data()), run_info{batch, false});
  for (std::size_t i = n; i < y.size(); ++i) REQUIRE(y[i] == out_t<L>(99));
  y.resize(n);
  const auto v = L::view(s.base);
  return {y, {std::uint64_t(v.saturated[1]) << 32 | v.saturated[0], std::uint64_t(v.saturated[3]) << 32 | v.saturated[2]}};
}

// The max over each window of pool geometry pg (no padding), one value at a time.
template <class T>
std::vector<T> pool_max(const kernels::conv_geometry& pg, const std::vector<T>& y, std::size_t batch) {
  std::vector<T> out(batch * pg.out_size());
  for (std::size_t n = 0; n < batch; ++n)
    for (std::size_t ph = 0; ph < pg.oh; ++ph)
      for (std::size_t pw = 0; pw < pg.ow; ++pw)
        for (std::size_t c = 0; c < pg.c; ++c) {
          T m = y[n * pg.in_size() + (ph * pg.stride * pg.w + pw * pg.stride) * pg.c + c];
          for (std::size_t a = 0; a < pg.kh; ++a)
            for (std::size_t b = 0; b < pg.kw; ++b)
              m = std::max(m, y[n * pg.in_size() + ((ph * pg.stride + a) * pg.w + pw * pg.stride + b) * pg.c + c]);
          out[n * pg.out_size() + (ph * pg.ow + pw) * pg.c + c] = m;
        }
  return out;
}

// The pooled saturation count, independently: each output's requantized value q (before the clamp)
// from a direct loop over its window (TFLite's rule, quantization/arithmetic.hpp), then per pool
// window the largest q above 127, or (no relu) below -128.
template <class L, class X>
std::uint64_t pooled_saturation(const state& st, const std::vector<X>& x, std::size_t batch) {
  constexpr auto g = L::geometry;
  constexpr auto pg = L::pool_geometry;
  const auto v = L::view(st.base);
  std::vector<std::int8_t> w(g.f * L::K);
  kernels::cpu::int8::unpack(L::K, g.f, v.kernel, w.data());
  const std::int32_t iz = *v.in_zp;
  std::vector<std::int64_t> q(batch * g.out_size());
  for (std::size_t n = 0; n < batch; ++n) {
    std::vector<std::int32_t> xi(g.in_size());
    for (std::size_t i = 0; i < xi.size(); ++i) {
      if constexpr (std::is_same_v<X, std::int8_t>)
        xi[i] = x[n * g.in_size() + i];
      else
        xi[i] = quantization::quantize(x[n * g.in_size() + i], {*v.in_scale, iz});
    }
    for (std::size_t oh = 0; oh < g.oh; ++oh)
      for (std::size_t ow = 0; ow < g.ow; ++ow)
        for (std::size_t f = 0; f < g.f; ++f) {
          std::int64_t acc = static_cast<const std::int32_t*>(v.bias)[f];
          for (std::size_t i = 0; i < g.kh; ++i)
            for (std::size_t j = 0; j < g.kw; ++j) {
              std::size_t r, s;
              if (!kernels::reference::conv_source(g, oh, ow, i, j, r, s)) continue;
              for (std::size_t c = 0; c < g.c; ++c)
                acc += std::int64_t(xi[(r * g.w + s) * g.c + c] - iz) * w[f * L::K + (i * g.kw + j) * g.c + c];
            }
          REQUIRE(acc == std::int64_t(std::int32_t(acc)));
          q[n * g.out_size() + (oh * g.ow + ow) * g.f + f] =
              std::int64_t(quantization::multiply_by_quantized_multiplier(std::int32_t(acc), v.mult[f], v.shift[f])) +
              *v.out_zp;
        }
  }
  const auto top = pool_max(pg, q, batch);
  const std::int64_t low = std::is_same_v<typename L::Act, relu> ? std::numeric_limits<std::int64_t>::min() : -128;
  std::uint64_t count = 0;
  for (auto t : top) count += t > 127 || t < low;
  return count;
}

template <class X>
std::vector<X> inputs(std::size_t n, std::uint64_t seed) {
  std::vector<X> x(n);
  rng g(seed);
  for (auto& e : x) {
    if constexpr (std::is_same_v<X, std::int8_t>)
      e = std::int8_t(std::lround(g.uniform(-128.49, 127.49)));
    else
      e = float(g.uniform(-2.0, 2.9));
  }
  if constexpr (std::is_same_v<X, float>) {
    x[0] = 1000.0f;  // input saturation
    x[1] = -1000.0f;
  }
  return x;
}

// Case C on batches 1, 2, 5: the fused layer on every architecture against the unfused layer on the
// scalar path then the pooling, bit for bit; its input count the unfused one's, its output count the
// independent pooled count (big_shift: a column whose requantization could wrap: the fallback, whose
// output count is the unfused one's).
template <class C>
void check_fusion(std::uint64_t seed, int big_shift = 0) {
  using X = std::conditional_t<C::io::input, std::int8_t, float>;
  using ref_plain = typename C::template plain<cpu<xsimd::sse2>>;
  using ref_fused = typename C::template fused<cpu<xsimd::sse2>>;
  constexpr auto g = ref_fused::geometry;
  constexpr auto pg = ref_fused::pool_geometry;
  static_assert(pg.h == g.oh && pg.w == g.ow && pg.c == g.f);
  const state st = state::make<ref_plain>(seed, big_shift);
  for (std::size_t batch : {1, 2, 5}) {
    const auto x = inputs<X>(batch * g.in_size(), seed + batch);
    const auto unfused = run<ref_plain>(st, x, batch, batch * g.out_size());
    const auto want = pool_max(pg, unfused.first, batch);
    const std::uint64_t want_out = big_shift ? unfused.second.second : pooled_saturation<ref_fused>(st, x, batch);
    if (!big_shift) CHECK(want_out <= unfused.second.second);  // at most one a window that saturated
    {
      auto v = ref_fused::view(st.base);
      const auto e = i8::requant_for(g.f, static_cast<const std::int32_t*>(v.bias), *v.in_zp, v.kernel_sum, v.mult,
                                     v.shift, *v.out_zp, true, 0.05f, static_cast<out_t<ref_fused>*>(nullptr),
                                     &ref_fused::name, "filter");
      CHECK(i8::requant_monotone(e, g.f, ref_fused::K) == !big_shift);  // the fused path, or the fallback
    }
    const int ran = ctnn::test::for_each_arch("fused conv + max pool", [&]<class Arch>(Arch, const char* name) {
      using L = typename C::template fused<cpu<Arch>>;
      INFO(L::name() << " + " << L::Pool::name() << ", " << name << ", batch " << batch << ", path "
                     << int(i8::int8_path_of<Arch>()));
      const auto got = run<L>(st, x, batch, batch * pg.out_size());
      CHECK(got.first == want);
      CHECK(got.second.first == unfused.second.first);
      CHECK(got.second.second == want_out);
    });
    CHECK(ran >= 1);
  }
}

// the cases: pool 2 over a C = 1 first layer (the windows kernel; an odd output width: its last
// column is no window's), same padding (the bordered image) with a narrow panel, a 3x3 window (9
// rows: across the VNNI tiles of 4 and the AVX2 ones of 2) with float outputs, stride 3 over 2x2
// windows (outputs no window reads) with float in and out, 70 filters (4 panels and a narrow one)
// under same pool padding that pads nothing, a 1x1 window (a subsampling), and two more kernels the
// VNNI path keeps in registers (int8_conv.hpp's pool_resident, as first_c1's): C = 2 with int8 in and
// float out, and a stride-2 conv under 3x3 pool windows (9 rows a window)
using first_c1 = fusion_case<32, 3, 3, 1, padding::valid, relu, quantization::int8_io<false, true>, max_pool2d<2>,
                             shape<12, 11, 1>>;
using first_c1_int8 = fusion_case<12, 3, 3, 1, padding::valid, relu, quantization::int8_io<true, true>, max_pool2d<2>,
                                  shape<9, 8, 1>>;
using same_narrow = fusion_case<20, 3, 3, 1, padding::same, identity, quantization::int8_io<true, true>, max_pool2d<2>,
                                shape<8, 8, 3>>;
using window9 = fusion_case<24, 2, 2, 1, padding::valid, relu, quantization::int8_io<true, false>, max_pool2d<3>,
                            shape<9, 9, 4>>;
using stride3 = fusion_case<16, 3, 3, 2, padding::same, identity, quantization::float_io, max_pool2d<2, 3>,
                            shape<10, 10, 2>>;
using wide = fusion_case<70, 3, 3, 1, padding::valid, relu, quantization::int8_io<false, true>,
                         max_pool2d<2, 2, padding::same>, shape<8, 8, 8>>;
using window1 = fusion_case<8, 1, 1, 1, padding::valid, identity, quantization::int8_io<true, true>, max_pool2d<1, 2>,
                            shape<5, 5, 8>>;
using resident_float = fusion_case<16, 3, 3, 1, padding::valid, identity, quantization::int8_io<true, false>,
                                   max_pool2d<2>, shape<9, 10, 2>>;
using resident_window9 = fusion_case<16, 2, 2, 2, padding::valid, relu, quantization::float_io, max_pool2d<3>,
                                     shape<14, 14, 1>>;
static_assert(i8::detail::kernel_resident<first_c1::fused<cpu<kernels::cpu::default_arch>>::geometry> ||
              !i8::vnni_compiled);  // (the VNNI path's resident kernel: the deploy CNN's first layer)
static_assert(i8::detail::kernel_resident<resident_float::fused<cpu<kernels::cpu::default_arch>>::geometry> ||
              !i8::vnni_compiled);
static_assert(i8::detail::kernel_resident<resident_window9::fused<cpu<kernels::cpu::default_arch>>::geometry> ||
              !i8::vnni_compiled);

}  // namespace

TEST_CASE("quantized_conv2d with a fused max pool: bit for bit the unfused layer then the pool, every path") {
  check_fusion<first_c1>(1);
  check_fusion<first_c1_int8>(2);
  check_fusion<same_narrow>(3);
  check_fusion<window9>(4);
  check_fusion<stride3>(5);
  check_fusion<wide>(6);
  check_fusion<window1>(7);
  check_fusion<resident_float>(11);
  check_fusion<resident_window9>(12);
}

TEST_CASE("quantized_conv2d with a fused max pool: a requantization that could wrap runs unfused, a negative multiplier is refused") {
  // shift 13 on column 1: (128 127 K + |off|) 2^13 passes 2^31 (K = 27), so the max may not commute:
  // the layer runs the convolution and then the pool, and counts every output as the unfused one
  check_fusion<same_narrow>(8, 13);
  check_fusion<first_c1>(9, 16);
  using L = same_narrow::fused<cpu<kernels::cpu::default_arch>>;
  using P = same_narrow::plain<cpu<kernels::cpu::default_arch>>;
  state st = state::make<P>(10);
  L::view(st.base).mult[3] = -5;
  const auto x = inputs<std::int8_t>(L::geometry.in_size(), 1);
  CHECK_THROWS_WITH_AS(run<L>(st, x, 1, L::pool_geometry.out_size()),
                       doctest::Contains("filter 3's requantization multiplier (-5"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(run<P>(st, x, 1, L::geometry.out_size()),
                       doctest::Contains("filter 3's requantization multiplier (-5"), std::invalid_argument);
}

TEST_CASE("int8::pool_fusable and requant_monotone: the pools and requantizations the fused store takes") {
  constexpr auto conv = window_geometry(8, 8, 3, 16, 3, 3, 1, padding::valid);  // 6x6x16
  const auto pool = [&](std::size_t p, std::size_t s, padding pad) { return window_geometry(6, 6, 16, 16, p, p, s, pad); };
  CHECK(i8::pool_fusable(conv, pool(2, 2, padding::valid)));
  CHECK(i8::pool_fusable(conv, pool(2, 2, padding::same)));  // 6 = 3 2: no padding
  CHECK(i8::pool_fusable(conv, pool(3, 3, padding::valid)));
  CHECK(i8::pool_fusable(conv, pool(2, 4, padding::valid)));  // outputs no window reads
  CHECK(i8::pool_fusable(conv, pool(1, 1, padding::valid)));
  CHECK_FALSE(i8::pool_fusable(conv, pool(3, 2, padding::valid)));  // overlapping windows
  CHECK_FALSE(i8::pool_fusable(conv, pool(4, 4, padding::same)));   // a window reaching the padding
  CHECK_FALSE(i8::pool_fusable(conv, pool(3, 1, padding::same)));
  CHECK_FALSE(i8::pool_fusable(conv, window_geometry(6, 5, 16, 16, 2, 2, 2, padding::valid)));  // not its outputs
  // sums whose VNNI form could wrap (255 127 K >= 2^31): K = 3 3 8192
  constexpr auto deep = window_geometry(4, 4, 8192, 4, 3, 3, 1, padding::valid);
  CHECK_FALSE(i8::pool_fusable(deep, window_geometry(2, 2, 4, 4, 2, 2, 2, padding::valid)));
  // requant_monotone: shift <= 0 for realistic sums; a left shift where the bound passes 2^31
  const std::int32_t bias[2] = {100, -100}, sum[2] = {50, -50}, mult[2] = {1 << 30, 1 << 30};
  std::int32_t shift[2] = {-3, 0};
  std::int8_t y[2];
  auto e = i8::requant_for(2, bias, -17, sum, mult, shift, 3, true, 0.1f, y, +[] { return std::string("t"); }, "filter");
  CHECK(i8::requant_monotone(e, 2, 27));
  shift[1] = 13;  // (27 16256 + 950) 2^13 > 2^31 - 129
  CHECK_FALSE(i8::requant_monotone(e, 2, 27));
  shift[1] = 12;  // 439862 2^12 = 1801674752: fits
  CHECK(i8::requant_monotone(e, 2, 27));
  float yf[2];
  auto ef = i8::requant_for(2, bias, -17, sum, mult, shift, 3, true, 0.1f, yf, +[] { return std::string("t"); }, "filter");
  CHECK(i8::requant_monotone(ef, 2, 27));
  ef.scale = -0.1f;  // a decreasing dequantization
  CHECK_FALSE(i8::requant_monotone(ef, 2, 27));
  ef.scale = std::numeric_limits<float>::quiet_NaN();
  CHECK_FALSE(i8::requant_monotone(ef, 2, 27));
}

namespace {
constexpr std::size_t S = 12;
// 12x12x1 -> 12x12x8 -> pool 6x6x8 (fused) -> 4x4x8 -> pool 3, stride 2: 1x1x8 (overlapping: an
// int8_pass) -> 1x1x4 -> pool 2, same: 1x1x4 (a window into the padding: an int8_pass) -> 4 -> 3
using net = sequential<input<S, S, 1>, conv2d<8, 3, 3, 1, padding::same, relu>, max_pool2d<2>,
                       conv2d<8, 3, 3, 1, padding::valid, relu>, max_pool2d<3, 2>, conv2d<4, 1, 1>,
                       max_pool2d<2, 2, padding::same>, flatten, dense<3>>;
using qnet = quantized_t<net>;
// a conv with float output (nothing full-integer after it) and its pool, fused
using tail = sequential<input<S, S, 1>, conv2d<6, 3, 3>, max_pool2d<2>, flatten>;

template <class QM>
auto float_between_copy(QM& qm) {
  auto fm = make_model<quantization::float_between_t<typename QM::network>>(1);
  std::vector<variable_ref> src;
  qm.for_each_variable([&](const variable_ref& v) { src.push_back(v); });
  std::size_t k = 0;
  fm.for_each_variable([&](const variable_ref& v) {
    REQUIRE(v.name == src[k].name);
    std::memcpy(v.data, src[k++].data, v.extent * v.element_bytes);
  });
  return fm;
}
template <class Net>
auto quantized_random(std::uint64_t seed) {
  const auto m = make_model<Net>(seed);
  const auto cal = inputs<float>(64 * S * S, seed + 1);
  std::vector<float> unit(cal.size());
  for (std::size_t i = 0; i < cal.size(); ++i) unit[i] = std::abs(std::fmod(cal[i], 1.0f));
  return quantize_full_integer(m, unit.data(), 64);
}
}  // namespace

TEST_CASE("quantized_t pairs a full-integer conv with the max_pool2d after it where the store can take it") {
  static_assert(std::is_same_v<
                qnet, sequential<input<S, S, 1>,
                                 quantized_conv2d<8, 3, 3, 1, padding::same, relu, fi, quantization::int8_io<false, true>,
                                                  max_pool2d<2>>,
                                 quantization::fused_pool<max_pool2d<2>, true>,
                                 quantized_conv2d<8, 3, 3, 1, padding::valid, relu, fi, quantization::int8_io<true, true>>,
                                 quantization::int8_pass<max_pool2d<3, 2>>,
                                 quantized_conv2d<4, 1, 1, 1, padding::valid, identity, fi, quantization::int8_io<true, true>>,
                                 quantization::int8_pass<max_pool2d<2, 2, padding::same>>,
                                 quantization::int8_pass<flatten>,
                                 quantized_dense<4, 3, identity, fi, quantization::int8_io<true, false>>>>);
  static_assert(std::is_same_v<quantized_t<tail>,
                               sequential<input<S, S, 1>,
                                          quantized_conv2d<6, 3, 3, 1, padding::valid, identity, fi, quantization::float_io,
                                                           max_pool2d<2>>,
                                          quantization::fused_pool<max_pool2d<2>, false>, flatten>>);
  // float between the layers: no pool fused (the unfused network, the reference)
  static_assert(std::is_same_v<quantization::float_between_t<quantized_t<tail>>,
                               sequential<input<S, S, 1>, quantized_conv2d<6, 3, 3>, max_pool2d<2>, flatten>>);
  // dynamic range: nothing fused
  static_assert(std::is_same_v<quantized_t<tail, quantization::dynamic_range>,
                               sequential<input<S, S, 1>, quantized_conv2d<6, 3, 3, 1, padding::valid, identity,
                                                                           quantization::dynamic_range>,
                                          max_pool2d<2>, flatten>>);
  // the same names, spec string and weights; the fused pool is a max_pool2d to the tools, with no
  // block of its own (it passes the conv's block on)
  using F = quantization::float_between_t<qnet>;
  CHECK(qnet::spec_string() == F::spec_string());
  static_assert(qnet::state_bytes == F::state_bytes);
  using L = decltype(make_model<qnet>(1))::layers;
  using pool = std::tuple_element_t<1, L>;
  static_assert(std::is_same_v<pool::kind, layer_kind::pool2d> &&
                std::is_same_v<pool::spec::kind, ctnn::detail::max_pool_kind> && pool::spec::pool_size == 2);
  static_assert(pool::buffers.size() == 0 && aliases_input<pool>);
  static_assert(std::tuple_element_t<0, L>::pooled && !std::tuple_element_t<2, L>::pooled);
  CHECK(pool::name() == "max_pool2d<2>");
  CHECK_THROWS_WITH_AS(pool::backward({}, nullptr, nullptr, nullptr, nullptr, {}),
                       doctest::Contains("max_pool2d<2> on int8 values runs inference only"), std::logic_error);
}

TEST_CASE("int8 models with fused pools: bit for bit their float-between models at any batch, the pooled counts marked") {
  auto qm = quantized_random<net>(3);
  auto fm = float_between_copy(qm);
  auto tq = quantized_random<tail>(4);
  auto tf = float_between_copy(tq);
  auto x = inputs<float>(9 * S * S, 5);
  for (auto& v : x) v = std::abs(std::fmod(v, 1.0f)) * 1.5f;  // partly beyond the calibrated range
  for (std::size_t n : {1, 4, 9}) {
    INFO("batch " << n);
    quantization::reset_saturation(qm);
    quantization::reset_saturation(fm);
    CHECK(qm.predict(x.data(), 9, n) == fm.predict(x.data(), 9, n));
    CHECK(tq.predict(x.data(), 9, n) == tf.predict(x.data(), 9, n));
    const auto sq = quantization::saturation(qm), sf = quantization::saturation(fm);
    REQUIRE(sq.size() == 4);
    REQUIRE(sf.size() == 4);
    CHECK(sq[0].pooled);
    CHECK(sq[0].layer == 1);
    CHECK(sq[0].inputs == sf[0].inputs);
    // relu: only saturation upwards, counted once a window (of 4 outputs) that has any
    CHECK(sq[0].outputs <= sf[0].outputs);
    CHECK(4 * sq[0].outputs >= sf[0].outputs);
    CHECK((sq[0].outputs > 0) == (sf[0].outputs > 0));
    for (std::size_t l = 1; l < 4; ++l) {
      CHECK_FALSE(sq[l].pooled);
      CHECK(sq[l].inputs == sf[l].inputs);
      CHECK(sq[l].outputs == sf[l].outputs);
    }
    for (const auto& c : sf) CHECK_FALSE(c.pooled);
  }
}

TEST_CASE("quantized_conv2d: the windows kernel of a C = 1 layer follows the weights of each model and each change") {
  // two models of one type (one layer type, one kept windows kernel) with different weights, in turns
  auto a = quantized_random<tail>(11);
  auto b = quantized_random<tail>(12);
  auto fa = float_between_copy(a);
  auto fb = float_between_copy(b);
  const auto x = inputs<float>(3 * S * S, 13);
  for (int round = 0; round < 2; ++round) {
    CHECK(a.predict(x.data(), 3) == fa.predict(x.data(), 3));
    CHECK(b.predict(x.data(), 3) == fb.predict(x.data(), 3));
  }
  // a kernel changed in place (one weight, and its column sum): the next pass reads the new one
  std::vector<float> before = a.predict(x.data(), 3);
  const auto edit = [](auto& m) {
    using C = std::tuple_element_t<0, typename std::remove_reference_t<decltype(m)>::layers>;
    std::int8_t* k = nullptr;
    std::int32_t* sums = nullptr;
    m.for_each_variable([&](const variable_ref& v) {  // (host memory: the model's own)
      if (v.layer == 0 && v.name == "kernel") k = reinterpret_cast<std::int8_t*>(v.data);
      if (v.layer == 0 && v.name == "kernel_sum") sums = reinterpret_cast<std::int32_t*>(v.data);
    });
    REQUIRE(k);
    REQUIRE(sums);
    std::int8_t& w = k[i8::packed_index(C::K, C::N, 2, 4)];
    w = std::int8_t(w > 0 ? -120 : 120);
    i8::packed_sums(C::N, C::K, k, sums);
  };
  edit(a);
  edit(fa);
  const auto after = a.predict(x.data(), 3);
  CHECK(after == fa.predict(x.data(), 3));
  CHECK(after != before);
}
