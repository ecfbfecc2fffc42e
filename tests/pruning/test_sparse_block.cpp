// layers/sparse_dense_block.hpp, backends/cpu/sparse_block.hpp: the block layout
// (layout::block<R, C>) against a dense product of the masked kernel and
// against its scalar reference on every architecture and batch path (1x8,
// 1x16, 4x4, 2x8, and 1x3 which runs the reference), its pack contract, its
// compile-time sizes, its gradients, and strip_pruning of block-pruned models.
#include <doctest/doctest.h>

#include <ctnn/ctnn.hpp>
#include <ctnn/pruning.hpp>

#include <algorithm>
#include <cstdint>
#include <tuple>
#include <type_traits>
#include <vector>

#include "gradcheck/gradcheck.hpp"
#include "kernels/archs.hpp"
#include "pruning/sparse_common.hpp"
#include "pruning/strip_common.hpp"

using namespace ctnn;
using namespace sparse_test;

namespace {
template <std::size_t R, std::size_t C, class S = constant_sparsity<0.8>>
using block_mlp = sequential<input<64>, prune_low_magnitude<dense<48, relu>, S, block<R, C>>,
                             prune_low_magnitude<dense<16, ctnn::tanh>, S, block<R, C>>, dense<3>>;
// A K x N mask keeping each R x C block with probability `density`.
std::vector<std::uint8_t> block_mask(std::size_t K, std::size_t N, std::size_t R, std::size_t C, double density,
                                     rng& g) {
  std::vector<std::uint8_t> keep(K * N);
  for (std::size_t kb = 0; kb < K / R; ++kb)
    for (std::size_t jb = 0; jb < N / C; ++jb) {
      const std::uint8_t k = g.uniform() < density;
      for (std::size_t r = 0; r < R; ++r)
        for (std::size_t c = 0; c < C; ++c) keep[(kb * R + r) * N + jb * C + c] = k;
    }
  return keep;
}
}  // namespace

// The tag meets the layout contract; the stripped type keeps the blocks' weights, a compile-time count.
static_assert(SparseLayout<layout::block<1, 8>> && SparseLayout<layout::block<1, 16>> && SparseLayout<layout::block<4, 4>>);
// 64 x 48 kernel in 1x8 blocks: 384 blocks, 80 % pruned keeps round(76.8) = 77 blocks of 8 weights;
// 48 x 16: 96 blocks, round(19.2) = 19 kept
static_assert(std::is_same_v<stripped_t<block_mlp<1, 8>, layout::block<1, 8>>,
                             sequential<input<64>, sparse_dense_block<64, 48, 616, 1, 8, relu>,
                                        sparse_dense_block<48, 16, 152, 1, 8, ctnn::tanh>, dense<3>>>);
static_assert(std::is_same_v<layout::block<4, 4>::layer<64, 48, 608, relu>, sparse_dense_block<64, 48, 608, 4, 4, relu>>);
// a count that is not whole blocks is rounded up to them
static_assert(std::is_same_v<layout::block<1, 8>::layer<64, 48, 610, relu>, sparse_dense_block<64, 48, 616, 1, 8, relu>>);
// parameters: values + bias; metadata: block column starts (u32) and block rows (u16)
static_assert(sparse_dense_block<64, 48, 616, 1, 8>::bind<shape<64>, float, cpu<>>::parameter_count == 616 + 48);
static_assert(sequential<input<64>, sparse_dense_block<64, 48, 616, 1, 8>>::memory_plan(1).metadata ==
              align_bytes(4 * (48 / 8 + 1) + 2 * 77));

TEST_CASE("block kernels: forward equals the masked dense product and the reference on every architecture") {
  auto run = [](auto arch, const char* name) {
    using Arch = decltype(arch);
    auto one = [&]<std::size_t K, std::size_t N, std::size_t R, std::size_t C>(double density, std::size_t batch,
                                                                                bool relu) {
      INFO(name << " K=" << K << " N=" << N << " R=" << R << " C=" << C << " density=" << density
                << " batch=" << batch << " relu=" << relu);
      rng g(K * 7 + N * 3 + batch + R * 11 + C);
      auto p = random_problem(K, N, batch, 1.0, g);
      p.keep = block_mask(K, N, R, C, density, g);
      constexpr std::size_t NB = K / R * (N / C);
      std::vector<float> values(NB * R * C);
      std::vector<std::uint32_t> starts(N / C + 1);
      std::vector<std::uint16_t> rows(NB);
      const auto kept = std::size_t(std::count(p.keep.begin(), p.keep.end(), 1));
      CHECK(kernels::cpu::block::pack(p.w.data(), p.keep.data(), K, N, R, C, values.data(), NB, starts.data(),
                                      rows.data()) == kept);
      CHECK(starts[N / C] * R * C == kept);
      const auto ref = masked_dense(p, batch, K, N, relu);
      std::vector<float> y(batch * N), yr(batch * N);
      kernels::cpu::block::forward<K, N, R, C, Arch>(p.x.data(), values.data(), starts.data(), rows.data(),
                                                     p.bias.data(), y.data(), batch, relu);
      kernels::cpu::block::forward_reference(p.x.data(), values.data(), starts.data(), rows.data(), p.bias.data(),
                                             yr.data(), batch, K, N, R, C, relu);
      for (std::size_t i = 0; i < y.size(); ++i) {
        CHECK(y[i] == doctest::Approx(yr[i]).epsilon(1e-5).scale(1.0));
        CHECK(yr[i] == doctest::Approx(ref[i]).epsilon(1e-5).scale(1.0));
      }
    };
    for (double d : {0.0, 0.1, 0.5, 1.0})
      for (std::size_t batch : {1, 2, 3, 5, 8, 13, 64}) {
        one.template operator()<8, 8, 1, 8>(d, batch, false);
        one.template operator()<64, 48, 1, 8>(d, batch, true);
        one.template operator()<64, 48, 1, 16>(d, batch, true);
        one.template operator()<64, 48, 4, 4>(d, batch, false);
        one.template operator()<32, 32, 2, 8>(d, batch, true);
        one.template operator()<9, 6, 1, 3>(d, batch, false);  // no vector width divides 3: the reference
      }
    one.template operator()<784, 256, 1, 16>(0.1, 1, true);
    one.template operator()<784, 256, 1, 8>(0.2, 1, true);  // batch 1: 4 blocks a step, their rows one load
    one.template operator()<784, 256, 4, 4>(0.2, 64, true);
  };
  CHECK(test::for_each_arch("block forward", run) >= 1);
  // which vectors run a block row: Arch's own when they fit C, else those of an architecture it extends
  using kernels::cpu::block::detail::vec_arch;
  static_assert(std::is_same_v<vec_arch<xsimd::sse2, 4>, xsimd::sse2>);
  static_assert(std::is_same_v<vec_arch<xsimd::sse2, 3>, xsimd::unsupported>);
  // (only where the compiler targets the architecture)
  using fma_avx2 = xsimd::fma3<xsimd::avx2>;
  static_assert(!fma_avx2::supported() || std::is_same_v<vec_arch<fma_avx2, 16>, fma_avx2>);
  static_assert(!fma_avx2::supported() || std::is_same_v<vec_arch<fma_avx2, 4>, xsimd::sse2>);
  static_assert(!xsimd::avx512bw::supported() || std::is_same_v<vec_arch<xsimd::avx512bw, 16>, xsimd::avx512bw>);
  static_assert(!xsimd::avx512bw::supported() || std::is_same_v<vec_arch<xsimd::avx512bw, 8>, fma_avx2>);
}

TEST_CASE("block pack: blocks past the capacity return a count above it and write nothing, unmarked weights of a kept block are 0") {
  constexpr std::size_t K = 4, N = 8, R = 2, C = 4, cap = 2;
  std::vector<float> w(K * N, 1.0f);
  std::vector<std::uint8_t> keep(K * N, 0);
  keep[0] = keep[1 * N + 5] = keep[3 * N + 7] = 1;  // blocks (0, 0), (0, 1), (1, 1): 3 blocks, 3 weights
  std::vector<float> values(cap * R * C + 3, -7.0f);
  std::vector<std::uint32_t> starts(N / C + 1 + 1, 99u);
  std::vector<std::uint16_t> rows(cap + 1, 77);
  CHECK(kernels::cpu::block::pack(w.data(), keep.data(), K, N, R, C, values.data(), cap, starts.data(), rows.data()) ==
        3 * R * C);
  CHECK(std::all_of(values.begin(), values.end(), [](float v) { return v == -7.0f; }));
  CHECK(std::all_of(starts.begin(), starts.end(), [](std::uint32_t v) { return v == 99u; }));
  keep[3 * N + 7] = 0;  // 2 blocks: they fit; block (0, 0) holds one weight and 7 zeros
  CHECK(kernels::cpu::block::pack(w.data(), keep.data(), K, N, R, C, values.data(), cap, starts.data(), rows.data()) == 2);
  CHECK(starts[0] == 0);
  CHECK(starts[1] == 1);
  CHECK(starts[2] == 2);
  CHECK(rows[0] == 0);
  CHECK(rows[1] == 0);
  CHECK(values[0] == 1.0f);
  CHECK(std::count(values.begin(), values.begin() + cap * R * C, 1.0f) == 2);
  CHECK(values[cap * R * C] == -7.0f);
  CHECK(starts[N / C + 1] == 99u);
  CHECK(rows[cap] == 77);
  CHECK(kernels::cpu::block::validate(starts.data(), rows.data(), K, N, R, C, cap).empty());
  rows[1] = 2;
  CHECK(kernels::cpu::block::validate(starts.data(), rows.data(), K, N, R, C, cap) ==
        "block 1 (block column 1) has block row 2, but the layer has 2");
}

TEST_CASE_TEMPLATE("strip_pruning<layout::block<R, C>>: a block-pruned model predicts as the masked one", Layout,
                   layout::block<1, 8>, layout::block<1, 16>, layout::block<4, 4>) {
  using net = std::conditional_t<std::is_same_v<Layout, layout::block<1, 8>>, block_mlp<1, 8>,
                                 std::conditional_t<std::is_same_v<Layout, layout::block<1, 16>>, block_mlp<1, 16>,
                                                    block_mlp<4, 4>>>;
  auto m = make_model<net>(3);
  adam opt{0.01};
  fit(m, strip_test::xent, opt, strip_test::toy_data<64>().batch(16), epochs{2}, update_pruning_step{});
  auto s = strip_pruning<Layout>(m);
  const auto xs = strip_test::random_inputs(96 * 64, 2);
  for (std::size_t batch : {1, 3, 7, 16, 64}) CHECK(strip_test::worst_difference(m, s, xs, 96, batch) < 1e-5);
  // an unstructured mask touches more blocks than the type holds: refused, naming the layer
  using unstructured_net = sequential<input<64>, prune_low_magnitude<dense<48, relu>, constant_sparsity<0.8>>, dense<3>>;
  auto u = make_model<unstructured_net>(3);
  prune_at_step(u, 0);
  CHECK_THROWS_WITH(strip_pruning<Layout>(u), doctest::Contains("strip_pruning: layer 1 keeps"));
}

TEST_CASE("sparse_dense_block: finite-difference gradients, and the benchmark's MLP at batch 1 as at 64") {
  CHECK(gradcheck::check_layer<sparse_dense_block<8, 16, 64, 1, 8, ctnn::tanh>, shape<8>>() < 1e-6);
  CHECK(gradcheck::check_layer<sparse_dense_block<8, 8, 32, 4, 4>, shape<8>>() < 1e-6);
  CHECK(gradcheck::check_layer<sparse_dense_block<4, 16, 32, 1, 16, relu>, shape<4>>() < 1e-6);
  check_batch_1_as_64<sequential<input<784>, sparse_dense_block<784, 256, 40192, 1, 16, relu>,
                                 sparse_dense_block<256, 128, 6560, 4, 4, relu>, dense<10>>>();
}
