// Loading the weights of a sparse layer of every layout (bitmap, csc, rows,
// n:m, block) from a hand-edited file: each index, offset and count the kernels read
// is checked when the file loads (io/weights.hpp, variable_ref::check), so an
// edited file with its CRC recomputed is refused with io::weights_error
// naming the file, the layer's 'index' and the bad value, the model is left
// as it was, and predict runs on it as before.
// Decoded weights (the plan's role::derived, layers/sparse_dense.hpp): the plan counts them, files
// never hold them, and a stripped layer's forward follows its values through every route that
// changes them (init, a writable span, a load, an optimizer update); its dX equals the dense layer's.
#include <doctest/doctest.h>

#include <ctnn/ctnn.hpp>
#include <ctnn/pruning.hpp>
#include <ctnn/layers/sparse_dense_nm.hpp>
#include <ctnn/layers/sparse_dense_rows.hpp>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <sstream>
#include <utility>
#include <string>
#include <vector>

#include "io/weights_file.hpp"

using namespace ctnn;
namespace fs = std::filesystem;
namespace wf = weights_file;

namespace {
struct tmpdir {
  fs::path p;
  tmpdir() {
    p = fs::temp_directory_path() / ("ctnn_sparse_load_" + std::to_string(::getpid()));
    fs::create_directories(p);
  }
  ~tmpdir() { fs::remove_all(p); }
};

// The bytes of m's metadata buffers.
template <class M>
std::vector<std::byte> metadata(const M& m) {
  std::vector<std::byte> out;
  m.for_each_variable([&](const variable_ref& v) {
    if (v.kind == role::metadata) out.insert(out.end(), v.data, v.data + v.extent * v.element_bytes);
  });
  return out;
}

using edit = std::function<void(std::vector<char>&, const wf::tensor&)>;

// Saves a model of Net (seed 1), applies each edit to its layer-1 'index' in
// turn (the CRC recomputed) and checks that a model of Net (seed 2) refuses the
// file with the message `want` after "<file>: layer 1 metadata 'index': ",
// keeps its variables and predicts as before; the unedited file loads and
// then predicts as the saved model.
template <class Net>
void check_edits(const std::vector<std::pair<edit, std::string>>& edits) {
  tmpdir t;
  auto a = make_model<Net>(1), b = make_model<Net>(2);
  std::vector<float> x(5 * Net::input_type::size);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = float(int(i % 7) - 3) / 4.0f;
  const auto before = b.predict(x.data(), 5);
  const std::vector<float> params(b.parameters().begin(), b.parameters().end());
  const auto meta = metadata(b);
  io::save_weights(a, t.p / "w.ctnn");
  const auto good = wf::slurp(t.p / "w.ctnn");
  const auto index = wf::find(good, 0, "index");
  for (const auto& [change, want] : edits) {
    CAPTURE(want);
    auto d = good;
    change(d, index);
    wf::put_crc(d);
    wf::spit(t.p / "bad.ctnn", d);
    CHECK_THROWS_WITH_AS(io::load_weights(b, t.p / "bad.ctnn"),
                         doctest::Contains(("bad.ctnn: layer 1 metadata 'index': " + want).c_str()), io::weights_error);
    CHECK(std::vector<float>(b.parameters().begin(), b.parameters().end()) == params);
    CHECK(metadata(b) == meta);
    CHECK(b.predict(x.data(), 5) == before);
  }
  io::load_weights(b, t.p / "w.ctnn");
  CHECK(b.predict(x.data(), 5) == a.predict(x.data(), 5));
}

// The u32 / u16 at position i of an index starting at `at`.
void set32(std::vector<char>& d, std::size_t at, std::size_t i, std::uint32_t v) { wf::set(d, at + 4 * i, v); }
std::uint32_t get32(const std::vector<char>& d, std::size_t at, std::size_t i) {
  return wf::get<std::uint32_t>(d, at + 4 * i);
}
void set16(std::vector<char>& d, std::size_t at, std::size_t i, std::uint16_t v) { wf::set(d, at + 2 * i, v); }
std::uint16_t get16(const std::vector<char>& d, std::size_t at, std::size_t i) {
  return wf::get<std::uint16_t>(d, at + 2 * i);
}
}  // namespace

TEST_CASE("sparse_dense (bitmap) weights: offsets, bitmap bits past the units and counts past the values are refused") {
  // K 20, N 20: chunk 0 holds columns 0..15, chunk 1 columns 16..19; 60 values
  using net = sequential<input<20>, sparse_dense<20, 20, 60, relu>, dense<3>>;
  constexpr std::size_t K = 20, chunks = 2, bitmaps = 4 * (chunks + 1);
  check_edits<net>({
      {[](auto& d, auto& t) { set32(d, t.values_at, 0, 1); }, "chunk 0 (columns 0..15) starts at value 1, not 0"},
      {[](auto& d, auto& t) { set32(d, t.values_at, 1, get32(d, t.values_at, 1) + 1); },
       "chunk 0 (columns 0..15) starts at value 0 and marks 40 weights, but the next offset is 41, not 40"},
      {[](auto& d, auto& t) { set16(d, t.values_at + bitmaps, K + 3, get16(d, t.values_at + bitmaps, K + 3) | 0x20); },
       "the bitmap of input 3 in chunk 1 (columns 16..19) marks column 21, past the 20 units"},
      {[](auto& d, auto& t) {
         for (std::size_t k = 0; k < K; ++k) set16(d, t.values_at + bitmaps, k, 0xffff);
       },
       "chunk 0 (columns 0..15) marks weights up to value 320, past the 60 values stored"},
      {[](auto& d, auto& t) { set32(d, t.values_at, 2, 4000000000u); },
       "chunk 1 (columns 16..19) starts at value 40 and marks 20 weights, but the next offset is 4000000000, not 60"},
  });
}

namespace {
// What csc and rows share: unit starts [N + 1] (uint32), then input rows [NNZ] (uint16).
template <std::size_t N, std::size_t NNZ>
std::vector<std::pair<edit, std::string>> by_unit_edits() {
  constexpr std::size_t rows = 4 * (N + 1);
  return {
      {[](auto& d, auto& t) { set32(d, t.values_at, 0, 2); }, "column 0 starts at value 2, not 0"},
      {[](auto& d, auto& t) { set32(d, t.values_at, N, NNZ + 1000); },
       "column " + std::to_string(N - 1) + " ends at value " + std::to_string(NNZ + 1000) + ", past the " +
           std::to_string(NNZ) + " values stored"},
      {[](auto& d, auto& t) { set32(d, t.values_at, 3, get32(d, t.values_at, 2) - 1); },
       "column 2 ends at value 9, before its start 10"},
      {[](auto& d, auto& t) { set16(d, t.values_at + rows, 1, 20); },
       "value 1 (column 0) has input row 20, but the layer has 20 inputs"},
      {[](auto& d, auto& t) { set16(d, t.values_at + rows, 7, 65535); },
       "value 7 (column 1) has input row 65535, but the layer has 20 inputs"},
      {[](auto& d, auto& t) { set16(d, t.values_at + rows, 2, get16(d, t.values_at + rows, 1)); },
       "value 2 (column 0) has input row 7, not above the row before it (7): rows ascend within a column"},
  };
}
}  // namespace

TEST_CASE("sparse_dense_csc weights: column starts and input rows out of range or out of order are refused") {
  // 25 of the 100 weights of a 20 x 5 kernel, spread evenly (every 4th in row-major order):
  // 5 per column; column 0's rows are 3, 7, 11, 15, 19, column 1's 2, 6, ...
  check_edits<sequential<input<20>, sparse_dense_csc<20, 5, 25, relu>, dense<3>>>(by_unit_edits<5, 25>());
}

TEST_CASE("sparse_dense_rows weights: unit starts and input indices out of range or out of order are refused") {
  check_edits<sequential<input<20>, sparse_dense_rows<20, 5, 25, relu>, dense<3>>>(by_unit_edits<5, 25>());
}

TEST_CASE("sparse_dense_nm weights: positions outside their group or not ascending are refused") {
  // 2:4 over 32 inputs and 4 units: 8 groups, 16 values of 2 bits per unit; value 0 is
  // unit 0's first in inputs 0..3 (position 0), value 1 its second (position 1)
  check_edits<sequential<input<32>, sparse_dense_nm<32, 4, 2, 4>, dense<3>>>({
      {[](auto& d, auto& t) {  // value 1 takes value 0's position
         const auto b = std::uint8_t(d[t.values_at]);
         d[t.values_at] = char((b & ~0x0c) | (b & 3) << 2);
       },
       "value 1 (unit 0, inputs 0..3) has position 0, not above the one before it (0): positions ascend within a group"},
  });
  // 1:3 over 48 inputs: positions take 2 bits, so 3 is representable and would name the next
  // group's first input; value 17 is unit 1's in inputs 3..5, at bits 34 and 35
  check_edits<sequential<input<48>, sparse_dense_nm<48, 4, 1, 3>, dense<3>>>({
      {[](auto& d, auto& t) { d[t.values_at + 4] = char(std::uint8_t(d[t.values_at + 4]) | 0x0c); },
       "value 17 (unit 1, inputs 3..5) has position 3, but a group holds 3 inputs"},
  });
}

TEST_CASE("sparse_dense_block weights: block column starts and block rows out of range or out of order are refused") {
  // 5 blocks of 2 x 4 in a 20 x 8 kernel (10 block rows, 2 block columns), spread evenly: all
  // in block column 1, block rows 1, 3, 5, 7, 9; the index: starts {0, 0, 5} (u32), then the rows (u16)
  check_edits<sequential<input<20>, sparse_dense_block<20, 8, 40, 2, 4, relu>, dense<3>>>({
      {[](auto& d, auto& t) { set32(d, t.values_at, 0, 1); }, "block column 0 starts at block 1, not 0"},
      {[](auto& d, auto& t) { set32(d, t.values_at, 2, 6); }, "block column 1 ends at block 6, past the 5 blocks stored"},
      {[](auto& d, auto& t) {
         set32(d, t.values_at, 1, 4);
         set32(d, t.values_at, 2, 3);
       },
       "block column 1 ends at block 3, before it starts (4)"},
      {[](auto& d, auto& t) { set16(d, t.values_at + 12, 0, 10); },
       "block 0 (block column 1) has block row 10, but the layer has 10"},
      {[](auto& d, auto& t) { set16(d, t.values_at + 12, 1, get16(d, t.values_at + 12, 0)); },
       "block 1 (block column 1) has block row 1, not above the one before (1)"},
  });
}

namespace {
// The plan's derived bytes: bitmap and n:m decode at every batch on every CPU architecture (K N
// floats, and K N more where the backward writes the dense dW: the scratch of the values' gradient,
// layers/sparse_dense.hpp; 64-byte aligned); block never. n:m on AVX-512 and AVX2 computes its
// values' gradient without dW (computes_values_gradient): no scratch, K N floats.
using bitmap_net = sequential<input<12>, sparse_dense<12, 20, 80, relu>, dense<3>>;
using nm_net = sequential<input<12>, sparse_dense_nm<12, 20, 2, 4, relu>, dense<3>>;
using block_net = sequential<input<12>, sparse_dense_block<12, 16, 64, 1, 8, relu>, dense<3>>;
static_assert(bitmap_net::plan<float, cpu<>>::bytes(role::derived, 1) == 2 * 12 * 20 * 4);
static_assert(bitmap_net::memory_plan(64).derived == 2 * 12 * 20 * 4);
constexpr bool nm_fused = kernels::cpu::fused_weights_gradient_v<kernels::nm_index<2, 4>, 12, 20,
                                                                  kernels::cpu::default_arch, float>;
static_assert(nm_net::memory_plan(1).derived == (nm_fused ? 1 : 2) * 12 * 20 * 4);
static_assert(nm_net::plan<float, cpu<xsimd::sse2>>::bytes(role::derived, 1) == 2 * 12 * 20 * 4);  // dW: scalar
static_assert(nm_net::plan<double, cpu<>>::bytes(role::derived, 1) == 2 * 12 * 20 * 8);            // double too
static_assert(block_net::memory_plan(1).derived == 0);
// n:m on cpu<avx512bw> and cpu<fma3<avx2>> (each where the build targets it): the decoded weights
// alone, so the 784 x 256 2:4 layer's values, their gradients and the decoded weights take what the
// dense layer's kernel and its gradient take (2 (K N / 2 + N) + K N = 2 (K N + N) floats), 0.8 MB
// fewer than with the scratch; bitmap and csc still write dW, so keep it.
template <class Arch>
constexpr bool nm_plan_as_dense() {
  using nm = sequential<input<784>, sparse_dense_nm<784, 256, 2, 4, relu>>;
  using dn = sequential<input<784>, dense<256, relu>>;
  using P = nm::plan<float, cpu<Arch>>;
  using D = dn::plan<float, cpu<Arch>>;
  constexpr std::size_t nm_held = P::bytes(role::parameter, 1) + P::bytes(role::gradient, 1) + P::bytes(role::derived, 1);
  constexpr std::size_t dense_held = D::bytes(role::parameter, 1) + D::bytes(role::gradient, 1);
  return P::bytes(role::derived, 1) == 784 * 256 * 4 && nm_held == dense_held && dense_held == 2 * (784 * 256 + 256) * 4;
}
#if defined(__AVX512F__) && defined(__AVX512BW__)
static_assert(kernels::cpu::fused_weights_gradient_v<kernels::nm_index<2, 4>, 784, 256, xsimd::avx512bw, float>);
static_assert(nm_plan_as_dense<xsimd::avx512bw>());
#endif
#if defined(__AVX2__) && defined(__FMA__)
static_assert(kernels::cpu::fused_weights_gradient_v<kernels::nm_index<2, 4>, 784, 256, xsimd::fma3<xsimd::avx2>, float>);
static_assert(nm_plan_as_dense<xsimd::fma3<xsimd::avx2>>());
#endif
// n:m's "transposed" cache (the layout forward's (K + N) floats a sample) only where that forward runs:
// none where the layer decodes at every batch (every CPU architecture), K + N floats a sample undecoded
// (266,240 bytes fewer for the 784 x 256 layer at batch 64)
template <class Arch>
constexpr bool nm_cache_only_undecoded() {
  using nm = sequential<input<784>, sparse_dense_nm<784, 256, 2, 4, relu>>;
  using un = sequential<input<784>, undecoded<sparse_dense_nm<784, 256, 2, 4, relu>>>;
  using P = nm::plan<float, cpu<Arch>>;
  using U = un::plan<float, cpu<Arch>>;
  return P::bytes(role::cache, 64) == 0 && U::bytes(role::cache, 64) == (784 + 256) * 64 * 4 &&
         U::bytes(role::cache, 64) == 266240 && P::bytes(role::activation, 64) == U::bytes(role::activation, 64);
}
static_assert(nm_cache_only_undecoded<kernels::cpu::default_arch>() && nm_cache_only_undecoded<xsimd::sse2>());
#if defined(__AVX512F__) && defined(__AVX512BW__)
static_assert(nm_cache_only_undecoded<xsimd::avx512bw>());
#endif
#if defined(__AVX2__) && defined(__FMA__)
static_assert(nm_cache_only_undecoded<xsimd::fma3<xsimd::avx2>>());
#endif
static_assert(sequential<input<784>, sparse_dense<784, 256, 40141, relu>>::plan<float, cpu<>>::bytes(role::derived, 1) ==
              2 * 784 * 256 * 4);
static_assert(sequential<input<784>, sparse_dense_csc<784, 256, 20070, relu>>::plan<float, cpu<>>::bytes(
                  role::derived, 1) == 2 * 784 * 256 * 4);
// csc decodes at small batches on every architecture (AVX2: 1, AVX-512: 1-4): 2 K N floats
static_assert(sequential<input<12>, sparse_dense_csc<12, 20, 24, relu>, dense<3>>::memory_plan(1).derived == 2 * 12 * 20 * 4);
static_assert(bitmap_net::plan<double, cpu<>>::bytes(role::derived, 1) == 2 * 12 * 20 * 8);
// undecoded<Spec> (layout::undecoded<L>): no decoded buffers, the plan 2 K N values smaller, at every batch
using undecoded_bitmap_net = sequential<input<12>, undecoded<sparse_dense<12, 20, 80, relu>>, dense<3>>;
using undecoded_nm_net = sequential<input<12>, undecoded<sparse_dense_nm<12, 20, 2, 4, relu>>, dense<3>>;
using undecoded_csc_net = sequential<input<12>, undecoded<sparse_dense_csc<12, 20, 24, relu>>, dense<3>>;
static_assert(undecoded_bitmap_net::memory_plan(1).derived == 0 && undecoded_bitmap_net::memory_plan(64).derived == 0);
static_assert(undecoded_nm_net::memory_plan(1).derived == 0 && undecoded_csc_net::memory_plan(1).derived == 0);
static_assert(nm_net::memory_plan(64).activations + (12 + 20) * 64 * 4 == undecoded_nm_net::memory_plan(64).activations);
static_assert(undecoded_bitmap_net::plan<double, cpu<>>::bytes(role::derived, 1) == 0);
static_assert(bitmap_net::memory_plan(1).total == undecoded_bitmap_net::memory_plan(1).total + 2 * 12 * 20 * 4);
// (the undecoded layer holds the "transposed" cache instead: (K + N) floats a sample)
static_assert(nm_net::memory_plan(16).total + (12 + 20) * 16 * 4 ==
              undecoded_nm_net::memory_plan(16).total + (nm_fused ? 1 : 2) * 12 * 20 * 4);
static_assert(bitmap_net::memory_plan(1).parameters == undecoded_bitmap_net::memory_plan(1).parameters &&
              bitmap_net::memory_plan(1).metadata == undecoded_bitmap_net::memory_plan(1).metadata);
// the tag: strip_pruning<layout::undecoded<L>> makes L's layer, undecoded
using pruned_net = sequential<input<12>, prune_low_magnitude<dense<20, relu>, constant_sparsity<0.8>>, dense<3>>;
static_assert(SparseLayout<layout::undecoded<layout::bitmap>> && SparseLayout<layout::undecoded<layout::nm<2, 4>>> &&
              SparseLayout<layout::undecoded<layout::csc>>);
static_assert(std::is_same_v<stripped_t<pruned_net, layout::undecoded<layout::bitmap>>,
                             sequential<input<12>, undecoded<sparse_dense<12, 20, 48, relu>>, dense<3>>>);

// Net's outputs for x (n samples) computed here from m's variables: layer 0 (sparse, relu) through
// its weights decoded by the layout's kernels, layer 1 dense; in double.
template <class M>
std::vector<double> reference(M& m, const std::vector<float>& x, std::size_t n) {
  using L0 = std::tuple_element_t<0, typename M::layers>;
  constexpr std::size_t K = L0::K, N = L0::N, NNZ = L0::NNZ;
  std::vector<float> w(K * N), w1(N * 3), b0(N), b1(3);
  m.with_variables([&](const std::vector<variable_ref>& refs) {
    const auto* v0 = reinterpret_cast<const float*>(detail::find_variable(refs, 0, "values")->data);
    const auto* meta = detail::find_variable(refs, 0, "index")->data;
    std::vector<std::byte> index(meta, meta + L0::index::bytes);  // aligned for the view
    std::vector<float> values(v0, v0 + NNZ);
    ops<cpu<>>::sparse_dense_decode<K, N>(L0::view(index.data()), values.data(), w.data());
    const auto* b = reinterpret_cast<const float*>(detail::find_variable(refs, 0, "bias")->data);
    std::copy(b, b + N, b0.begin());
    const auto* k1 = reinterpret_cast<const float*>(detail::find_variable(refs, 1, "kernel")->data);
    std::copy(k1, k1 + N * 3, w1.begin());
    const auto* c1 = reinterpret_cast<const float*>(detail::find_variable(refs, 1, "bias")->data);
    std::copy(c1, c1 + 3, b1.begin());
  });
  std::vector<double> out(n * 3);
  for (std::size_t r = 0; r < n; ++r) {
    std::vector<double> h(N);
    for (std::size_t j = 0; j < N; ++j) {
      double s = b0[j];
      for (std::size_t k = 0; k < K; ++k) s += double(x[r * K + k]) * w[k * N + j];
      h[j] = std::max(s, 0.0);
    }
    for (std::size_t o = 0; o < 3; ++o) {
      double s = b1[o];
      for (std::size_t j = 0; j < N; ++j) s += h[j] * w1[j * 3 + o];
      out[r * 3 + o] = s;
    }
  }
  return out;
}

template <class M>
void check_follows(M& m, const std::vector<float>& x, std::size_t n, const char* route) {
  CAPTURE(route);
  const auto want = reference(m, x, n);
  for (std::size_t batch : {std::size_t(1), std::size_t(4), n}) {
    const auto y = m.predict(x.data(), n, batch);
    for (std::size_t i = 0; i < y.size(); ++i) CHECK(y[i] == doctest::Approx(want[i]).epsilon(1e-5));
  }
}

template <class Net>
void check_routes() {
  tmpdir t;
  constexpr std::size_t n = 6;
  std::vector<float> x(n * 12), target(n * 3);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = float(int(i % 9) - 4) * 0.2f;
  for (std::size_t i = 0; i < target.size(); ++i) target[i] = float(i % 3);
  auto m = make_model<Net>(1), other = make_model<Net>(2);
  check_follows(m, x, n, "init");
  const auto first = m.predict(x.data(), n);
  // a writable span of the parameters
  for (auto& v : m.parameters()) v = -1.5f * v;
  check_follows(m, x, n, "parameters()");
  CHECK(m.predict(x.data(), n) != first);
  // a load: the file holds no decoded weights and round-trips byte for byte
  io::save_weights(m, t.p / "a.ctnn");
  for (const auto& tensor : io::read_weights_file(t.p / "a.ctnn").tensors) CHECK(tensor.name != "decoded");
  io::load_weights(other, t.p / "a.ctnn");
  check_follows(other, x, n, "load_weights");
  CHECK(other.predict(x.data(), n) == m.predict(x.data(), n));
  io::save_weights(other, t.p / "b.ctnn");
  CHECK(wf::slurp(t.p / "a.ctnn") == wf::slurp(t.p / "b.ctnn"));
  // a file that claims a derived tensor is refused (the role byte: 4 bytes into the record)
  auto d = wf::slurp(t.p / "a.ctnn");
  const auto values = wf::find(d, 0, "values");
  wf::set(d, values.dims_at - 12 - values.name.size() + 4, std::uint8_t(role::derived));
  wf::put_crc(d);
  wf::spit(t.p / "derived.ctnn", d);
  CHECK_THROWS_WITH_AS(io::read_weights_file(t.p / "derived.ctnn"),
                       doctest::Contains("has the role 'derived', which files never hold"), io::weights_error);
  CHECK_THROWS_WITH_AS(io::load_weights(other, t.p / "derived.ctnn"),
                       doctest::Contains("expected layer 1 parameter 'values'"), io::weights_error);
  // an optimizer update
  sgd opt{0.5};
  const auto before = m.predict(x.data(), n);
  train_step(m, mean_squared_error{}, opt).run(x.data(), target.data(), n, 0, 0);
  check_follows(m, x, n, "an update");
  CHECK(m.predict(x.data(), n) != before);
}
}  // namespace

TEST_CASE("decoded weights: a stripped layer's forward follows its values after init, a span's writes, a load and an "
          "update; files hold no decoded weights") {
  SUBCASE("bitmap") { check_routes<bitmap_net>(); }
  SUBCASE("n:m") { check_routes<nm_net>(); }
  SUBCASE("csc") { check_routes<sequential<input<12>, sparse_dense_csc<12, 20, 24, relu>, dense<3>>>(); }
  // undecoded: the layouts' own kernels at every batch, the same routes
  SUBCASE("bitmap, undecoded") { check_routes<undecoded_bitmap_net>(); }
  SUBCASE("n:m, undecoded") { check_routes<undecoded_nm_net>(); }
  SUBCASE("csc, undecoded") { check_routes<undecoded_csc_net>(); }
}

TEST_CASE("undecoded weights: the same name and files as the decoding layer (a file of one loads into the other)") {
  tmpdir t;
  auto m = make_model<bitmap_net>(1);
  auto u = make_model<undecoded_bitmap_net>(2);
  CHECK(std::tuple_element_t<0, model<undecoded_bitmap_net>::layers>::name() == "sparse_dense<12, 20, 80, relu>");
  io::save_weights(m, t.p / "decoding.ctnn");
  io::load_weights(u, t.p / "decoding.ctnn");
  io::save_weights(u, t.p / "undecoded.ctnn");
  CHECK(wf::slurp(t.p / "decoding.ctnn") == wf::slurp(t.p / "undecoded.ctnn"));
  std::vector<float> x(4 * 12);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = float(int(i % 5) - 2) * 0.25f;
  const auto a = m.predict(x.data(), 4), b = u.predict(x.data(), 4);
  for (std::size_t i = 0; i < a.size(); ++i) CHECK(b[i] == doctest::Approx(a[i]).epsilon(1e-5));
  // strip_pruning to the tag: the same weights and predictions as to the layout itself
  auto p = make_model<pruned_net>(3);
  prune_at_step(p, 0);
  auto sb = strip_pruning<layout::bitmap>(p);
  auto su = strip_pruning<layout::undecoded<layout::bitmap>>(p);
  {
    const auto& cb = sb;
    const auto& cu = su;
    const auto wb = cb.parameters(), wu = cu.parameters();
    CHECK(std::vector<float>(wb.begin(), wb.end()) == std::vector<float>(wu.begin(), wu.end()));
  }
  for (std::size_t batch : {std::size_t(1), std::size_t(4)}) {
    const auto c = sb.predict(x.data(), 4, batch), e = su.predict(x.data(), 4, batch);
    for (std::size_t i = 0; i < c.size(); ++i) CHECK(e[i] == doctest::Approx(c[i]).epsilon(1e-5));
  }
}

namespace {
template <class Sparse>
void check_dx() {
  // dense<12> below the sparse layer, so its dX is used; the same weights in an all-dense network
  using sparse_net = sequential<input<12>, dense<12>, Sparse, dense<3>>;
  using dense_net = sequential<input<12>, dense<12>, dense<20, relu>, dense<3>>;
  using L1 = std::tuple_element_t<1, typename model<sparse_net>::layers>;
  auto s = make_model<sparse_net>(1);
  auto d = make_model<dense_net>(1);
  std::vector<float> w(12 * 20);
  s.with_variables([&](const std::vector<variable_ref>& refs) {
    const auto* meta = detail::find_variable(refs, 1, "index")->data;
    std::vector<std::byte> index(meta, meta + L1::index::bytes);
    const auto* v = reinterpret_cast<const float*>(detail::find_variable(refs, 1, "values")->data);
    std::vector<float> values(v, v + L1::NNZ);
    ops<cpu<>>::sparse_dense_decode<12, 20>(L1::view(index.data()), values.data(), w.data());
    d.with_variables([&](const std::vector<variable_ref>& to) {
      for (const variable_ref& r : refs) {
        const std::string_view name = r.layer == 1 && r.name == "values" ? "kernel" : r.name;
        const variable_ref* o = detail::find_variable(to, r.layer, name);
        if (r.kind != role::parameter || !o) continue;
        if (r.layer == 1 && r.name == "values") std::copy(w.begin(), w.end(), reinterpret_cast<float*>(o->data));
        else std::copy(r.data, r.data + r.extent * r.element_bytes, o->data);
      }
    });
  });
  constexpr std::size_t n = 5;
  std::vector<float> x(n * 12), target(n * 3);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = float(int(i % 7) - 3) * 0.3f;
  for (std::size_t i = 0; i < target.size(); ++i) target[i] = float(i % 2);
  sgd opt{0.1};  // the gradients compared are this step's, before the update
  train_step(s, mean_squared_error{}, opt).run(x.data(), target.data(), n, 0, 0);
  train_step(d, mean_squared_error{}, opt).run(x.data(), target.data(), n, 0, 0);
  const auto gs = s.template layer_gradients<0>(), gd = d.template layer_gradients<0>();
  REQUIRE(gs.size() == gd.size());
  double most = 0;
  for (std::size_t i = 0; i < gs.size(); ++i) most = std::max(most, double(std::abs(gd[i])));
  for (std::size_t i = 0; i < gs.size(); ++i) CHECK(gs[i] == doctest::Approx(gd[i]).epsilon(1e-5).scale(most));
}
}  // namespace

TEST_CASE("decoded weights: a trained stripped layer's dX (through the decoded weights) equals the dense layer's") {
  check_dx<sparse_dense<12, 20, 80, relu>>();
  // undecoded: dX by the layout's own kernel
  check_dx<undecoded<sparse_dense<12, 20, 80, relu>>>();
}

TEST_CASE("decoded weights: summary() names their bytes") {
  std::ostringstream with, without;
  summary<bitmap_net>(with);
  summary<block_net>(without);
  CHECK(with.str().find("Decoded weights (not saved): 1920 bytes (1.88 KB)\n") != std::string::npos);
  CHECK(without.str().find("Decoded") == std::string::npos);
}

TEST_CASE("decoded weights: a stripped layer inside a graph layer (residual) decodes too, and follows its values") {
  using sparse_net = sequential<input<12>, residual<sparse_dense<12, 12, 60, relu>>, dense<3>>;
  using dense_net = sequential<input<12>, residual<dense<12, relu>>, dense<3>>;
  static_assert(sparse_net::memory_plan(1).derived == 2 * 12 * 12 * 4);
  using C = sparse_dense<12, 12, 60, relu>::bind<shape<12>, float, cpu<>>;  // the child, bound
  // the residual (and the chain inside it) hands the model's refresh down to the child
  static_assert(requires(layer_slot<float> sl) { std::tuple_element_t<0, model<sparse_net>::layers>::derive(sl); });
  auto s = make_model<sparse_net>(1);
  auto d = make_model<dense_net>(1);
  constexpr std::size_t n = 4;
  std::vector<float> x(n * 12);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = float(int(i % 7) - 3) * 0.3f;
  for (int round = 0; round < 2; ++round) {
    CAPTURE(round);
    if (round == 1)
      for (auto& v : s.parameters()) v = 0.5f * v - 0.01f;  // a span's writes: the child's decoded weights follow
    std::vector<float> w(12 * 12);
    s.with_variables([&](const std::vector<variable_ref>& refs) {
      const auto* meta = detail::find_variable(refs, 0, "0.0.index")->data;
      std::vector<std::byte> index(meta, meta + C::index::bytes);
      const auto* v = reinterpret_cast<const float*>(detail::find_variable(refs, 0, "0.0.values")->data);
      std::vector<float> values(v, v + C::NNZ);
      ops<cpu<>>::sparse_dense_decode<12, 12>(C::view(index.data()), values.data(), w.data());
      d.with_variables([&](const std::vector<variable_ref>& to) {
        std::copy(w.begin(), w.end(), reinterpret_cast<float*>(detail::find_variable(to, 0, "0.0.kernel")->data));
        for (const char* name : {"0.0.bias"}) {
          const variable_ref* a = detail::find_variable(refs, 0, name);
          std::copy(a->data, a->data + a->extent * a->element_bytes, detail::find_variable(to, 0, name)->data);
        }
        for (const char* name : {"kernel", "bias"}) {
          const variable_ref* a = detail::find_variable(refs, 1, name);
          std::copy(a->data, a->data + a->extent * a->element_bytes, detail::find_variable(to, 1, name)->data);
        }
      });
    });
    const auto ys = s.predict(x.data(), n), yd = d.predict(x.data(), n);
    for (std::size_t i = 0; i < ys.size(); ++i) CHECK(ys[i] == doctest::Approx(yd[i]).epsilon(1e-5));
  }
}

TEST_CASE("decoded weights: a stripped layer inside time_distributed decodes too, and follows its values") {
  using sparse_net = sequential<input<3, 12>, time_distributed<sparse_dense<12, 8, 60, relu>>, flatten, dense<3>>;
  using dense_net = sequential<input<3, 12>, time_distributed<dense<8, relu>>, flatten, dense<3>>;
  static_assert(sparse_net::memory_plan(1).derived == 2 * 12 * 8 * 4);
  using C = sparse_dense<12, 8, 60, relu>::bind<shape<12>, float, cpu<>>;  // the child, bound
  // time_distributed hands the model's refresh down to the child (its slot gets the decoded buffer)
  static_assert(requires(layer_slot<float> sl) { std::tuple_element_t<0, model<sparse_net>::layers>::derive(sl); });
  auto s = make_model<sparse_net>(1);
  auto d = make_model<dense_net>(1);
  constexpr std::size_t n = 4;
  std::vector<float> x(n * 3 * 12);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = float(int(i % 7) - 3) * 0.3f;
  for (int round = 0; round < 2; ++round) {
    CAPTURE(round);
    if (round == 1)
      for (auto& v : s.parameters()) v = 0.5f * v - 0.01f;  // a span's writes: the child's decoded weights follow
    s.with_variables([&](const std::vector<variable_ref>& refs) {
      const auto* meta = detail::find_variable(refs, 0, "index")->data;
      std::vector<std::byte> index(meta, meta + C::index::bytes);
      const auto* v = reinterpret_cast<const float*>(detail::find_variable(refs, 0, "values")->data);
      std::vector<float> values(v, v + C::NNZ), w(12 * 8);
      ops<cpu<>>::sparse_dense_decode<12, 8>(C::view(index.data()), values.data(), w.data());
      d.with_variables([&](const std::vector<variable_ref>& to) {
        std::copy(w.begin(), w.end(), reinterpret_cast<float*>(detail::find_variable(to, 0, "kernel")->data));
        const variable_ref* b = detail::find_variable(refs, 0, "bias");
        std::copy(b->data, b->data + b->extent * b->element_bytes, detail::find_variable(to, 0, "bias")->data);
        for (const char* name : {"kernel", "bias"}) {
          const variable_ref* a = detail::find_variable(refs, 2, name);
          std::copy(a->data, a->data + a->extent * a->element_bytes, detail::find_variable(to, 2, name)->data);
        }
      });
    });
    const auto ys = s.predict(x.data(), n), yd = d.predict(x.data(), n);
    for (std::size_t i = 0; i < ys.size(); ++i) CHECK(ys[i] == doctest::Approx(yd[i]).epsilon(1e-5));
  }
}

namespace {
// Three SGD steps of a stripped layer's model on `threads` threads: its variables after them.
template <class Net>
std::vector<float> stripped_steps_on(std::size_t threads) {
  const std::size_t before = kernels::cpu::threads();
  kernels::cpu::set_threads(threads);
  auto m = make_model<Net>(3);
  constexpr std::size_t n = 32;
  std::vector<float> x(n * 96), target(n * 3);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = float(int(i % 13) - 6) * 0.1f;
  for (std::size_t i = 0; i < target.size(); ++i) target[i] = float(i % 2);
  sgd opt{0.05};
  train_step step(m, mean_squared_error{}, opt);
  for (std::size_t k = 0; k < 3; ++k) step.run(x.data(), target.data(), n, 0, k);
  kernels::cpu::set_threads(before);
  return {m.parameters().begin(), m.parameters().end()};
}
}  // namespace

// (the dense backward over the decoded weights and the values' gradient gathered from dW)
TEST_CASE_TEMPLATE("decoded weights: training a stripped layer gives the same bits on 1 and 2 threads",
                   Net, sequential<input<96>, sparse_dense<96, 64, 1200, relu>, dense<3>>,
                   sequential<input<96>, sparse_dense_nm<96, 64, 2, 4, relu>, dense<3>>,
                   sequential<input<96>, sparse_dense_csc<96, 64, 600, relu>, dense<3>>) {
  const auto one = stripped_steps_on<Net>(1);
  CHECK(one == stripped_steps_on<Net>(2));
}
