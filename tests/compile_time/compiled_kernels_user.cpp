// Built with ctnn_compiled_kernels(ctnn_compiled_kernels_user) (cmake/ctnn_compiled_kernels.cmake):
// this file declares the default architecture's GEMM kernels extern and the library's
// network-independent functions without their bodies (CTNN_COMPILED_KERNELS,
// core/separate.hpp), and the object library the function adds defines them. Every mode
// of a plan (gemv, dot_nt, transposed, blocked with each way of reading A and B, k_outer)
// in float and double against a scalar loop; a network trained to fit a separable task
// with the summary, the epoch log and a CSV log; gzip and plain IDX files read back; and
// the outlined error paths' messages, all through the compiled object. That such a
// translation unit leaves them undefined is checked on an object by compiled_kernels_tu.cmake.
#include <doctest/doctest.h>

#include <ctnn/backends/cpu/compiled_kernels.hpp>
#include <ctnn/core/separate.hpp>
#include <ctnn/ctnn.hpp>

#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

static_assert(ctnn::kernels::cpu::compiled_kernels, "CTNN_COMPILED_KERNELS is not defined for this target");
static_assert(CTNN_DEFINITIONS == 0, "core/separate.hpp: the outlined functions should only be declared here");

namespace {
using ctnn::kernels::cpu::strided;

// C = relu?(A B + bias) by the library (default architecture) and by a scalar loop; the largest difference over
// K (the products' scale).
template <class T>
double worst_difference(std::size_t M, std::size_t N, std::size_t K, bool a_transposed, bool b_transposed, bool relu,
                        bool bias) {
  ctnn::rng g(M * 7919 + N * 31 + K);
  std::vector<T> a(M * K), b(K * N), c(M * N), bv(N);
  for (auto* v : {&a, &b, &bv})
    for (auto& e : *v) e = T(g.uniform(-1, 1));
  const strided<T> sa = a_transposed ? strided<T>{a.data(), 1, M} : strided<T>{a.data(), K, 1};
  const strided<T> sb = b_transposed ? strided<T>{b.data(), 1, K} : strided<T>{b.data(), N, 1};
  ctnn::kernels::cpu::gemm<T>(M, N, K, sa, sb, c.data(), N, bias ? bv.data() : nullptr,
                              relu ? ctnn::kernels::cpu::epilogue::relu : ctnn::kernels::cpu::epilogue::none);
  double worst = 0;
  for (std::size_t i = 0; i < M; ++i)
    for (std::size_t j = 0; j < N; ++j) {
      double s = bias ? double(bv[j]) : 0.0;
      for (std::size_t p = 0; p < K; ++p) s += double(sa.p[i * sa.rs + p * sa.cs]) * double(sb.p[p * sb.rs + j * sb.cs]);
      if (relu) s = std::max(s, 0.0);
      worst = std::max(worst, std::abs(s - double(c[i * N + j])) / double(K));
    }
  return worst;
}

struct shape {
  std::size_t M, N, K;
  bool at, bt;
  const char* mode;
};
// One case per path of make_gemm_plan (gemm/plan.hpp) on any architecture.
constexpr shape shapes[] = {
    {1, 300, 77, false, false, "gemv"},
    {1, 40, 300, false, true, "dot_nt, one row"},
    {9, 40, 300, false, true, "dot_nt, two rows"},
    {300, 3, 70, true, false, "transposed (N below a vector)"},
    {64, 100, 50, false, false, "blocked, B in place"},
    {200, 130, 90, false, false, "blocked, B packed"},
    {130, 70, 1000, true, false, "blocked, A transposed, k_outer"},
    {100, 70, 40, true, true, "blocked, A and B strided"},
};
}  // namespace

TEST_CASE("compiled kernels: every GEMM mode in float and double equals a scalar loop") {
  for (const shape& s : shapes) {
    INFO(s.mode << ": M=" << s.M << " N=" << s.N << " K=" << s.K);
    for (bool relu : {false, true}) {
      CHECK(worst_difference<float>(s.M, s.N, s.K, s.at, s.bt, relu, true) < 1e-5);
      CHECK(worst_difference<double>(s.M, s.N, s.K, s.at, s.bt, relu, false) < 1e-12);
    }
  }
}

TEST_CASE("compiled kernels: a network trains through them") {
  using net = ctnn::sequential<ctnn::input<8>, ctnn::dense<32, ctnn::relu>, ctnn::dense<2>>;
  constexpr std::size_t n = 512;
  std::vector<float> x(n * 8);
  std::vector<std::int32_t> y(n);
  ctnn::rng g(3);
  for (std::size_t i = 0; i < n; ++i) {
    float s = 0;
    for (std::size_t j = 0; j < 8; ++j) s += (x[i * 8 + j] = float(g.uniform(-1, 1)));
    y[i] = s > 0 ? 1 : 0;
  }
  const ctnn::data::in_memory<ctnn::shape<8>, ctnn::sparse_labels> data{x, y};
  auto m = ctnn::make_model<net>(1);
  ctnn::adam opt{1e-2};
  const auto csv = std::filesystem::temp_directory_path() / "ctnn_compiled_kernels_log.csv";
  std::ostringstream log;
  const auto h = ctnn::fit(m, ctnn::sparse_categorical_crossentropy{.from_logits = true}, opt, data.batch(32),
                           ctnn::epochs{20}, ctnn::sparse_categorical_accuracy{}, ctnn::epoch_logger{log},
                           ctnn::csv_logger{csv.string()});
  CHECK(h["sparse_categorical_accuracy"].back() > 0.95);
  CHECK(h.epochs() == 20);                                   // history::append
  CHECK(log.str().find("epoch 20/20") != std::string::npos);  // epoch_logger::write<void>
  std::ifstream in(csv);
  std::string header;
  std::getline(in, header);
  CHECK(header.find("sparse_categorical_accuracy") != std::string::npos);  // csv_logger::write<void>, write_file_atomically
  std::filesystem::remove(csv);
  std::ostringstream table;
  ctnn::summary<net>(table);  // print_summary<void>
  CHECK(table.str().find("Total params: 354") != std::string::npos);
}

namespace {
// An IDX file of one dimension (ubyte values), plain or gzip-compressed.
void write_idx(const std::filesystem::path& p, const std::vector<unsigned char>& v, bool gz) {
  std::vector<unsigned char> d = {0, 0, 0x08, 1, 0, 0, 0, static_cast<unsigned char>(v.size())};
  d.insert(d.end(), v.begin(), v.end());
  if (!gz) {
    std::ofstream(p, std::ios::binary).write(reinterpret_cast<const char*>(d.data()), std::streamsize(d.size()));
    return;
  }
  gzFile f = gzopen(p.string().c_str(), "wb");
  REQUIRE(f != nullptr);
  CHECK(gzwrite(f, d.data(), unsigned(d.size())) == int(d.size()));
  gzclose(f);
}
}  // namespace

TEST_CASE("compiled kernels: IDX files and the outlined error paths come from the compiled object") {
  const auto dir = std::filesystem::temp_directory_path();
  const std::vector<unsigned char> v = {3, 1, 4, 1, 5};
  for (bool gz : {false, true}) {
    const auto p = dir / (gz ? "ctnn_compiled_kernels.idx.gz" : "ctnn_compiled_kernels.idx");
    write_idx(p, v, gz);
    const ctnn::data::idx_array a = ctnn::data::read_idx(p);  // read_idx, gunzip, idx_announced_size, parse_idx
    CHECK(a.dims == std::vector<std::uint32_t>{5});
    CHECK(a.as<std::int32_t>() == std::vector<std::int32_t>{3, 1, 4, 1, 5});
    std::filesystem::remove(p);
  }
  CHECK_THROWS_WITH_AS(ctnn::data::read_idx(dir / "ctnn_compiled_kernels_missing.idx"),
                       doctest::Contains("ctnn_compiled_kernels_missing.idx"), ctnn::data::idx_error);  // read_failure_reason
  CHECK_THROWS_WITH_AS(ctnn::data::parse_idx({1, 0, 8, 1}, "bad.idx"), doctest::Contains("magic"), ctnn::data::idx_error);
  CHECK_THROWS_WITH_AS(ctnn::data::fashion_mnist::detail::find("/nonexistent-ctnn", "x"), doctest::Contains("neither"),
                       ctnn::data::idx_error);
  CHECK_THROWS_WITH_AS(ctnn::adam(0.001, 1.0), "adam: beta_1 must be in [0, 1), got 1",
                       std::invalid_argument);  // throw_out_of_range
  CHECK_THROWS_WITH_AS(ctnn::adam(0.001, 0.9, 0.999, -1.0), "adam: epsilon must be finite and > 0, got -1",
                       std::invalid_argument);  // throw_not_positive
}
