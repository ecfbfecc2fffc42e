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
}
