// kernels/tiled_gemm.hpp, the tile loop of the CUDA dense GEMM with a rule
// epilogue (backends/cuda/gemm_epilogue.cuh), run on the CPU: every block of
// the grid, every thread of a block, phase by phase (stage for all threads,
// then multiply for all: what __syncthreads separates), with the row-block
// stride of a grid capped below the row blocks. It checks the index
// arithmetic: every output written once, the zero padding past m, K and N,
// the bias and the rule applied once, against the scalar reference within
// float32 accumulation (2e-5 K). Not tested here: the CUDA launch itself,
// shared memory, the 16-bit loads and stores (tests/cuda/test_gemm_epilogue.cu).
#include <doctest/doctest.h>

#include <ctnn/core/rng.hpp>
#include <ctnn/kernels/functors.hpp>
#include <ctnn/kernels/reference.hpp>
#include <ctnn/kernels/tiled_gemm.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

using namespace ctnn;
using G = kernels::gemm_tile;

namespace {
// A stored value that counts the writes to it (the storage type T of the phases).
struct cell {
  float v = NAN;  // NaN until written: a missed output shows
  int writes = 0;
  cell& operator=(float f) {
    v = f;
    ++writes;
    return *this;
  }
};

// The kernel's body for a grid (grid_x, grid_y), emulated.
template <class E>
void emulate(const cell* x, const cell* w, const cell* b, cell* y, std::size_t m, std::size_t K, std::size_t N,
             const E& e, std::size_t grid_y) {
  const auto load = [](cell c) { return c.v; };
  const auto store = [](float v) { return v; };
  std::vector<G::accumulators> acc(G::threads);
  G::a_tile as;
  G::b_tile bs;
  for (std::size_t bx = 0; bx < G::grid_x(N); ++bx)
    for (std::size_t by = 0; by < grid_y; ++by)
      for (std::size_t rb = by; rb < G::row_blocks(m); rb += grid_y) {
        const std::size_t row0 = rb * G::BM, col0 = bx * G::BN;
        for (auto& a : acc)
          for (auto& r : a)
            for (auto& v : r) v = 0;
        for (std::size_t k0 = 0; k0 < K; k0 += G::BK) {
          for (auto& r : as)
            for (auto& v : r) v = NAN;  // what no thread staged must not be read
          for (auto& r : bs)
            for (auto& v : r) v = NAN;
          for (unsigned t = 0; t < G::threads; ++t) G::stage(t, row0, col0, k0, x, w, m, K, N, as, bs, load);
          for (unsigned t = 0; t < G::threads; ++t) G::multiply(t, as, bs, acc[t]);
        }
        for (unsigned t = 0; t < G::threads; ++t) G::finish(t, row0, col0, acc[t], b, y, m, N, e, load, store);
      }
}

void check(std::size_t m, std::size_t K, std::size_t N, bool bias, std::size_t grid_y) {
  rng g(m * 1000 + K * 10 + N);
  std::vector<float> x(m * K), w(K * N), b(N), want(m * N);
  for (auto* v : {&x, &w, &b})
    for (auto& s : *v) s = float(g.uniform(-1, 1));
  auto cells = [](const std::vector<float>& v) {
    std::vector<cell> c(v.size());
    for (std::size_t i = 0; i < v.size(); ++i) c[i].v = v[i];
    return c;
  };
  const std::vector<cell> xc = cells(x), wc = cells(w), bc = cells(b);
  std::vector<cell> y(m * N);
  const fn::chain e{fn::affine_fn<float>{1.0f, 0.5f}, fn::leaky_relu_fn<float>{0.25f}};  // leaky_relu(z + 0.5)
  kernels::reference::gemm_nn(x.data(), w.data(), bias ? b.data() : nullptr, want.data(), m, K, N);
  for (auto& v : want) v = v + 0.5f > 0 ? v + 0.5f : 0.25f * (v + 0.5f);
  emulate(xc.data(), wc.data(), bias ? bc.data() : nullptr, y.data(), m, K, N, e, grid_y);
  double worst = 0;
  for (std::size_t i = 0; i < y.size(); ++i)
    worst = std::max(worst, std::isnan(y[i].v) ? 1e30 : std::abs(double(y[i].v) - want[i]));
  INFO("m=" << m << " K=" << K << " N=" << N << " bias=" << bias << " grid_y=" << grid_y);
  CHECK(worst <= 2e-5 * double(K));
  CHECK(std::all_of(y.begin(), y.end(), [](const cell& c) { return c.writes == 1; }));
}
}  // namespace

static_assert(G::TM * G::TY == G::BM && G::TN * G::TX == G::BN);
static_assert(G::grid_y(1) == 1 && G::grid_y(65) == 2 && G::grid_y(std::size_t(1) << 40) == G::max_grid_y);

TEST_CASE("the tiled GEMM's tile loop, run thread by thread on the CPU, equals the reference on awkward shapes") {
  for (std::size_t m : {1, 3, 64, 257})
    for (std::size_t K : {1, 17, 40})
      for (std::size_t N : {1, 10, 130}) check(m, K, N, true, G::grid_y(m));
  check(257, 17, 10, false, G::grid_y(257));
  check(257, 17, 130, true, 2);  // fewer row blocks in the grid than in y: the stride covers the rest
  check(200, 33, 70, true, 1);
}
