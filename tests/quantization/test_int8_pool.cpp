// tests/quantization/test_int8_pool.cpp — max_pool2d, average_pool2d and flatten on the int8 tensor
// between two full-integer layers (quantization::int8_pass, layers/int8_pass.hpp): the int8 max and
// average pooling kernels (backends/cpu/int8_pool.hpp) against independent scalar loops bit for bit
// on every architecture, a converted CNN (conv2d, max_pool2d, conv2d, max_pool2d, flatten, dense)
// int8 between all its layers and bit for bit its float-between model (the max commutes with the
// monotone requantization), CNNs with average pooling (bit for bit where no mean is a tie, within
// a step of a tie elsewhere), a QAT-trained one converted, weights files, and the errors.
#include <doctest/doctest.h>

#include <ctnn/ctnn.hpp>
#include <ctnn/io/weights.hpp>
#include <ctnn/layers/int8_pass.hpp>
#include <ctnn/quantization/convert.hpp>
#include <ctnn/quantization/qat.hpp>

#include "kernels/archs.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

using namespace ctnn;

namespace {

namespace i8 = kernels::cpu::int8;

// The window maxima by conv_source (the float layers' rule for padding), started from the first
// position inside the input: no -128 start, no pool_window.
std::vector<std::int8_t> pool_reference(const kernels::conv_geometry& g, const std::vector<std::int8_t>& x,
                                        std::size_t batch) {
  std::vector<std::int8_t> y(batch * g.out_size());
  for (std::size_t n = 0; n < batch; ++n)
    for (std::size_t oh = 0; oh < g.oh; ++oh)
      for (std::size_t ow = 0; ow < g.ow; ++ow)
        for (std::size_t c = 0; c < g.c; ++c) {
          bool any = false;
          std::int8_t m = 0;
          for (std::size_t i = 0; i < g.kh; ++i)
            for (std::size_t j = 0; j < g.kw; ++j) {
              std::size_t r, s;
              if (!kernels::reference::conv_source(g, oh, ow, i, j, r, s)) continue;
              const std::int8_t v = x[n * g.in_size() + (r * g.w + s) * g.c + c];
              m = any ? std::max(m, v) : v;
              any = true;
            }
          REQUIRE(any);
          y[n * g.out_size() + (oh * g.ow + ow) * g.c + c] = m;
        }
  return y;
}

// TFLite's int8 average (reference_integer_ops::AveragePool) written another way: the window by
// conv_source, the mean |sum| / n rounded half up in 64-bit integers, with the sum's sign.
std::vector<std::int8_t> average_reference(const kernels::conv_geometry& g, const std::vector<std::int8_t>& x,
                                           std::size_t batch) {
  std::vector<std::int8_t> y(batch * g.out_size());
  for (std::size_t n = 0; n < batch; ++n)
    for (std::size_t oh = 0; oh < g.oh; ++oh)
      for (std::size_t ow = 0; ow < g.ow; ++ow)
        for (std::size_t c = 0; c < g.c; ++c) {
          std::int64_t sum = 0, count = 0;
          for (std::size_t i = 0; i < g.kh; ++i)
            for (std::size_t j = 0; j < g.kw; ++j) {
              std::size_t r, s;
              if (!kernels::reference::conv_source(g, oh, ow, i, j, r, s)) continue;
              sum += x[n * g.in_size() + (r * g.w + s) * g.c + c];
              ++count;
            }
          REQUIRE(count > 0);
          const std::int64_t a = sum < 0 ? -sum : sum, q = (2 * a + count) / (2 * count);  // |mean| rounded half up
          y[n * g.out_size() + (oh * g.ow + ow) * g.c + c] = std::int8_t(std::clamp<std::int64_t>(sum < 0 ? -q : q, -128, 127));
        }
  return y;
}

template <class Arch, std::size_t H, std::size_t W, std::size_t C, std::size_t Pool, std::size_t Stride, padding Pad>
void check_average(std::size_t batch, std::uint64_t seed, int lo = -128, int hi = 127) {
  constexpr auto g = window_geometry(H, W, C, C, Pool, Pool, Stride, Pad);
  std::vector<std::int8_t> x(batch * g.in_size());
  rng r(seed);
  for (auto& v : x) v = std::int8_t(std::clamp<long>(std::lround(r.uniform(lo - 0.49, hi + 0.49)), lo, hi));
  const auto want = average_reference(g, x, batch);
  std::vector<std::int8_t> got(want.size(), 55), scalar(want.size(), 55);
  i8::average_pool_s8<g, Arch>(x.data(), got.data(), batch);
  i8::average_pool_s8_scalar(g, x.data(), scalar.data(), batch);
  INFO(H << "x" << W << "x" << C << ", pool " << Pool << ", stride " << Stride << ", " << padding_name(Pad)
          << ", batch " << batch << ", values [" << lo << ", " << hi << "]");
  CHECK(scalar == want);
  CHECK(got == want);
}

template <class Arch, std::size_t H, std::size_t W, std::size_t C, std::size_t Pool, std::size_t Stride, padding Pad>
void check_pool(std::size_t batch, std::uint64_t seed, int lo = -128, int hi = 127) {
  constexpr auto g = window_geometry(H, W, C, C, Pool, Pool, Stride, Pad);
  std::vector<std::int8_t> x(batch * g.in_size());
  rng r(seed);
  for (auto& v : x) v = std::int8_t(std::clamp<long>(std::lround(r.uniform(lo - 0.49, hi + 0.49)), lo, hi));
  const auto want = pool_reference(g, x, batch);
  std::vector<std::int8_t> got(want.size(), 55), scalar(want.size(), 55);
  i8::max_pool_s8<g, Arch>(x.data(), got.data(), batch);
  i8::max_pool_s8_scalar(g, x.data(), scalar.data(), batch);
  INFO(H << "x" << W << "x" << C << ", pool " << Pool << ", stride " << Stride << ", " << padding_name(Pad)
          << ", batch " << batch << ", values [" << lo << ", " << hi << "]");
  CHECK(scalar == want);
  CHECK(got == want);
}

// ---- the CNN: 12x12 images of one bar (horizontal, vertical or diagonal) on noise ----
constexpr std::size_t S = 12, classes = 3;
// 12x12x1 -> 12x12x8 -> pool 6x6x8 -> 4x4x16 -> pool 2x2x16 -> 64 -> 3
using cnn = sequential<input<S, S, 1>, conv2d<8, 3, 3, 1, padding::same, relu>, max_pool2d<2>,
                       conv2d<16, 3, 3, 1, padding::valid, relu>, max_pool2d<2>, flatten, dense<classes>>;
using fi = quantization::full_integer;
using q = quantized_t<cnn>;
using f = quantization::float_between_t<q>;

struct images {
  std::vector<float> x;
  std::vector<std::int32_t> y;
};
images make_images(std::size_t n, std::uint64_t seed) {
  rng g(seed);
  images d;
  d.x.resize(n * S * S);
  d.y.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t k = i % classes, at = std::size_t(g.uniform(1, S - 1));
    d.y[i] = std::int32_t(k);
    float* im = d.x.data() + i * S * S;
    for (std::size_t p = 0; p < S * S; ++p) im[p] = float(g.uniform(-0.6, 0.6));
    for (std::size_t t = 0; t < S; ++t) {
      const std::size_t r = k == 0 ? at : t, c = k == 1 ? at : k == 0 ? t : (t + at) % S;
      im[r * S + c] += 1.0f;
    }
  }
  return d;
}

auto& trained_cnn() {
  static auto m = [] {
    auto mm = make_model<cnn>(3);
    const auto tr = make_images(300, 1);
    adam opt{0.01};
    fit(mm, sparse_categorical_crossentropy{.from_logits = true}, opt,
        data::in_memory<shape<S, S, 1>, sparse_labels>(tr.x, tr.y).batch(32), epochs{2});
    return mm;
  }();
  return m;
}

// A float-between model holding qm's weights (the same variables, in the same order).
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

}  // namespace

TEST_CASE("int8 max_pool_s8: every path equals the scalar loops bit for bit, padding never takes part") {
  const int ran = ctnn::test::for_each_arch("int8 max_pool_s8", []<class Arch>(Arch, const char*) {
    for (std::size_t batch : {1, 3}) {
      // channels: below a vector (1, 8, 13), one AVX2 vector (32), one AVX-512 vector (64), and tails
      check_pool<Arch, 6, 6, 1, 2, 2, padding::valid>(batch, 1);
      check_pool<Arch, 5, 7, 8, 2, 2, padding::valid>(batch, 2);
      check_pool<Arch, 5, 5, 13, 3, 1, padding::same>(batch, 3);
      check_pool<Arch, 4, 4, 32, 2, 2, padding::valid>(batch, 4);
      check_pool<Arch, 7, 5, 45, 3, 2, padding::same>(batch, 5);
      check_pool<Arch, 4, 6, 64, 2, 1, padding::valid>(batch, 6);
      check_pool<Arch, 5, 5, 100, 2, 2, padding::same>(batch, 7);
      check_pool<Arch, 3, 3, 130, 3, 3, padding::valid>(batch, 8);
      check_pool<Arch, 3, 3, 57, 2, 3, padding::same>(batch, 9);
      // every value negative: a padded position taken as 0 (or as the zero point) would show
      check_pool<Arch, 5, 5, 45, 3, 2, padding::same>(batch, 10, -128, -1);
      check_pool<Arch, 5, 5, 8, 2, 2, padding::same>(batch, 11, -128, -100);
      // the extremes: all -128, all 127
      check_pool<Arch, 4, 4, 70, 2, 2, padding::same>(batch, 12, -128, -128);
      check_pool<Arch, 4, 4, 70, 2, 2, padding::same>(batch, 13, 127, 127);
    }
  });
  CHECK(ran >= 1);
}

TEST_CASE("int8 average_pool_s8: TFLite's rounded mean, every path equal to the scalar loops bit for bit") {
  // the rounding by hand: half away from zero, for positive and negative sums (TFLite's
  // (sum +- n/2) / n with C++'s truncating division)
  CHECK(int(i8::rounded_mean(2, 4)) == 1);     // 0.5
  CHECK(int(i8::rounded_mean(-2, 4)) == -1);   // -0.5
  CHECK(int(i8::rounded_mean(6, 4)) == 2);     // 1.5
  CHECK(int(i8::rounded_mean(-6, 4)) == -2);   // -1.5
  CHECK(int(i8::rounded_mean(-5, 4)) == -1);   // -1.25
  CHECK(int(i8::rounded_mean(-7, 4)) == -2);   // -1.75
  CHECK(int(i8::rounded_mean(1, 3)) == 0);     // 0.33
  CHECK(int(i8::rounded_mean(-4, 9)) == 0);    // -0.44
  CHECK(int(i8::rounded_mean(-5, 9)) == -1);   // -0.56
  CHECK(int(i8::rounded_mean(0, 4)) == 0);
  CHECK(int(i8::rounded_mean(-512, 4)) == -128);
  CHECK(int(i8::rounded_mean(508, 4)) == 127);
  // a 3x3 image, one channel, same padding: the corner divides by its 4 real positions, not 9
  {
    constexpr auto g = window_geometry(3, 3, 1, 1, 3, 3, 1, padding::same);
    const std::vector<std::int8_t> x{-1, -2, 5, -3, 7, 9, 2, 2, 2};
    std::vector<std::int8_t> y(9);
    i8::average_pool_s8_scalar(g, x.data(), y.data(), 1);
    CHECK(int(y[0]) == 0);   // (-1 - 2 - 3 + 7) / 4 = 0.25
    CHECK(int(y[1]) == 3);   // (-1 - 2 + 5 - 3 + 7 + 9) / 6 = 2.5: away from zero
    CHECK(int(y[4]) == 2);   // 21 / 9 = 2.33
    CHECK(int(y[6]) == 2);   // (-3 + 7 + 2 + 2) / 4 = 2
  }
  const int ran = ctnn::test::for_each_arch("int8 average_pool_s8", []<class Arch>(Arch, const char*) {
    for (std::size_t batch : {1, 3}) {
      // channels: below a vector (1, 5, 13), one AVX2 step (8, 32), one AVX-512 step (64), and tails
      check_average<Arch, 6, 6, 1, 2, 2, padding::valid>(batch, 1);
      check_average<Arch, 5, 7, 8, 2, 2, padding::valid>(batch, 2);
      check_average<Arch, 5, 5, 13, 3, 1, padding::same>(batch, 3);
      check_average<Arch, 4, 4, 32, 2, 2, padding::valid>(batch, 4);
      check_average<Arch, 7, 5, 45, 3, 2, padding::same>(batch, 5);
      check_average<Arch, 4, 6, 64, 2, 1, padding::valid>(batch, 6);
      check_average<Arch, 5, 5, 100, 2, 2, padding::same>(batch, 7);
      check_average<Arch, 3, 3, 130, 3, 3, padding::valid>(batch, 8);
      check_average<Arch, 3, 3, 57, 2, 3, padding::same>(batch, 9);
      check_average<Arch, 4, 4, 5, 4, 1, padding::same>(batch, 10);
      // every value negative (the rounding of negative sums), small values (many ties at +-0.5)
      check_average<Arch, 5, 5, 45, 3, 2, padding::same>(batch, 11, -128, -1);
      check_average<Arch, 6, 6, 40, 2, 2, padding::same>(batch, 12, -2, 2);
      check_average<Arch, 6, 6, 72, 2, 1, padding::same>(batch, 13, -3, 1);
      // the extremes: all -128, all 127; a 16x16 window (256 values: sums down to -32768)
      check_average<Arch, 4, 4, 70, 2, 2, padding::same>(batch, 14, -128, -128);
      check_average<Arch, 4, 4, 70, 2, 2, padding::same>(batch, 15, 127, 127);
      check_average<Arch, 16, 16, 33, 16, 16, padding::valid>(batch, 16, -128, -128);
      check_average<Arch, 17, 16, 9, 16, 1, padding::valid>(batch, 17);
    }
  });
  CHECK(ran >= 1);
}

TEST_CASE("int8 max and average pooling over the thread pool: the same bits with 1, 2 and 3 threads") {
  // 9 samples of 6x6x64 (2304 values each: 20736 in all, above sample_split_min, so 2 and 3
  // threads split the batch), same padding with overlapping windows, and a batch of 1 (one range)
  constexpr auto g = window_geometry(6, 6, 64, 64, 3, 3, 2, padding::same);
  static_assert(9 * g.in_size() >= kernels::cpu::sample_split_min);
  const std::size_t before = kernels::cpu::threads();
  std::vector<std::int8_t> x(9 * g.in_size());
  rng r(21);
  for (auto& v : x) v = std::int8_t(std::lround(r.uniform(-128.49, 127.49)));
  for (std::size_t batch : {1, 9}) {
    const auto want_max = pool_reference(g, x, batch), want_avg = average_reference(g, x, batch);
    for (std::size_t t : {1, 2, 3}) {
      kernels::cpu::set_threads(t);
      INFO(t << " threads, batch " << batch);
      std::vector<std::int8_t> ym(want_max.size(), 55), ya(want_avg.size(), 55);
      i8::max_pool_s8<g>(x.data(), ym.data(), batch);
      i8::average_pool_s8<g>(x.data(), ya.data(), batch);
      CHECK(ym == want_max);
      CHECK(ya == want_avg);
    }
  }
  kernels::cpu::set_threads(before);
}

TEST_CASE("quantized_t of a CNN: max_pool2d and flatten between int8 layers run on int8, int8 between all layers") {
  static_assert(std::is_same_v<q, sequential<input<S, S, 1>,
                                             quantized_conv2d<8, 3, 3, 1, padding::same, relu, fi,
                                                              quantization::int8_io<false, true>, max_pool2d<2>>,
                                             quantization::fused_pool<max_pool2d<2>, true>,
                                             quantized_conv2d<16, 3, 3, 1, padding::valid, relu, fi,
                                                              quantization::int8_io<true, true>, max_pool2d<2>>,
                                             quantization::fused_pool<max_pool2d<2>, true>, quantization::int8_pass<flatten>,
                                             quantized_dense<64, classes, identity, fi, quantization::int8_io<true, false>>>>);
  // float between them: every layer as the float-pool model had it
  static_assert(std::is_same_v<f, sequential<input<S, S, 1>, quantized_conv2d<8, 3, 3, 1, padding::same, relu>,
                                             max_pool2d<2>, quantized_conv2d<16, 3, 3, 1, padding::valid, relu>,
                                             max_pool2d<2>, flatten, quantized_dense<64, classes>>>);
  // the same names, spec string and weights files
  CHECK(q::spec_string() == f::spec_string());
  // the plan's element types: int8 from the first layer's output to the last layer's input
  using L = decltype(make_model<q>(1))::layers;
  using P = precision::float32;
  static_assert(std::is_same_v<ctnn::detail::output_element_of<std::tuple_element_t<0, L>, P>::type, std::int8_t>);
  static_assert(std::is_same_v<ctnn::detail::input_element_of<std::tuple_element_t<1, L>, P>::type, std::int8_t>);
  static_assert(std::is_same_v<ctnn::detail::output_element_of<std::tuple_element_t<1, L>, P>::type, std::int8_t>);
  static_assert(std::is_same_v<ctnn::detail::output_element_of<std::tuple_element_t<2, L>, P>::type, std::int8_t>);
  static_assert(std::is_same_v<ctnn::detail::output_element_of<std::tuple_element_t<3, L>, P>::type, std::int8_t>);
  static_assert(std::is_same_v<ctnn::detail::output_element_of<std::tuple_element_t<4, L>, P>::type, std::int8_t>);
  static_assert(std::is_same_v<ctnn::detail::input_element_of<std::tuple_element_t<5, L>, P>::type, std::int8_t>);
  static_assert(std::is_same_v<ctnn::detail::output_element_of<std::tuple_element_t<5, L>, P>::type, float>);
  // one sample's activation blocks (64-byte aligned; the pools fused into the convs' stores and
  // flatten have none: the convs' blocks hold the pooled values): 1152 + 256 int8 values and 3
  // floats, against 4 bytes a value and the pools' own blocks
  static_assert(q::plan<>::bytes(role::activation, 1) == 1152 + 256 + 64);
  static_assert(f::plan<>::bytes(role::activation, 1) == 4 * 1152 + 4 * 288 + 4 * 256 + 4 * 64 + 64);
  static_assert(q::state_bytes == f::state_bytes);
  // the int8 pool is a max_pool2d to the tools (kind, spec::kind, window), with no buffers
  using pool = std::tuple_element_t<1, L>;
  static_assert(std::is_same_v<pool::kind, layer_kind::pool2d> &&
                std::is_same_v<pool::spec::kind, ctnn::detail::max_pool_kind> && pool::spec::pool_size == 2);
  static_assert(pool::buffers.size() == 0 && pool::cache_per_sample == 0);
  // no pool between full-integer layers: the pool stays float (before the first one; after the
  // last, right after a conv, it is taken in the conv's store, on float outputs)
  using edges = sequential<input<S, S, 1>, max_pool2d<2>, conv2d<4, 3, 3>, max_pool2d<2>, flatten>;
  static_assert(std::is_same_v<quantized_t<edges>,
                               sequential<input<S, S, 1>, max_pool2d<2>,
                                          quantized_conv2d<4, 3, 3, 1, padding::valid, identity, fi,
                                                           quantization::float_io, max_pool2d<2>>,
                                          quantization::fused_pool<max_pool2d<2>, false>, flatten>>);
  // dynamic range: float between all layers
  static_assert(std::is_same_v<quantized_t<cnn, quantization::dynamic_range>,
                               quantization::float_between_t<quantized_t<cnn, quantization::dynamic_range>>>);
}

TEST_CASE("int8 CNN across max pooling: bit for bit the float-pool model, saturation counted per pooled value, any batch") {
  auto& m = trained_cnn();
  const auto cal = make_images(100, 5), te = make_images(64, 6);
  auto qm = quantize_full_integer(m, cal.x.data(), cal.y.size());
  static_assert(std::is_same_v<decltype(qm)::network, q>);
  auto fm = float_between_copy(qm);
  std::vector<float> wild = te.x;  // some values beyond the calibrated range: saturation counted
  for (std::size_t i = 0; i < wild.size(); i += 7) wild[i] *= 4;
  const auto want = fm.predict(wild.data(), 64, 64);
  for (std::size_t n : {1, 7, 64}) {
    INFO("batch " << n);
    quantization::reset_saturation(qm);
    quantization::reset_saturation(fm);
    const auto got = qm.predict(wild.data(), 64, n);  // one pass each: the counts add up
    CHECK(got == fm.predict(wild.data(), 64, n));
    CHECK(got == want);
    const auto sq = quantization::saturation(qm), sf = quantization::saturation(fm);
    REQUIRE(sq.size() == 3);
    REQUIRE(sf.size() == 3);
    for (std::size_t l = 0; l < 3; ++l) {
      CHECK(sq[l].layer == sf[l].layer);
      CHECK(sq[l].inputs == sf[l].inputs);
      // the convs count the pooled values they clamped (a max pool fused into the store: relu, so
      // each 2x2 window with a saturated output once), the dense layer every output
      CHECK(sq[l].pooled == (l < 2));
      if (l < 2) {
        CHECK(sq[l].outputs <= sf[l].outputs);
        CHECK(4 * sq[l].outputs >= sf[l].outputs);
        CHECK((sq[l].outputs > 0) == (sf[l].outputs > 0));
      } else {
        CHECK(sq[l].outputs == sf[l].outputs);
      }
    }
    CHECK(sq[0].inputs > 0);
    CHECK(sq[1].inputs == 0);  // an int8 input is never clamped (nor is the pooled float one)
    CHECK(sq[2].inputs == 0);
  }
  // the accuracy of the float model, about (the int8 model is the float-pool one)
  std::size_t ok = 0;
  const auto y = qm.predict(te.x.data(), 64);
  for (std::size_t i = 0; i < 64; ++i)
    ok += std::size_t(std::max_element(y.begin() + std::ptrdiff_t(i * classes), y.begin() + std::ptrdiff_t(i * classes + classes)) -
                      (y.begin() + std::ptrdiff_t(i * classes))) == std::size_t(te.y[i]);
  MESSAGE("int8 CNN accuracy on 64 test images: " << double(ok) / 64.0);
}

TEST_CASE("int8 CNN across max pooling: weights files shared with the float-pool model, a requantizing file refused") {
  auto& m = trained_cnn();
  const auto cal = make_images(100, 5), te = make_images(20, 7);
  auto qm = quantize_full_integer(m, cal.x.data(), cal.y.size());
  const auto dir = std::filesystem::temp_directory_path() / "ctnn_test_int8_pool";
  std::filesystem::create_directories(dir);
  io::save_weights(qm, dir / "q.weights");
  auto back = make_model<q>(9);
  auto fback = make_model<f>(9);
  io::load_weights(back, dir / "q.weights");
  io::load_weights(fback, dir / "q.weights");
  CHECK(back.predict(te.x.data(), 20) == qm.predict(te.x.data(), 20));
  CHECK(fback.predict(te.x.data(), 20) == qm.predict(te.x.data(), 20));
  // a float-between file whose second conv quantizes its input with other parameters than the
  // first conv's output ones: the int8 model cannot read it (one tensor across the pool), and says
  // which layer's output it reads; the float-between model can
  auto fm = float_between_copy(qm);
  fm.for_each_variable([&](const variable_ref& v) {
    if (v.layer == 2 && v.name == "input_scale") *reinterpret_cast<float*>(v.data) *= 1.5f;
  });
  io::save_weights(fm, dir / "requantizing.weights");
  CHECK_THROWS_WITH_AS(io::load_weights(back, dir / "requantizing.weights"),
                       doctest::Contains("layer 3 state 'input_scale'"), io::weights_error);
  CHECK_THROWS_WITH_AS(io::load_weights(back, dir / "requantizing.weights"),
                       doctest::Contains("but this layer reads layer 1's int8 output"), io::weights_error);
  CHECK(back.predict(te.x.data(), 20) == qm.predict(te.x.data(), 20));  // unchanged
  io::load_weights(fback, dir / "requantizing.weights");
  std::filesystem::remove_all(dir);
}

TEST_CASE("int8 max pooling and flatten: inference only") {
  using L = decltype(make_model<q>(1))::layers;
  using pool = std::tuple_element_t<1, L>;
  using flat = std::tuple_element_t<4, L>;
  CHECK_THROWS_WITH_AS(pool::backward({}, nullptr, nullptr, nullptr, nullptr, {}),
                       doctest::Contains("max_pool2d<2> on int8 values runs inference only"), std::logic_error);
  CHECK_THROWS_WITH_AS(flat::backward({}, nullptr, nullptr, nullptr, nullptr, {}),
                       doctest::Contains("flatten on int8 values runs inference only"), std::logic_error);
  // training the converted model is refused by its first layer, as before
  auto qm = make_model<q>(1);
  std::vector<float> x(S * S, 0.5f);
  std::vector<std::int32_t> y{1};
  adam opt{0.01};
  CHECK_THROWS_AS(fit(qm, sparse_categorical_crossentropy{.from_logits = true}, opt,
                      data::in_memory<shape<S, S, 1>, sparse_labels>(x, y).batch(1), epochs{1}),
                  std::logic_error);
}

namespace {
// CNNs with average pooling between full-integer layers. acnn: 3x3 windows, valid (every mean of 9
// values: never a tie at .5); 12x12x1 -> 12x12x8 -> pool 4x4x8 -> 2x2x16 -> 64 -> 3.
using acnn = sequential<input<S, S, 1>, conv2d<8, 3, 3, 1, padding::same, relu>, average_pool2d<3>,
                        conv2d<16, 3, 3, 1, padding::valid, relu>, flatten, dense<classes>>;
// tcnn: 2x2 windows (means of 4, 2 or 1 values: ties), same padding at stride 1, then valid;
// 12x12x1 -> 12x12x8 -> pool 12x12x8 -> 5x5x8 (stride 2) -> pool 2x2x8 -> 32 -> 3.
using tcnn = sequential<input<S, S, 1>, conv2d<8, 3, 3, 1, padding::same, relu>, average_pool2d<2, 1, padding::same>,
                        conv2d<8, 3, 3, 2, padding::valid, relu>, average_pool2d<2>, flatten, dense<classes>>;

template <class Net>
auto& trained_net() {
  static auto m = [] {
    auto mm = make_model<Net>(4);
    const auto tr = make_images(300, 1);
    adam opt{0.01};
    fit(mm, sparse_categorical_crossentropy{.from_logits = true}, opt,
        data::in_memory<shape<S, S, 1>, sparse_labels>(tr.x, tr.y).batch(32), epochs{2});
    return mm;
  }();
  return m;
}
}  // namespace

TEST_CASE("quantized_t of a CNN with average_pool2d: the pools between int8 layers run on int8") {
  using qa = quantized_t<acnn>;
  static_assert(std::is_same_v<qa, sequential<input<S, S, 1>,
                                              quantized_conv2d<8, 3, 3, 1, padding::same, relu, fi, quantization::int8_io<false, true>>,
                                              quantization::int8_pass<average_pool2d<3>>,
                                              quantized_conv2d<16, 3, 3, 1, padding::valid, relu, fi, quantization::int8_io<true, true>>,
                                              quantization::int8_pass<flatten>,
                                              quantized_dense<64, classes, identity, fi, quantization::int8_io<true, false>>>>);
  static_assert(std::is_same_v<quantization::float_between_t<qa>,
                               sequential<input<S, S, 1>, quantized_conv2d<8, 3, 3, 1, padding::same, relu>, average_pool2d<3>,
                                          quantized_conv2d<16, 3, 3, 1, padding::valid, relu>, flatten, quantized_dense<64, classes>>>);
  using qt = quantized_t<tcnn>;
  static_assert(std::is_same_v<std::tuple_element_t<1, decltype(make_model<qt>(1))::layers>::spec,
                               quantization::int8_pass<average_pool2d<2, 1, padding::same>>>);
  static_assert(std::is_same_v<std::tuple_element_t<3, decltype(make_model<qt>(1))::layers>::spec,
                               quantization::int8_pass<average_pool2d<2>>>);
  CHECK(qa::spec_string() == quantization::float_between_t<qa>::spec_string());
  // the int8 pool is an average_pool2d to the tools, with no buffers; int8 in, int8 out
  using L = decltype(make_model<qa>(1))::layers;
  using pool = std::tuple_element_t<1, L>;
  static_assert(std::is_same_v<pool::kind, layer_kind::pool2d> &&
                std::is_same_v<pool::spec::kind, ctnn::detail::average_pool_kind> && pool::spec::pool_size == 3);
  static_assert(pool::buffers.size() == 0 && std::is_same_v<pool::input_element, std::int8_t> &&
                std::is_same_v<pool::output_element, std::int8_t>);
  CHECK(pool::name() == "average_pool2d<3>");
  // an average pooling before the first full-integer layer stays float; dynamic range: float everywhere
  using edges = sequential<input<S, S, 1>, average_pool2d<2>, conv2d<4, 3, 3>, average_pool2d<2>, flatten>;
  static_assert(std::is_same_v<quantized_t<edges>, sequential<input<S, S, 1>, average_pool2d<2>,
                                                              quantized_conv2d<4, 3, 3>, average_pool2d<2>, flatten>>);
  static_assert(std::is_same_v<quantized_t<tcnn, quantization::dynamic_range>,
                               quantization::float_between_t<quantized_t<tcnn, quantization::dynamic_range>>>);
  CHECK_THROWS_WITH_AS(pool::backward({}, nullptr, nullptr, nullptr, nullptr, {}),
                       doctest::Contains("average_pool2d<3> on int8 values runs inference only"), std::logic_error);
}

TEST_CASE("int8 CNN across average pooling without ties: bit for bit the float-pool model, any batch, weights files shared") {
  auto& m = trained_net<acnn>();
  const auto cal = make_images(100, 5), te = make_images(64, 6);
  auto qm = quantize_full_integer(m, cal.x.data(), cal.y.size());
  static_assert(std::is_same_v<decltype(qm)::network, quantized_t<acnn>>);
  auto fm = float_between_copy(qm);
  std::vector<float> wild = te.x;
  for (std::size_t i = 0; i < wild.size(); i += 7) wild[i] *= 4;
  // every mean of 9 int8 values is at least 1/18 from a .5 tie: the float-between model (dequantize,
  // float mean, quantize) rounds it the same way
  const auto want = fm.predict(wild.data(), 64, 64);
  for (std::size_t n : {1, 7, 64}) {
    INFO("batch " << n);
    quantization::reset_saturation(qm);
    quantization::reset_saturation(fm);
    const auto got = qm.predict(wild.data(), 64, n);
    CHECK(got == fm.predict(wild.data(), 64, n));
    CHECK(got == want);
    const auto sq = quantization::saturation(qm), sf = quantization::saturation(fm);
    REQUIRE(sq.size() == 3);
    REQUIRE(sf.size() == 3);
    for (std::size_t l = 0; l < 3; ++l) {
      CHECK(sq[l].inputs == sf[l].inputs);
      CHECK(sq[l].outputs == sf[l].outputs);
    }
    CHECK(sq[1].inputs == 0);
  }
  // a weights file of the chained model loads into both forms
  const auto dir = std::filesystem::temp_directory_path() / "ctnn_test_int8_average_pool";
  std::filesystem::create_directories(dir);
  io::save_weights(qm, dir / "q.weights");
  auto back = make_model<quantized_t<acnn>>(9);
  auto fback = make_model<quantization::float_between_t<quantized_t<acnn>>>(9);
  io::load_weights(back, dir / "q.weights");
  io::load_weights(fback, dir / "q.weights");
  CHECK(back.predict(te.x.data(), 20) == qm.predict(te.x.data(), 20));
  CHECK(fback.predict(te.x.data(), 20) == qm.predict(te.x.data(), 20));
  std::filesystem::remove_all(dir);
}

TEST_CASE("int8 CNN across average pooling with ties: the same at any batch, near the float-pool model") {
  auto& m = trained_net<tcnn>();
  const auto cal = make_images(100, 5), te = make_images(64, 6);
  auto qm = quantize_full_integer(m, cal.x.data(), cal.y.size());
  auto fm = float_between_copy(qm);
  const auto want = qm.predict(te.x.data(), 64, 64);
  for (std::size_t n : {1, 7}) CHECK(qm.predict(te.x.data(), 64, n) == want);
  // the chained model rounds a mean at a .5 tie away from zero (TFLite); the float-between model
  // dequantizes, averages in float and quantizes (q - z rounded away from zero, or float error
  // deciding): one input step apart at some ties, which the layers after carry on
  float out_scale = 0;
  qm.for_each_variable([&](const variable_ref& v) {
    if (v.layer == 5 && v.name == "output_scale") std::memcpy(&out_scale, v.data, 4);
  });
  REQUIRE(out_scale > 0);
  const auto f = fm.predict(te.x.data(), 64, 64);
  double worst = 0;
  std::size_t differ = 0;
  for (std::size_t i = 0; i < f.size(); ++i) {
    const double steps = std::abs(double(f[i]) - double(want[i])) / double(out_scale);
    worst = std::max(worst, steps);
    differ += steps > 0.5;
  }
  MESSAGE("int8 CNN with tied averages against its float-pool model: " << differ << " of " << f.size()
          << " outputs differ, at most " << worst << " output steps");
  CHECK(worst <= 4.01);
}

TEST_CASE("quantization-aware training of a CNN with average pooling converts to the int8-chained type") {
  auto q = quantize_model(trained_net<acnn>());
  const auto tr = make_images(64, 8), te = make_images(16, 9);
  adam opt{0.001};
  fit(q, sparse_categorical_crossentropy{.from_logits = true}, opt,
      data::in_memory<shape<S, S, 1>, sparse_labels>(tr.x, tr.y).batch(16), epochs{1});
  auto c = convert_qat(q);
  static_assert(std::is_same_v<decltype(c)::network, quantized_t<acnn>>);
  // the learned ranges chain: the pool's int8 input and output share the first conv's output
  // parameters, which are the second conv's input ones (convert checks it)
  const auto y = c.predict(te.x.data(), 16);
  CHECK(c.predict(te.x.data(), 16, 1) == y);
  auto f = float_between_copy(c);
  CHECK(f.predict(te.x.data(), 16) == y);  // 3x3 windows: no tie
}

// ---- global average pooling on int8 values (quantization::int8_pass<global_average_pool>) ----
namespace {
// TFLite's int8 AVERAGE_POOL_2D over the whole spatial extent written another way: each channel's
// sum over the P positions in 64 bits, |mean| rounded half up, the sum's sign
std::vector<std::int8_t> global_average_reference(std::size_t P, std::size_t C, const std::vector<std::int8_t>& x,
                                                  std::size_t batch) {
  std::vector<std::int8_t> y(batch * C);
  for (std::size_t n = 0; n < batch; ++n)
    for (std::size_t c = 0; c < C; ++c) {
      std::int64_t sum = 0;
      for (std::size_t p = 0; p < P; ++p) sum += x[(n * P + p) * C + c];
      const std::int64_t a = sum < 0 ? -sum : sum, q = (2 * a + std::int64_t(P)) / (2 * std::int64_t(P));
      y[n * C + c] = std::int8_t(std::clamp<std::int64_t>(sum < 0 ? -q : q, -128, 127));
    }
  return y;
}
template <class Arch, std::size_t P, std::size_t C>
void check_global_average(std::size_t batch, std::uint64_t seed, int lo = -128, int hi = 127) {
  std::vector<std::int8_t> x(batch * P * C);
  rng r(seed);
  for (auto& v : x) v = std::int8_t(std::clamp<long>(std::lround(r.uniform(lo - 0.49, hi + 0.49)), lo, hi));
  const auto want = global_average_reference(P, C, x, batch);
  std::vector<std::int8_t> got(want.size(), 55), scalar(want.size(), 55);
  i8::global_average_pool_s8<P, C, Arch>(x.data(), got.data(), batch);
  i8::global_average_pool_s8_scalar(P, C, x.data(), scalar.data(), batch);
  INFO(P << " positions x " << C << " channels, batch " << batch << ", values [" << lo << ", " << hi << "]");
  CHECK(scalar == want);
  CHECK(got == want);
}

// 12x12x1 -> 12x12x8 -> pool 6x6x8 -> 6x6x16 -> global average 16 -> 3 (means of 36 values: ties at
// .5 where a sum is 18 mod 36)
using gcnn = sequential<input<S, S, 1>, conv2d<8, 3, 3, 1, padding::same, relu>, max_pool2d<2>,
                        conv2d<16, 3, 3, 1, padding::same, relu>, global_average_pool, dense<classes>>;
double accuracy_of(const std::vector<float>& logits, const std::vector<std::int32_t>& y) {
  std::size_t ok = 0;
  for (std::size_t i = 0; i < y.size(); ++i) {
    std::size_t best = 0;
    for (std::size_t j = 1; j < classes; ++j)
      if (logits[i * classes + j] > logits[i * classes + best]) best = j;
    ok += best == std::size_t(y[i]);
  }
  return double(ok) / double(y.size());
}
}  // namespace

TEST_CASE("int8 global_average_pool_s8: TFLite's rounded mean over every position, every path equal to the scalar loop") {
  // by hand: 2 positions, 1 channel per case, batch 4: means 0.5, -0.5, -1.5, 126.5
  {
    const std::vector<std::int8_t> x{0, 1, 0, -1, -1, -2, 126, 127};
    std::vector<std::int8_t> y(4), s(4);
    i8::global_average_pool_s8<2, 1>(x.data(), y.data(), 4);
    i8::global_average_pool_s8_scalar(2, 1, x.data(), s.data(), 4);
    CHECK(y == std::vector<std::int8_t>{1, -1, -2, 127});
    CHECK(s == y);
  }
  // 3 positions x 2 channels: channel 0 sums to 7 (2.33 -> 2), channel 1 to -128 * 3 (-128)
  {
    const std::vector<std::int8_t> x{2, -128, 2, -128, 3, -128};
    std::vector<std::int8_t> y(2);
    i8::global_average_pool_s8<3, 2>(x.data(), y.data(), 1);
    CHECK(y == std::vector<std::int8_t>{2, -128});
  }
  const int ran = ctnn::test::for_each_arch("int8 global_average_pool_s8", []<class Arch>(Arch, const char*) {
    for (std::size_t batch : {1, 3}) {
      // channels: below a vector (1, 5, 13), one AVX2 step (8, 32), one AVX-512 step (64), and tails
      check_global_average<Arch, 4, 1>(batch, 1);
      check_global_average<Arch, 9, 5>(batch, 2);
      check_global_average<Arch, 16, 8>(batch, 3);
      check_global_average<Arch, 25, 13>(batch, 4);
      check_global_average<Arch, 36, 32>(batch, 5);
      check_global_average<Arch, 49, 45>(batch, 6);
      check_global_average<Arch, 7, 64>(batch, 7);
      check_global_average<Arch, 64, 100>(batch, 8);
      check_global_average<Arch, 3, 130>(batch, 9);
      // negative values, small values (ties at +-0.5), the extremes, 1024 positions (sums to -131072)
      check_global_average<Arch, 36, 45>(batch, 10, -128, -1);
      check_global_average<Arch, 4, 40>(batch, 11, -2, 2);
      check_global_average<Arch, 16, 72>(batch, 12, -3, 1);
      check_global_average<Arch, 16, 70>(batch, 13, -128, -128);
      check_global_average<Arch, 16, 70>(batch, 14, 127, 127);
      check_global_average<Arch, 1024, 9>(batch, 15, -128, -128);
      check_global_average<Arch, 1024, 33>(batch, 16);
    }
  });
  CHECK(ran >= 1);
}

TEST_CASE("quantized_t of a CNN with global_average_pool: int8 between the convolution and the dense layer") {
  using qg = quantized_t<gcnn>;
  static_assert(std::is_same_v<qg, sequential<input<S, S, 1>,
                                              quantized_conv2d<8, 3, 3, 1, padding::same, relu, fi, quantization::int8_io<false, true>,
                                                               max_pool2d<2>>,  // the pool in the convolution's store
                                              quantization::fused_pool<max_pool2d<2>, true>,
                                              quantized_conv2d<16, 3, 3, 1, padding::same, relu, fi, quantization::int8_io<true, true>>,
                                              quantization::int8_pass<global_average_pool>,
                                              quantized_dense<16, classes, identity, fi, quantization::int8_io<true, false>>>>);
  static_assert(std::is_same_v<quantization::float_between_t<qg>,
                               sequential<input<S, S, 1>, quantized_conv2d<8, 3, 3, 1, padding::same, relu>, max_pool2d<2>,
                                          quantized_conv2d<16, 3, 3, 1, padding::same, relu>, global_average_pool,
                                          quantized_dense<16, classes>>>);
  CHECK(qg::spec_string() == quantization::float_between_t<qg>::spec_string());
  // to the tools a global_average_pool, with no buffers; int8 in, int8 out
  using L = decltype(make_model<qg>(1))::layers;
  using pool = std::tuple_element_t<3, L>;
  static_assert(std::is_same_v<pool::kind, layer_kind::global_average_pool>);
  static_assert(pool::buffers.size() == 0 && std::is_same_v<pool::input_element, std::int8_t> &&
                std::is_same_v<pool::output_element, std::int8_t> &&
                std::is_same_v<pool::out_shape, shape<16>>);
  CHECK(pool::name() == "global_average_pool");
  // first (float input) or last (float output): stays float; dynamic range: float everywhere
  using edges = sequential<input<6, 6, 2>, global_average_pool, dense<4>>;
  static_assert(std::is_same_v<quantized_t<edges>, sequential<input<6, 6, 2>, global_average_pool, quantized_dense<2, 4>>>);
  using tail = sequential<input<6, 6, 2>, conv2d<4, 3, 3>, global_average_pool>;
  static_assert(std::is_same_v<quantized_t<tail>, sequential<input<6, 6, 2>, quantized_conv2d<4, 3, 3>, global_average_pool>>);
  static_assert(std::is_same_v<quantized_t<gcnn, quantization::dynamic_range>,
                               quantization::float_between_t<quantized_t<gcnn, quantization::dynamic_range>>>);
  CHECK_THROWS_WITH_AS(pool::backward({}, nullptr, nullptr, nullptr, nullptr, {}),
                       doctest::Contains("global_average_pool on int8 values runs inference only"), std::logic_error);
}

TEST_CASE("int8 CNN across global average pooling: the same at any batch, near the float-pool model, within the float accuracy") {
  auto& m = trained_net<gcnn>();
  const auto cal = make_images(100, 5), te = make_images(120, 6);
  const std::size_t n = te.y.size();
  auto qm = quantize_full_integer(m, cal.x.data(), cal.y.size());
  static_assert(std::is_same_v<decltype(qm)::network, quantized_t<gcnn>>);
  auto fm = float_between_copy(qm);
  const auto want = qm.predict(te.x.data(), n, 64);
  for (std::size_t b : {1, 7}) CHECK(qm.predict(te.x.data(), n, b) == want);
  // the float-between model dequantizes, averages in float and quantizes: a mean at a .5 tie may
  // round the other way (one input step of the dense layer)
  float out_scale = 0;
  qm.for_each_variable([&](const variable_ref& v) {
    if (v.layer == 4 && v.name == "output_scale") std::memcpy(&out_scale, v.data, 4);
  });
  REQUIRE(out_scale > 0);
  const auto f = fm.predict(te.x.data(), n, 64);
  double worst = 0;
  std::size_t differ = 0;
  for (std::size_t i = 0; i < f.size(); ++i) {
    const double steps = std::abs(double(f[i]) - double(want[i])) / double(out_scale);
    worst = std::max(worst, steps);
    differ += steps > 0.5;
  }
  const double af = accuracy_of(m.predict(te.x.data(), n), te.y), ai = accuracy_of(want, te.y);
  MESSAGE("int8 CNN with a global average pool: " << differ << " of " << f.size()
          << " outputs differ from its float-pool model, at most " << worst << " output steps; accuracy float " << af
          << ", int8 " << ai);
  CHECK(worst <= 4.01);
  CHECK(std::abs(ai - af) <= 0.03);
  // a weights file of the chained model loads into the float-between form (no variables for the pool)
  const auto dir = std::filesystem::temp_directory_path() / "ctnn_test_int8_global_average_pool";
  std::filesystem::create_directories(dir);
  io::save_weights(qm, dir / "q.weights");
  auto fback = make_model<quantization::float_between_t<quantized_t<gcnn>>>(9);
  io::load_weights(fback, dir / "q.weights");
  CHECK(fback.predict(te.x.data(), 20) == fm.predict(te.x.data(), 20));
  std::filesystem::remove_all(dir);
}

TEST_CASE("quantization-aware training of a CNN with global average pooling converts to the int8-chained type") {
  auto q = quantize_model(trained_net<gcnn>());
  const auto tr = make_images(64, 8), te = make_images(16, 9);
  adam opt{0.001};
  fit(q, sparse_categorical_crossentropy{.from_logits = true}, opt,
      data::in_memory<shape<S, S, 1>, sparse_labels>(tr.x, tr.y).batch(16), epochs{1});
  auto c = convert_qat(q);
  static_assert(std::is_same_v<decltype(c)::network, quantized_t<gcnn>>);
  const auto y = c.predict(te.x.data(), 16);
  CHECK(c.predict(te.x.data(), 16, 1) == y);
}
