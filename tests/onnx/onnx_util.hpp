// tests/onnx/onnx_util.hpp — what the ONNX test files share: a temporary folder, an exception's
// message, random inputs, running a model file with onnxruntime (tests/onnx/run_onnxruntime.py,
// skipped with a message where python3, numpy or onnxruntime are missing) and comparing outputs.
#pragma once
#include <doctest/doctest.h>

#include <ctnn/core/rng.hpp>
#include <ctnn/npy.hpp>
#include <ctnn/xtensor.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <string>
#include <vector>
#include <sys/wait.h>
#include <unistd.h>

namespace ctnn::test::onnx_util {

namespace fs = std::filesystem;

struct temp_dir {
  fs::path path;
  explicit temp_dir(const std::string& tag = "onnx")
      : path(fs::temp_directory_path() / ("ctnn_" + tag + "_" + std::to_string(::getpid()))) {
    fs::create_directories(path);
  }
  ~temp_dir() { fs::remove_all(path); }
};

inline std::string message_of(auto&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no exception)";
}

template <Shape S>
xt::xtensor<float, S::rank + 1> random_inputs(std::size_t n, std::uint64_t seed) {
  rng g(seed);
  auto x = xtd::batch_tensor<float, S>(n);
  for (auto& v : x) v = float(g.uniform(-1, 1));
  return x;
}

// Runs the model file with onnxruntime on x; false (after CTNN_SKIP) when python3,
// numpy or onnxruntime are missing.
// unoptimized: also without graph optimizations (QDQ nodes as written, no fused int8 kernels).
template <std::size_t R>
bool onnxruntime_predict(const fs::path& model_file, const auto& x, xt::xtensor<float, R>& y, const fs::path& dir,
                         xt::xtensor<float, R>* unoptimized = nullptr) {
  save_npy(dir / "x.npy", x);
  const std::string cmd = "python3 " CTNN_ONNX_TEST_DIR "/run_onnxruntime.py " + model_file.string() + " " +
                          (dir / "x.npy").string() + " " + (dir / "y.npy").string() +
                          (unoptimized ? " " + (dir / "y_noopt.npy").string() : "");
  const int rc = std::system(cmd.c_str());
  if (rc != 0 && WIFEXITED(rc) && (WEXITSTATUS(rc) == 3 || WEXITSTATUS(rc) == 127)) {
    MESSAGE("CTNN_SKIP: python3 with numpy and onnxruntime is not available (pip install onnxruntime)");
    return false;
  }
  REQUIRE(rc == 0);
  y = load_npy<float, R>(dir / "y.npy");
  if (unoptimized) *unoptimized = load_npy<float, R>(dir / "y_noopt.npy");
  return true;
}

inline double max_abs_diff(const auto& a, const auto& b) {
  REQUIRE(a.size() == b.size());
  double d = 0;
  auto i = a.begin();
  for (auto j = b.begin(); j != b.end(); ++i, ++j) d = std::max(d, std::abs(double(*i) - double(*j)));
  return d;
}

template <class M>
std::vector<float> params(const M& m) {
  return {m.parameters().begin(), m.parameters().end()};
}

}  // namespace ctnn::test::onnx_util
