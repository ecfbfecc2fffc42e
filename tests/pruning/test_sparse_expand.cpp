// backends/cpu/sparse_expand.hpp: the forward of the bitmap, csc and rows layouts through
// their weights expanded into the dense GEMM's packed panels and the dense micro-kernel.
// Each layout's expansion equals the dense packing of the masked kernel bit for bit, and
// each layout's forward (sparse kernel or expansion, as sparse_expand decides by the batch)
// equals the masked dense product and the layout's scalar reference at every batch 1..70,
// on every architecture this CPU runs; the N:M layout (its kernels only) alongside.
#include <doctest/doctest.h>

#include <ctnn/backends/cpu/gemm.hpp>
#include <ctnn/backends/cpu/sparse.hpp>
#include <ctnn/backends/cpu/sparse_csc.hpp>
#include <ctnn/backends/cpu/sparse_expand.hpp>
#include <ctnn/backends/cpu/sparse_nm.hpp>
#include <ctnn/backends/cpu/sparse_rows.hpp>

#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/archs.hpp"
#include "pruning/sparse_common.hpp"

using namespace ctnn;
using namespace sparse_test;
namespace kc = ctnn::kernels::cpu;

namespace {

// A mask with exactly 2 of every 4 consecutive inputs of each unit kept (or fewer: `fewer`
// drops the second of every third group, as a group padded with a zero weight).
std::vector<std::uint8_t> two_of_four(std::size_t K, std::size_t N, rng& g, bool fewer) {
  std::vector<std::uint8_t> keep(K * N, 0);
  for (std::size_t j = 0; j < N; ++j)
    for (std::size_t g0 = 0; g0 < K; g0 += 4) {
      const std::size_t a = std::size_t(g.uniform() * 4) % 4, b = (a + 1 + std::size_t(g.uniform() * 3) % 3) % 4;
      keep[(g0 + a) * N + j] = 1;
      if (!(fewer && (g0 / 4) % 3 == 2)) keep[(g0 + b) * N + j] = 1;
    }
  return keep;
}

// The masked kernel as pack_panels (gemm.hpp) lays out a dense kernel: what every expansion must write.
template <class Arch>
std::vector<float> dense_panels(const std::vector<float>& w, const std::vector<std::uint8_t>& keep, std::size_t K,
                                std::size_t N) {
  std::vector<float> masked(K * N);
  for (std::size_t i = 0; i < K * N; ++i) masked[i] = keep[i] ? w[i] : 0.0f;
  std::vector<float> panels(kc::packed_panels_size<float, Arch>(K, N));
  kc::simd::pack_panels<Arch>(K, N, kc::strided<float>{masked.data(), N, 1}, panels.data());
  return panels;
}

// The four layouts of one masked kernel, packed.
struct packed_layouts {  // nm: its kernels' check at the same batches
  std::vector<float> bm_values, csc_values, nm_values;
  std::vector<std::uint32_t> bm_offsets, csc_starts;
  std::vector<std::uint16_t> bm_bits, csc_rows;
  std::vector<std::uint8_t> nm_meta;
};
template <std::size_t K, std::size_t N>
packed_layouts pack_all(const std::vector<float>& w, const std::vector<std::uint8_t>& keep, bool nm) {
  packed_layouts p;
  p.bm_values.resize(K * N + 1);
  p.bm_offsets.resize(kc::sparse::chunks(N) + 1);
  p.bm_bits.resize(kc::sparse::chunks(N) * K);
  kc::sparse::pack(w.data(), keep.data(), K, N, p.bm_values.data(), p.bm_values.size(), p.bm_offsets.data(),
                   p.bm_bits.data());
  p.csc_values.resize(K * N + 1);
  p.csc_starts.resize(N + 1);
  p.csc_rows.resize(K * N + 1);
  kc::rows::pack(w.data(), keep.data(), K, N, p.csc_values.data(), p.csc_values.size(), p.csc_starts.data(),
                 p.csc_rows.data());
  if (nm) {
    p.nm_values.resize(kc::nm::capacity(K, N, 2, 4));
    p.nm_meta.resize(kc::nm::meta_bytes(K, N, 2, 4));
    kc::nm::pack<2, 4>(w.data(), keep.data(), K, N, p.nm_values.data(), p.nm_meta.data());
  }
  return p;
}


// Packs prob's kept weights as bitmap storage whose values vector holds exactly the kept weights
// (an over-read is a sanitizer error) and checks forward<K, N, Arch> against the scalar reference
// and the masked dense product at batches 1..max_batch, relu where relu_at(batch) says.
template <std::size_t K, std::size_t N, class Arch, class P, class Relu>
void check_bitmap_exact(const P& prob, std::size_t max_batch, Relu relu_at, const std::string& what) {
  std::vector<float> packed(K * N);
  std::vector<std::uint32_t> offsets(kc::sparse::chunks(N) + 1);
  std::vector<std::uint16_t> bits(kc::sparse::chunks(N) * K);
  const std::size_t count = kc::sparse::pack(prob.w.data(), prob.keep.data(), K, N, packed.data(), packed.size(),
                                             offsets.data(), bits.data());
  const std::vector<float> values(packed.begin(), packed.begin() + std::ptrdiff_t(count));
  for (std::size_t batch = 1; batch <= max_batch; ++batch) {
    const bool relu = relu_at(batch);
    INFO(what << " batch=" << batch);
    const auto ref = masked_dense(prob.x, prob.w, prob.keep, prob.bias, batch, K, N, relu);
    std::vector<float> y(batch * N), yr(batch * N);
    kc::sparse::forward<K, N, Arch>(prob.x.data(), values.data(), offsets.data(), bits.data(), prob.bias.data(),
                                    y.data(), batch, relu);
    kc::sparse::forward_reference(prob.x.data(), values.data(), offsets.data(), bits.data(), prob.bias.data(),
                                  yr.data(), batch, K, N, relu);
    std::size_t bad = 0;
    for (std::size_t i = 0; i < y.size(); ++i) {
      bad += !(y[i] == doctest::Approx(yr[i]).epsilon(1e-5).scale(1.0));
      bad += !(y[i] == doctest::Approx(ref[i]).epsilon(1e-5).scale(1.0));
    }
    CHECK(bad == 0);
  }
}
}  // namespace

TEST_CASE("sparse_expand: each layout's panels equal the dense packing of the masked kernel, bit for bit") {
  auto run = [](auto arch, const char* name) {
    using Arch = decltype(arch);
    if constexpr (kc::sparse_expand::available_v<Arch, float>) {
      auto one = [&]<std::size_t K, std::size_t N>(double density, bool nm) {
        INFO(name << " K=" << K << " N=" << N << " density=" << density << " nm=" << nm);
        rng g(K * 5 + N + std::size_t(density * 10) + nm);
        auto prob = random_problem(K, N, 1, density, g);
        if (nm) prob.keep = two_of_four(K, N, g, density < 0.75);
        const auto want = dense_panels<Arch>(prob.w, prob.keep, K, N);
        const auto p = pack_all<K, N>(prob.w, prob.keep, nm);
        constexpr std::size_t NR = kc::sparse_expand::panel_width<Arch>(N);
        std::vector<float> panel(K * NR);
        // The whole panel from consecutive blocks of `step` rows (the last shorter), as forward calls it.
        auto blocks = [&](auto expander, std::size_t step) {
          std::fill(panel.begin(), panel.end(), 7.0f);
          for (std::size_t k0 = 0; k0 < K; k0 += step) expander(k0, std::min(K, k0 + step), panel.data() + k0 * NR);
        };
        for (std::size_t j0 = 0; j0 < N; j0 += NR) {
          CAPTURE(j0);
          auto same = [&](const char* layout, std::size_t step) {
            INFO(layout << ", blocks of " << step << " rows");
            std::size_t diff = 0;
            for (std::size_t i = 0; i < K * NR; ++i) diff += panel[i] != want[j0 * K + i];
            CHECK(diff == 0);
          };
          for (std::size_t step : {std::size_t(7), kc::sparse_expand::block_rows<Arch>(K, N), K}) {
            blocks(kc::sparse::bitmap_panel<Arch>(K, N, p.bm_values.data(), p.bm_offsets.data(), p.bm_bits.data(), j0),
                   step);
            same("bitmap", step);
            blocks(kc::sparse_expand::column_panel<Arch, std::uint16_t>(N, p.csc_values.data(), p.csc_starts.data(),
                                                                        p.csc_rows.data(), j0),
                   step);
            same("csc / rows", step);
          }
        }
      };
      for (double d : {0.0, 0.3, 1.0}) {
        one.template operator()<20, 5>(d, false);
        one.template operator()<20, 8>(d, false);
        one.template operator()<64, 40>(d, false);
        one.template operator()<400, 33>(d, false);
      }
      one.template operator()<64, 40>(0.5, true);  // a 2:4 mask (some groups keep one weight)
    }
  };
  CHECK(test::for_each_arch("sparse_expand panels", run) >= 1);
}

TEST_CASE("sparse layouts: forward at batches 1..70 equals the masked dense product and the scalar reference") {
  static_assert(kc::sparse_expand::per_weight_min_batch < 70 && kc::rows::pad_min > 1 && kc::rows::pad_min < 8,
                "the batches below cover every path: expanded, whole blocks, a padded block, gathers");
  auto run = [](auto arch, const char* name) {
    using Arch = decltype(arch);
    auto one = [&]<std::size_t K, std::size_t N>(double density, bool nm) {
      rng g(K * 3 + N + std::size_t(density * 10) + nm);
      constexpr std::size_t max_batch = 70;
      auto prob = random_problem(K, N, max_batch, density, g);
      if (nm) prob.keep = two_of_four(K, N, g, false);
      const auto p = pack_all<K, N>(prob.w, prob.keep, nm);
      std::vector<float> scratch(max_batch * (K + N));
      for (std::size_t batch = 1; batch <= max_batch; ++batch) {
        const bool relu = batch % 2 == 1;
        INFO(name << " K=" << K << " N=" << N << " density=" << density << " nm=" << nm << " batch=" << batch);
        const auto ref = masked_dense(prob.x, prob.w, prob.keep, prob.bias, batch, K, N, relu);
        std::vector<float> y(batch * N), yr(batch * N);
        auto close = [&](const char* layout) {
          INFO(layout);
          std::size_t bad = 0;
          for (std::size_t i = 0; i < y.size(); ++i) {
            bad += !(y[i] == doctest::Approx(ref[i]).epsilon(1e-5).scale(1.0));
            bad += !(yr[i] == doctest::Approx(ref[i]).epsilon(1e-5).scale(1.0));
          }
          CHECK(bad == 0);
        };
        kc::sparse::forward<K, N, Arch>(prob.x.data(), p.bm_values.data(), p.bm_offsets.data(), p.bm_bits.data(),
                                        prob.bias.data(), y.data(), batch, relu);
        kc::sparse::forward_reference(prob.x.data(), p.bm_values.data(), p.bm_offsets.data(), p.bm_bits.data(),
                                      prob.bias.data(), yr.data(), batch, K, N, relu);
        close("bitmap");
        kc::csc::forward<K, N, Arch>(prob.x.data(), p.csc_values.data(), p.csc_starts.data(), p.csc_rows.data(),
                                     prob.bias.data(), y.data(), batch, relu, scratch.data());
        kc::csc::forward_reference(prob.x.data(), p.csc_values.data(), p.csc_starts.data(), p.csc_rows.data(),
                                   prob.bias.data(), yr.data(), batch, K, N, relu);
        close("csc");
        kc::rows::forward<K, N, Arch>(prob.x.data(), p.csc_values.data(), p.csc_starts.data(), p.csc_rows.data(),
                                      prob.bias.data(), y.data(), batch, relu, scratch.data());
        close("rows");
        if (nm) {
          kc::nm::forward<K, N, 2, 4, Arch>(prob.x.data(), p.nm_values.data(), p.nm_meta.data(), prob.bias.data(),
                                            y.data(), batch, relu, scratch.data());
          kc::nm::forward_reference<2, 4>(prob.x.data(), p.nm_values.data(), p.nm_meta.data(), prob.bias.data(),
                                          yr.data(), batch, K, N, relu);
          close("nm<2, 4>");
        }
      }
    };
    one.template operator()<20, 8>(0.5, false);
    one.template operator()<64, 40>(0.5, true);
    one.template operator()<400, 33>(1.0, true);
    one.template operator()<36, 20>(0.5, true);
    one.template operator()<44, 23>(0.5, true);  // nm: the last 3 units as one tile, a tail of 12 inputs
    one.template operator()<28, 6>(0.5, true);   // nm: the last 2 units as one tile, less than a register
    one.template operator()<400, 33>(0.1, false);  // 10 % kept: csc, rows pad the last block, never expand
  };
  CHECK(test::for_each_arch("sparse layouts forward, batches 1..70", run) >= 1);
}

TEST_CASE("bitmap: forward with the values stored exactly equals the scalar reference at batches 1..20") {
  // The AVX2 kernel reads 8 values per granule with plain loads while enough are stored after
  // its cursor and masked loads near the end: here the values vector holds exactly the kept
  // weights (an over-read is a sanitizer error), at odd K and N, partial and empty chunks, and
  // a chunk pair (two chunks at a time at batches below 8) whose second chunk is the last.
  auto run = [](auto arch, const char* name) {
    using Arch = decltype(arch);
    auto one = [&]<std::size_t K, std::size_t N>(double density, std::size_t kept_columns) {
      rng g(K * 7 + N + std::size_t(density * 100) + kept_columns);
      constexpr std::size_t max_batch = 20;
      auto prob = random_problem(K, N, max_batch, density, g);
      for (std::size_t i = 0; i < K * N; ++i)
        if (i % N >= kept_columns) prob.keep[i] = 0;
      prob.keep[0] = 1;  // at least one weight
      std::ostringstream what;
      what << name << " K=" << K << " N=" << N << " density=" << density << " columns=" << kept_columns;
      check_bitmap_exact<K, N, Arch>(prob, max_batch, [](std::size_t b) { return b % 3 == 0; }, what.str());
    };
    one.template operator()<37, 50>(0.3, 50);    // odd K: the last row alone; chunks 0-1 a pair, 2 and 3 (2 wide)
    one.template operator()<9, 17>(0.8, 17);     // a pair whose second chunk is 1 column
    one.template operator()<33, 48>(0.5, 20);    // chunk 2 empty: the pair (0, 1) ends at the values' end
    one.template operator()<5, 64>(1.0, 64);     // everything kept, fewer rows than one step of 4
    one.template operator()<31, 32>(0.05, 32);   // most granules empty
    one.template operator()<64, 16>(0.9, 16);    // one chunk: no pair
  };
  CHECK(test::for_each_arch("bitmap forward with exact values", run) >= 1);
}

TEST_CASE("bitmap: one sample's chunk pairs (granule patterns, empty and full rows) equal the scalar reference") {
  // One sample on AVX2 runs two chunks at a time; a pair that ends 16 values before the end of
  // the values reads each row's high granule from the 8 values that end where the row does,
  // once its cursors are 8 values past the start (the first rows of chunk 0 read it from its
  // first value). Masks by granule: empty, full, low or high half only, one lane, random; the
  // first rows of the leading chunks empty or nearly so (the cursors stay behind for a while),
  // whole rows empty or kept; values stored exactly (an over-read is a sanitizer error);
  // batches 1..70 (one sample, two, and the expanded panels).
  auto run = [](auto arch, const char* name) {
    using Arch = decltype(arch);
    auto one = [&]<std::size_t K, std::size_t N>(std::size_t pattern, std::size_t lead) {
      rng g(K * 11 + N + pattern * 5 + lead);
      constexpr std::size_t max_batch = 70;
      auto prob = random_problem(K, N, max_batch, 0.5, g);
      for (std::size_t k = 0; k < K; ++k)
        for (std::size_t j = 0; j < N; ++j) {
          const std::size_t granule = (k * 7 + j / 8 * 3 + pattern) % 6, lane = j % 8;
          std::uint8_t keep = prob.keep[k * N + j];
          switch (pattern == 6 ? granule : pattern) {
            case 0: keep = 0; break;                           // empty
            case 1: keep = 1; break;                           // full
            case 2: keep = (j % 16) < 8; break;                // low granule only
            case 3: keep = (j % 16) >= 8; break;               // high granule only
            case 4: keep = lane == (k + j / 8) % 8; break;     // one lane
            default: break;                                    // random (half)
          }
          if (k < lead) keep = k + 1 == lead && j == 3;         // leading rows: empty, then one weight
          if (k % 13 == 5) keep = 0;                            // a row empty in every chunk
          if (k % 17 == 9) keep = 1;                            // a row kept whole
          prob.keep[k * N + j] = keep;
        }
      std::ostringstream what;
      what << name << " K=" << K << " N=" << N << " pattern=" << pattern << " lead=" << lead;
      check_bitmap_exact<K, N, Arch>(prob, max_batch, [](std::size_t b) { return b % 2 == 0; }, what.str());
    };
    for (std::size_t pattern = 0; pattern <= 6; ++pattern) {
      one.template operator()<101, 80>(pattern, 0);   // pairs (0, 1), (2, 3), chunk 4 alone; odd K
      one.template operator()<64, 64>(pattern, 9);    // 9 leading rows nearly empty: cursors behind
      one.template operator()<30, 37>(pattern, 2);    // a last chunk of 5 columns; pair (0, 1)
    }
  };
  CHECK(test::for_each_arch("bitmap forward, granule patterns", run) >= 1);
}
