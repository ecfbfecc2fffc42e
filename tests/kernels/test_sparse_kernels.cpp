// backends/cpu/sparse_kernels.hpp: ops<cpu<>>::sparse_dense_forward / _backward
// reach each layout's sparse_kernels<Index> specialization (csc_index, rows_index)
// and compute the dense product of the same weights with zeros: y = relu?(x W + b),
// dW (at the kept positions), db and dx, against a scalar loop written here.
// Decoded weights (sparse_kernels<Index>::decode, the stripped layers' derived buffer): every
// layout that decodes gives back the kernel it packed, and the dense product over it equals the
// layout's scalar reference on every architecture; decode_batches pinned per layout and arch. The
// training side: sparse_kernels<Index>::gather (decode's inverse) and the dense backward over the
// decoded weights, gathered, against the layout's scalar backward on every architecture.
#include <doctest/doctest.h>

#include "archs.hpp"

#include <ctnn/backends/cpu/ops.hpp>
#include <ctnn/backends/cpu/sparse.hpp>
#include <ctnn/backends/cpu/sparse_nm.hpp>
#include <ctnn/backends/cpu/sparse_csc.hpp>
#include <ctnn/backends/cpu/sparse_kernels.hpp>
#include <ctnn/backends/cpu/sparse_rows.hpp>

#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <vector>

using namespace ctnn;

namespace {
constexpr std::size_t K = 5, N = 3, batch = 4;
// The kept weights of a K x N kernel, per output unit j: (input k, value).
struct kept {
  std::size_t k, j;
  float w;
};
const std::vector<kept> weights{{0, 0, 0.5f}, {3, 0, -1.25f}, {1, 1, 2.0f}, {2, 1, 0.75f}, {4, 1, -0.5f}, {4, 2, 1.5f}};

template <class Index>
void check(const Index& ix, const std::vector<float>& values) {
  static_assert(std::is_class_v<kernels::cpu::sparse_kernels<Index>>, "a layout's kernels are specialized");
  std::vector<float> x(batch * K), b{0.1f, -0.2f, 0.3f}, dz(batch * N);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = float(int(i % 7) - 3) * 0.25f;
  for (std::size_t i = 0; i < dz.size(); ++i) dz[i] = float(int(i % 5) - 2) * 0.5f;
  for (bool relu : {false, true}) {
    std::vector<float> y(batch * N), scratch(batch * kernels::cpu::csc::scratch_per_sample(K, N));
    ops<cpu<>>::sparse_dense_forward<K, N>(ix, x.data(), values.data(), b.data(), y.data(), batch, relu,
                                           scratch.data());
    for (std::size_t r = 0; r < batch; ++r)
      for (std::size_t j = 0; j < N; ++j) {
        float want = b[j];
        for (const kept& e : weights)
          if (e.j == j) want += x[r * K + e.k] * e.w;
        if (relu && want < 0) want = 0;
        CHECK(y[r * N + j] == doctest::Approx(want).epsilon(1e-6));
      }
  }
  std::vector<float> dvalues(values.size(), 9.0f), db(N, 9.0f), dx(batch * K, 9.0f);
  ops<cpu<>>::sparse_dense_backward<K, N>(ix, x.data(), dz.data(), values.data(), dvalues.data(), db.data(),
                                          dx.data(), batch);
  for (std::size_t j = 0; j < N; ++j) {
    float want = 0;
    for (std::size_t r = 0; r < batch; ++r) want += dz[r * N + j];
    CHECK(db[j] == doctest::Approx(want).epsilon(1e-6));
  }
  for (std::size_t r = 0; r < batch; ++r)
    for (std::size_t k = 0; k < K; ++k) {
      float want = 0;
      for (const kept& e : weights)
        if (e.k == k) want += dz[r * N + e.j] * e.w;
      CHECK(dx[r * K + k] == doctest::Approx(want).epsilon(1e-6));
    }
  // dvalues: the same order as values (each layout's own)
  for (std::size_t v = 0; v < values.size(); ++v) {
    const kept* e = nullptr;
    for (const kept& c : weights)
      if (c.w == values[v]) e = &c;
    REQUIRE(e != nullptr);
    float want = 0;
    for (std::size_t r = 0; r < batch; ++r) want += x[r * K + e->k] * dz[r * N + e->j];
    CHECK(dvalues[v] == doctest::Approx(want).epsilon(1e-6));
  }
}
}  // namespace

TEST_CASE("sparse_kernels: csc and rows layouts through ops<cpu<>> equal the dense product of their weights") {
  // Both layouts list each unit's values by ascending input: the order of `weights`.
  std::vector<float> values;
  std::vector<std::uint32_t> starts{0};
  std::vector<std::uint16_t> inputs;
  for (std::size_t j = 0; j < N; ++j) {
    for (const kept& e : weights)
      if (e.j == j) {
        values.push_back(e.w);
        inputs.push_back(std::uint16_t(e.k));
      }
    starts.push_back(std::uint32_t(values.size()));
  }
  check(kernels::csc_index{starts.data(), inputs.data()}, values);
  check(kernels::rows_index{starts.data(), inputs.data()}, values);
}

namespace {
using kernels::cpu::batch_range;
constexpr bool same(batch_range a, batch_range b) { return a.from == b.from && a.below == b.below; }
using avx2 = xsimd::fma3<xsimd::avx2>;
using avx512 = xsimd::avx512bw;
// Which layouts compute from decoded weights, at which batches (docs/pruning.md, "Decoded weights").
static_assert(same(kernels::cpu::decode_batches<kernels::bitmap_index, avx2>, kernels::cpu::every_batch));
static_assert(same(kernels::cpu::decode_batches<kernels::bitmap_index, avx512>, kernels::cpu::every_batch));
static_assert(same(kernels::cpu::decode_batches<kernels::nm_index<2, 4>, avx2>, kernels::cpu::every_batch));
static_assert(same(kernels::cpu::decode_batches<kernels::nm_index<2, 4>, avx512>, kernels::cpu::every_batch));
static_assert(same(kernels::cpu::decode_batches<kernels::csc_index, avx2>, {1, 2}));
static_assert(same(kernels::cpu::decode_batches<kernels::csc_index, avx512>, {1, 5}));
static_assert(same(kernels::cpu::decode_batches<kernels::rows_index, avx2>, {1, 2}));
static_assert(same(kernels::cpu::decode_batches<kernels::rows_index, avx512>, {1, 5}));
static_assert(kernels::cpu::decode_batches<kernels::block_index<1, 16>, avx512>.empty());
static_assert(kernels::cpu::decode_batches<kernels::block_index<4, 4>, avx2>.empty());

// A K x N kernel keeping about 1 weight in 3, and (NM) 2 of each group of 4 inputs.
template <std::size_t K, std::size_t N>
void kernel_and_mask(std::vector<float>& w, std::vector<std::uint8_t>& keep, bool nm) {
  w.resize(K * N);
  keep.assign(K * N, 0);
  for (std::size_t i = 0; i < K * N; ++i) w[i] = float(int(i * 7 % 13) - 6) * 0.125f;
  for (std::size_t k = 0; k < K; ++k)
    for (std::size_t j = 0; j < N; ++j) keep[k * N + j] = nm ? ((k + j) % 4 < 2) : ((k * 5 + j * 3) % 3 == 0);
}

// decode(pack(w, keep)) == w masked; then for each batch, every arch's dense product over the decoded
// weights against reference(x, y) (the layout's scalar forward).
template <std::size_t K, std::size_t N, class Index, class Reference>
void check_decoded(const Index& ix, const std::vector<float>& values, const std::vector<float>& w,
                   const std::vector<std::uint8_t>& keep, Reference&& reference) {
  std::vector<float> d(K * N, 7.0f);
  ops<cpu<>>::sparse_dense_decode<K, N>(ix, values.data(), d.data());
  for (std::size_t i = 0; i < K * N; ++i) CHECK(d[i] == (keep[i] ? w[i] : 0.0f));
  std::vector<float> b(N);
  for (std::size_t j = 0; j < N; ++j) b[j] = float(j % 5) * 0.1f - 0.2f;
  for (std::size_t batch : {1, 3, 17}) {
    std::vector<float> x(batch * K), want(batch * N);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = float(int(i % 11) - 5) * 0.25f;
    reference(x.data(), b.data(), want.data(), batch);
    auto run = [&]<class Arch>(Arch, const char*) {
      std::vector<float> y(batch * N);
      ops<cpu<Arch>>::template dense_forward<K, N>(x.data(), d.data(), b.data(), y.data(), batch);
      for (std::size_t i = 0; i < y.size(); ++i) CHECK(y[i] == doctest::Approx(want[i]).epsilon(1e-5));
    };
    CHECK(test::for_each_arch("decoded dense product", run) >= 1);
  }
  // the training side (layers/sparse_dense.hpp, backward_as): gather(decoded) gives the values back (0
  // past the kept ones); the dense dX and dW over the decoded weights, dW gathered, equal the layout's
  // scalar backward (sparse_dense_backward) on every architecture
  std::vector<float> back(values.size(), 7.0f);
  ops<cpu<>>::sparse_dense_gather<K, N>(ix, d.data(), back.data(), back.size());
  std::size_t kept_count = 0;
  for (std::size_t i = 0; i < K * N; ++i) kept_count += keep[i];
  for (std::size_t p = 0; p < values.size(); ++p) CHECK(back[p] == (p < kept_count ? values[p] : 0.0f));
  for (std::size_t batch : {1, 5, 17}) {
    std::vector<float> x(batch * K), dz(batch * N);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = float(int(i % 11) - 5) * 0.25f;
    for (std::size_t i = 0; i < dz.size(); ++i) dz[i] = float(int(i % 7) - 3) * 0.125f;
    std::vector<float> dv_want(values.size()), db_want(N), dx_want(batch * K);
    ops<cpu<>>::sparse_dense_backward<K, N>(ix, x.data(), dz.data(), values.data(), dv_want.data(), db_want.data(),
                                            dx_want.data(), batch);
    auto run = [&]<class Arch>(Arch, const char*) {
      std::vector<float> da(K * N, 7.0f), dw(K * N), dv(values.size(), 7.0f), db(N), dx(batch * K);
      ops<cpu<Arch>>::template sparse_dense_decode<K, N>(ix, values.data(), da.data());  // each arch's decode
      for (std::size_t i = 0; i < K * N; ++i) CHECK(da[i] == d[i]);
      ops<cpu<Arch>>::template dense_backward_input<K, N>(dz.data(), d.data(), dx.data(), batch);
      ops<cpu<Arch>>::template dense_backward_weights<K, N>(x.data(), dz.data(), dw.data(), db.data(), batch);
      ops<cpu<Arch>>::template sparse_dense_gather<K, N>(ix, dw.data(), dv.data(), dv.size());
      for (std::size_t i = 0; i < dx.size(); ++i) CHECK(dx[i] == doctest::Approx(dx_want[i]).epsilon(1e-5));
      for (std::size_t i = 0; i < dv.size(); ++i) CHECK(dv[i] == doctest::Approx(dv_want[i]).epsilon(1e-5));
      for (std::size_t j = 0; j < N; ++j) CHECK(db[j] == doctest::Approx(db_want[j]).epsilon(1e-5));
    };
    CHECK(test::for_each_arch("decoded dense backward, gathered", run) >= 1);
  }
}
}  // namespace

TEST_CASE("sparse_kernels decode: each layout's decoded weights are the kernel it packed, the dense product over them "
          "equals the layout's scalar reference on every architecture") {
  constexpr std::size_t K = 12, N = 20;  // two bitmap chunks, the second partial
  std::vector<float> w;
  std::vector<std::uint8_t> keep;
  SUBCASE("bitmap") {
    kernel_and_mask<K, N>(w, keep, false);
    constexpr std::size_t C = kernels::cpu::sparse::chunks(N);
    std::vector<float> values(K * N);
    std::vector<std::uint32_t> offsets(C + 1);
    std::vector<std::uint16_t> bitmaps(C * K);
    kernels::cpu::sparse::pack(w.data(), keep.data(), K, N, values.data(), values.size(), offsets.data(), bitmaps.data());
    check_decoded<K, N>(kernels::bitmap_index{offsets.data(), bitmaps.data()}, values, w, keep,
                        [&](const float* x, const float* b, float* y, std::size_t batch) {
                          kernels::cpu::sparse::forward_reference(x, values.data(), offsets.data(), bitmaps.data(), b, y,
                                                                  batch, K, N, false);
                        });
  }
  SUBCASE("csc and rows") {
    kernel_and_mask<K, N>(w, keep, false);
    std::vector<float> values(K * N);
    std::vector<std::uint32_t> starts(N + 1);
    std::vector<std::uint16_t> rows(K * N);
    kernels::cpu::csc::pack(w.data(), keep.data(), K, N, values.data(), values.size(), starts.data(), rows.data());
    auto reference = [&](const float* x, const float* b, float* y, std::size_t batch) {
      kernels::cpu::csc::forward_reference(x, values.data(), starts.data(), rows.data(), b, y, batch, K, N, false);
    };
    check_decoded<K, N>(kernels::csc_index{starts.data(), rows.data()}, values, w, keep, reference);
    check_decoded<K, N>(kernels::rows_index{starts.data(), rows.data()}, values, w, keep, reference);
  }
  SUBCASE("nm 2:4") {
    kernel_and_mask<K, N>(w, keep, true);
    std::vector<float> values(kernels::cpu::nm::capacity(K, N, 2, 4));
    std::vector<std::uint8_t> meta(kernels::cpu::nm::meta_bytes(K, N, 2, 4));
    kernels::cpu::nm::pack<2, 4>(w.data(), keep.data(), K, N, values.data(), meta.data());
    check_decoded<K, N>(kernels::nm_index<2, 4>{meta.data()}, values, w, keep,
                        [&](const float* x, const float* b, float* y, std::size_t batch) {
                          kernels::cpu::nm::forward_reference<2, 4>(x, values.data(), meta.data(), b, y, batch, K, N,
                                                                    false);
                        });
  }
  SUBCASE("nm 2:4, the vector decode and gather (whole blocks of 16 units and values, and partial ones)") {
    constexpr std::size_t K2 = 72, N2 = 40;
    kernel_and_mask<K2, N2>(w, keep, true);
    std::vector<float> values(kernels::cpu::nm::capacity(K2, N2, 2, 4));
    std::vector<std::uint8_t> meta(kernels::cpu::nm::meta_bytes(K2, N2, 2, 4));
    kernels::cpu::nm::pack<2, 4>(w.data(), keep.data(), K2, N2, values.data(), meta.data());
    check_decoded<K2, N2>(kernels::nm_index<2, 4>{meta.data()}, values, w, keep,
                          [&](const float* x, const float* b, float* y, std::size_t batch) {
                            kernels::cpu::nm::forward_reference<2, 4>(x, values.data(), meta.data(), b, y, batch, K2,
                                                                      N2, false);
                          });
  }
}

// Where the N:M decode and gather run their vector paths (float; Nk dividing the lanes).
#if defined(__AVX512F__)
static_assert(kernels::cpu::nm::simd_decode_v<xsimd::avx512bw, float, 2> &&
              kernels::cpu::nm::simd_decode_v<xsimd::avx512f, float, 4> &&
              !kernels::cpu::nm::simd_decode_v<xsimd::avx512bw, float, 3>);
#endif
#if defined(__AVX2__) && defined(__FMA__)
static_assert(kernels::cpu::nm::simd_decode_v<xsimd::fma3<xsimd::avx2>, float, 2> &&
              kernels::cpu::nm::simd_decode_v<xsimd::avx2, float, 8> &&
              !kernels::cpu::nm::simd_decode_v<xsimd::avx2, float, 3>);
#endif
#if defined(__AVX512F__)
static_assert(kernels::cpu::nm::fused_gradient_v<xsimd::avx512bw, float, 2, 4> &&
              kernels::cpu::nm::fused_gradient_v<xsimd::avx512bw, float, 1, 16> &&
              !kernels::cpu::nm::fused_gradient_v<xsimd::avx512bw, float, 1, 32>);
#endif
#if defined(__AVX2__) && defined(__FMA__)
static_assert(kernels::cpu::nm::fused_gradient_v<xsimd::fma3<xsimd::avx2>, float, 2, 4> &&
              kernels::cpu::nm::fused_gradient_v<xsimd::avx2, float, 4, 8> &&
              !kernels::cpu::nm::fused_gradient_v<xsimd::avx2, float, 1, 16>);
#endif
static_assert(!kernels::cpu::nm::fused_gradient_v<xsimd::sse2, float, 2, 4>);
static_assert(!kernels::cpu::nm::simd_decode_v<xsimd::sse2, float, 2> &&
              !kernels::cpu::nm::simd_decode_v<xsimd::fma3<xsimd::avx2>, double, 2>);

namespace {
// N:M decode and gather (the training side's vector paths, sparse_nm.hpp decode_simd / gather_simd)
// against their scalar references on every architecture: a pseudo-random Nk:M mask (some groups keep
// fewer than Nk: padded with zero weights), K and N leaving partial blocks of values and units.
template <std::size_t Nk, std::size_t M, std::size_t K, std::size_t N>
void check_nm_decode_gather() {
  std::vector<float> w(K * N);
  std::vector<std::uint8_t> keep(K * N, 0);
  std::uint32_t s = 12345u + std::uint32_t(Nk * 100 + M);
  auto next = [&] { return s = s * 1664525u + 1013904223u; };
  for (auto& v : w) v = float(int(next() >> 20 & 255u) - 128) / 64.0f;
  for (std::size_t g = 0; g < K / M; ++g)
    for (std::size_t j = 0; j < N; ++j) {
      const std::size_t want = (next() >> 24) % 5 == 0 ? Nk - 1 : Nk;  // one group in 5 keeps fewer
      for (std::size_t c = 0; c < want;) {
        const std::size_t i = (next() >> 16) % M;
        if (!keep[(g * M + i) * N + j]) keep[(g * M + i) * N + j] = 1, ++c;
      }
    }
  std::vector<float> values(kernels::cpu::nm::capacity(K, N, Nk, M) + 3);  // 3 past the capacity: gather's fill
  std::vector<std::uint8_t> meta(kernels::cpu::nm::meta_bytes(K, N, Nk, M));
  kernels::cpu::nm::pack<Nk, M>(w.data(), keep.data(), K, N, values.data(), meta.data());
  const std::size_t cap = kernels::cpu::nm::capacity(K, N, Nk, M);
  for (std::size_t p = cap; p < values.size(); ++p) values[p] = 0.0f;
  const kernels::nm_index<Nk, M> ix{meta.data()};
  // the references: decode gives w masked, gather gives the values back
  std::vector<float> want(K * N, 7.0f), dense(K * N);
  kernels::cpu::nm::decode_reference<K, N, Nk, M>(meta.data(), values.data(), want.data(), 0, K / M, 0, N);
  for (std::size_t i = 0; i < K * N; ++i) CHECK(want[i] == (keep[i] ? w[i] : 0.0f));
  for (std::size_t i = 0; i < K * N; ++i) dense[i] = float(int(i % 29) - 14) * 0.5f;  // a gradient-like matrix
  std::vector<float> gathered(values.size(), 7.0f);
  kernels::cpu::nm::gather_reference<K, N, Nk, M>(meta.data(), dense.data(), gathered.data(), 0, K / M, 0, N);
  auto run = [&]<class Arch>(Arch, const char*) {
    std::vector<float> d(K * N, 7.0f), back(values.size(), 7.0f), g(values.size(), 7.0f);
    ops<cpu<Arch>>::template sparse_dense_decode<K, N>(ix, values.data(), d.data());
    CHECK(d == want);
    ops<cpu<Arch>>::template sparse_dense_gather<K, N>(ix, d.data(), back.data(), back.size());
    CHECK(back == values);
    ops<cpu<Arch>>::template sparse_dense_gather<K, N>(ix, dense.data(), g.data(), g.size());
    for (std::size_t p = 0; p < cap; ++p) CHECK(g[p] == gathered[p]);
    for (std::size_t p = cap; p < g.size(); ++p) CHECK(g[p] == 0.0f);
  };
  CHECK(test::for_each_arch("nm decode and gather", run) >= 1);
  // the values' gradient straight from x and dz (sparse_dense_weights_gradient, where
  // fused_weights_gradient_v: no dense dW) against the scalar backward's, 0 past the capacity
  for (std::size_t batch : {1, 3, 16}) {
    std::vector<float> x(batch * K), dz(batch * N), dv_want(values.size()), db_want(N);
    for (auto& v : x) v = float(int(next() >> 20 & 63u) - 32) / 16.0f;
    for (auto& v : dz) v = float(int(next() >> 20 & 63u) - 32) / 32.0f;
    kernels::cpu::nm::backward_reference<Nk, M>(x.data(), dz.data(), values.data(), meta.data(), dv_want.data(),
                                                db_want.data(), static_cast<float*>(nullptr), batch, K, N);
    int fused = 0;
    auto grad = [&]<class Arch>(Arch, const char*) {
      if constexpr (kernels::cpu::fused_weights_gradient_v<kernels::nm_index<Nk, M>, K, N, Arch, float>) {
        ++fused;
        std::vector<float> dv(values.size(), 7.0f), db(N, 7.0f);
        ops<cpu<Arch>>::template sparse_dense_weights_gradient<K, N>(ix, x.data(), dz.data(), dv.data(), db.data(),
                                                                     dv.size(), batch);
        for (std::size_t p = 0; p < cap; ++p) CHECK(dv[p] == doctest::Approx(dv_want[p]).epsilon(1e-5));
        for (std::size_t p = cap; p < dv.size(); ++p) CHECK(dv[p] == 0.0f);
        for (std::size_t j = 0; j < N; ++j) CHECK(db[j] == doctest::Approx(db_want[j]).epsilon(1e-5));
      }
    };
    CHECK(test::for_each_arch("nm values' gradient without dW", grad) >= 1);
    MESSAGE(Nk << ":" << M << " " << K << " x " << N << ": the fused values' gradient ran on " << fused << " architectures");
  }
}
}  // namespace

TEST_CASE("sparse_kernels nm: decode and gather equal their scalar references on every architecture (2:4, 1:4, "
          "1:2, 2:8, 4:8, 3:4; partial blocks of values and units)") {
  // 2:4 as the benchmarks' 784 x 256 (U = 392: 24 blocks of 16 values, 8 left) and 256 x 128 (whole blocks)
  check_nm_decode_gather<2, 4, 784, 256>();
  check_nm_decode_gather<2, 4, 256, 128>();
  check_nm_decode_gather<2, 4, 72, 40>();  // U = 36, N = 40: a partial block of units on AVX-512
  // AVX2's 2:4 decode (K % 8 == 0): 5 blocks of 8 values (two a code word, then one), 4 units left
  check_nm_decode_gather<2, 4, 80, 20>();
  check_nm_decode_gather<2, 4, 68, 12>();  // K % 8 == 4: the codes not byte-aligned, decode_simd's general blocks
  check_nm_decode_gather<1, 4, 72, 40>();
  check_nm_decode_gather<1, 2, 36, 24>();
  check_nm_decode_gather<2, 8, 144, 24>();  // 3-bit codes, straddling bytes
  check_nm_decode_gather<4, 8, 144, 17>();
  check_nm_decode_gather<3, 4, 48, 16>();  // 3 divides no lane count: the references
}
