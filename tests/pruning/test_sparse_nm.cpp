// layers/sparse_dense_nm.hpp, backends/cpu/sparse_nm.hpp: the N:M-packed
// layout (layout::nm<Nk, M>: values and 2-bit indices for 2:4) against a
// dense product of the masked kernel, on every architecture and batch path,
// its pack contract and its compile-time sizes.
#include <doctest/doctest.h>

#include <ctnn/ctnn.hpp>
#include <ctnn/pruning.hpp>
#include <ctnn/layers/sparse_dense_nm.hpp>

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <tuple>
#include <type_traits>
#include <vector>

#include "gradcheck/gradcheck.hpp"
#include "kernels/archs.hpp"
#include "pruning/sparse_common.hpp"

using namespace ctnn;
using namespace sparse_test;

namespace {
using nm_net = sequential<input<784>, sparse_dense_nm<784, 256, 2, 4, relu>, sparse_dense_nm<256, 128, 2, 4, relu>, dense<10>>;

// a random Nk:M mask (some groups keep fewer, when `short_groups`)
template <std::size_t Nk, std::size_t M>
std::vector<std::uint8_t> nm_mask(std::size_t K, std::size_t N, rng& g, bool short_groups) {
  std::vector<std::uint8_t> keep(K * N, 0);
  for (std::size_t j = 0; j < N; ++j)
    for (std::size_t gr = 0; gr < K / M; ++gr) {
      std::size_t want = short_groups && g.uniform() < 0.3 ? std::size_t(g.uniform() * Nk) : Nk, c = 0;
      while (c < want) {
        const std::size_t i = std::min(std::size_t(g.uniform() * M), M - 1);
        if (!keep[(gr * M + i) * N + j]) keep[(gr * M + i) * N + j] = 1, ++c;
      }
    }
  return keep;
}
}  // namespace

// sizes at compile time: values K N Nk / M, indices 2 bits each for 2:4
using nm_bound = sparse_dense_nm<784, 256, 2, 4, relu>::bind<shape<784>, float, cpu<>>;
static_assert(std::is_same_v<layout::nm<2, 4>::layer<784, 256, 100352, relu>, sparse_dense_nm<784, 256, 2, 4, relu>>);
static_assert(nm_bound::NNZ == 784 * 256 / 2);
static_assert(nm_bound::parameter_count == 784 * 256 / 2 + 256);
static_assert(nm_bound::index_bytes == 784 * 256 / 2 * 2 / 8);
static_assert(kernels::cpu::nm::meta_bytes(8, 3, 1, 8) == 2);  // 3 weights of 3 bits: 9 bits
static_assert(nm_net::parameter_count == 100352 + 256 + 16384 + 128 + 1280 + 10);
static_assert(nm_net::memory_plan(1).metadata == align_bytes(100352 / 4) + align_bytes(16384 / 4));
static_assert(nm_net::memory_plan(1).parameters ==
              align_bytes(4 * (100352 + 256)) + align_bytes(4 * (16384 + 128)) + align_bytes(4 * 1290));
// 2:4 stores 2.125 K N + 4 N bytes against dense's 4 K N + 4 N
static_assert(nm_net::memory_plan(1).parameters + nm_net::memory_plan(1).metadata <
              0.55 * double(sequential<input<784>, dense<256>, dense<128>, dense<10>>::memory_plan(1).parameters));

TEST_CASE("nm kernels: forward equals the masked dense product on every architecture and batch path") {
  auto run = [](auto arch, const char* name) {
    using Arch = decltype(arch);
    auto one = [&]<std::size_t K, std::size_t N, std::size_t Nk, std::size_t M>(std::size_t batch, bool relu, bool short_groups) {
      INFO(name << " K=" << K << " N=" << N << " " << Nk << ":" << M << " batch=" << batch << " relu=" << relu
                << " short groups=" << short_groups);
      rng g(K * 7 + N * 3 + batch + Nk);
      std::vector<float> w(K * N), x(batch * K), bias(N);
      const auto keep = nm_mask<Nk, M>(K, N, g, short_groups);
      fill_uniform(w, g);
      fill_uniform(x, g);
      fill_uniform(bias, g);
      std::vector<float> values(kernels::cpu::nm::capacity(K, N, Nk, M)), scratch((K + N) * batch);
      std::vector<std::uint8_t> meta(kernels::cpu::nm::meta_bytes(K, N, Nk, M));
      const std::size_t kept = kernels::cpu::nm::pack<Nk, M>(w.data(), keep.data(), K, N, values.data(), meta.data());
      CHECK(kept == std::size_t(std::count(keep.begin(), keep.end(), 1)));
      const auto ref = masked_dense(x, w, keep, bias, batch, K, N, relu);
      std::vector<float> y(batch * N), yr(batch * N);
      kernels::cpu::nm::forward<K, N, Nk, M, Arch>(x.data(), values.data(), meta.data(), bias.data(), y.data(), batch,
                                                   relu, scratch.data());
      kernels::cpu::nm::forward_reference<Nk, M>(x.data(), values.data(), meta.data(), bias.data(), yr.data(), batch, K,
                                                 N, relu);
      // without scratch (a layer that decodes at every batch declares no "transposed" cache): the rows paths
      std::vector<float> yn(batch * N, 7.0f);
      kernels::cpu::nm::forward<K, N, Nk, M, Arch>(x.data(), values.data(), meta.data(), bias.data(), yn.data(), batch,
                                                   relu, static_cast<float*>(nullptr));
      for (std::size_t i = 0; i < y.size(); ++i) {
        CHECK(y[i] == doctest::Approx(ref[i]).epsilon(1e-5).scale(1.0));
        CHECK(yr[i] == doctest::Approx(ref[i]).epsilon(1e-5).scale(1.0));
        CHECK(yn[i] == doctest::Approx(ref[i]).epsilon(1e-5).scale(1.0));
      }
    };
    for (std::size_t batch : {1, 2, 3, 4, 5, 8, 16, 17, 31, 64, 100})
      for (bool short_groups : {false, true}) {
        one.template operator()<4, 1, 2, 4>(batch, false, short_groups);
        one.template operator()<8, 17, 2, 4>(batch, true, short_groups);
        one.template operator()<36, 33, 2, 4>(batch, false, short_groups);   // one block of 32 inputs and a tail
        one.template operator()<64, 40, 2, 4>(batch, true, short_groups);    // whole blocks
        one.template operator()<100, 7, 2, 4>(batch, true, short_groups);    // 3 blocks, tail of 4
        one.template operator()<28, 5, 2, 4>(batch, true, short_groups);     // AVX2: one block of 16 inputs, tail of 12
        one.template operator()<60, 9, 1, 4>(batch, false, short_groups);
        one.template operator()<48, 5, 3, 8>(batch, true, short_groups);     // 3-bit codes across bytes
        one.template operator()<30, 6, 1, 2>(batch, false, short_groups);
      }
    one.template operator()<784, 20, 2, 4>(1, true, false);
    one.template operator()<784, 20, 2, 4>(64, true, false);
  };
  CHECK(test::for_each_arch("nm forward", run) >= 1);
}

TEST_CASE("nm pack: a group keeping more than Nk throws, more than the capacity returns the count and writes nothing") {
  constexpr std::size_t K = 8, N = 3;
  std::vector<float> w(K * N, 1.0f);
  std::vector<std::uint8_t> keep(K * N, 0);
  keep[(0 * 4 + 0) * N + 1] = keep[(0 * 4 + 1) * N + 1] = keep[(0 * 4 + 3) * N + 1] = 1;  // unit 1: 3 of inputs 0..3
  std::vector<float> values(kernels::cpu::nm::capacity(K, N, 2, 4) + 4, -7.0f);
  std::vector<std::uint8_t> meta(kernels::cpu::nm::meta_bytes(K, N, 2, 4) + 4, 0xAB);
  auto pack24 = [&] { return kernels::cpu::nm::pack<2, 4>(w.data(), keep.data(), K, N, values.data(), meta.data()); };
  CHECK_THROWS_WITH_AS(pack24(),
                       "nm::pack: unit 1 keeps 3 of the inputs 0..3, more than 2 of 4", std::invalid_argument);
  std::fill(keep.begin(), keep.end(), 1);  // 24 kept, capacity 12
  CHECK(pack24() == K * N);
  CHECK(std::all_of(values.begin(), values.end(), [](float v) { return v == -7.0f; }));
  CHECK(std::all_of(meta.begin(), meta.end(), [](std::uint8_t v) { return v == 0xAB; }));
  // a proper 2:4 mask writes exactly capacity values and meta_bytes bytes
  std::fill(keep.begin(), keep.end(), 0);
  for (std::size_t j = 0; j < N; ++j)
    for (std::size_t g = 0; g < K / 4; ++g) keep[(g * 4 + 1) * N + j] = keep[(g * 4 + 2) * N + j] = 1;
  CHECK(pack24() == 12);
  CHECK(std::all_of(values.begin(), values.begin() + 12, [](float v) { return v == 1.0f; }));
  CHECK(std::all_of(values.begin() + 12, values.end(), [](float v) { return v == -7.0f; }));
  CHECK(meta[0] == 0b10'01'10'01);  // codes 1, 2, 1, 2, least significant first
  CHECK(meta[3] == 0xAB);
}

TEST_CASE("sparse_dense_nm: pack and forward in a model equal the dense forward of the masked kernel") {
  using net2 = sequential<input<72>, sparse_dense_nm<72, 44, 2, 4, relu>, sparse_dense_nm<44, 19, 1, 4>>;
  static_assert(net2::parameter_count == 72 * 44 / 2 + 44 + 44 * 19 / 4 + 19);
  auto m = make_model<net2>(5);
  using L0 = std::tuple_element_t<0, decltype(m)::layers>;
  using L1 = std::tuple_element_t<1, decltype(m)::layers>;
  rng g(9);
  std::vector<float> w0(72 * 44), w1(44 * 19), b0(44), b1(19);
  const auto k0 = nm_mask<2, 4>(72, 44, g, false), k1 = nm_mask<1, 4>(44, 19, g, true);
  fill_uniform(w0, g);
  fill_uniform(w1, g);
  fill_uniform(b0, g);
  fill_uniform(b1, g);
  CHECK(load_layer<L0>(m, 0, w0, k0, b0) == 72 * 44 / 2);
  CHECK(load_layer<L1>(m, 1, w1, k1, b1) <= 44 * 19 / 4);
  std::vector<float> xs(70 * 72);
  fill_uniform(xs, g);
  const auto h = masked_dense(xs, w0, k0, b0, 70, 72, 44, true);
  const auto ref = masked_dense(h, w1, k1, b1, 70, 44, 19, false);
  check_predictions(m, xs, 70, ref);
}

TEST_CASE("sparse_dense_nm: the MLP of the benchmark runs at batch 1 and 64") {
  check_batch_1_as_64<nm_net>();
}

TEST_CASE("sparse_dense_nm: finite-difference gradients") {
  CHECK(gradcheck::check_layer<sparse_dense_nm<8, 20, 2, 4, ctnn::tanh>, shape<8>>() < 1e-6);
  CHECK(gradcheck::check_layer<sparse_dense_nm<6, 3, 1, 2>, shape<6>>() < 1e-6);
  gradcheck::options o;  // without decoded weights: the layout's own backward
  o.derived = false;
  CHECK(gradcheck::check_layer<sparse_dense_nm<8, 20, 2, 4, ctnn::tanh>, shape<8>>(o) < 1e-6);
}

TEST_CASE("sparse_dense_nm: a training step over decoded weights (the values' gradient without the dense dW on "
          "AVX-512 and AVX2) equals the undecoded layer's step (the layout's scalar backward)") {
  // 72 inputs: 2 blocks of 16 values a unit and 4 values past them on AVX-512; 40 units: a partial block
  using dec = sequential<input<72>, sparse_dense_nm<72, 40, 2, 4, relu>, dense<3>>;
  using und = sequential<input<72>, undecoded<sparse_dense_nm<72, 40, 2, 4, relu>>, dense<3>>;
  static_assert(dec::memory_plan(1).derived > 0 && und::memory_plan(1).derived == 0);
  auto a = make_model<dec>(3);
  auto b = make_model<und>(4);
  copy_variables(a, b);
  rng g(21);
  for (std::size_t batch : {1, 16, 21}) {
    std::vector<float> x(batch * 72), y(batch * 3);
    fill_uniform(x, g);
    fill_uniform(y, g);
    sgd opt_a{0.1}, opt_b{0.1};
    train_step sa(a, mean_squared_error{}, opt_a);
    train_step sb(b, mean_squared_error{}, opt_b);
    sa.run(x.data(), y.data(), batch, 0, 0);
    sb.run(x.data(), y.data(), batch, 0, 0);
    std::vector<float> va, vb;
    a.for_each_variable([&](const variable_ref& v) {
      if (v.kind == role::parameter) va.insert(va.end(), (const float*)v.data, (const float*)v.data + v.extent);
    });
    b.for_each_variable([&](const variable_ref& v) {
      if (v.kind == role::parameter) vb.insert(vb.end(), (const float*)v.data, (const float*)v.data + v.extent);
    });
    REQUIRE(va.size() == vb.size());
    for (std::size_t i = 0; i < va.size(); ++i) CHECK(va[i] == doctest::Approx(vb[i]).epsilon(1e-5));
    copy_variables(a, b);  // the next batch from the same weights
  }
}
