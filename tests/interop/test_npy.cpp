// npy.hpp: .npy import/export of inputs, outputs and every variable through xtensor's xnpy.
#include <doctest/doctest.h>

#include <ctnn/layers/batch_norm.hpp>
#include <ctnn/layers/dense.hpp>
#include <ctnn/layers/reshape.hpp>
#include <ctnn/npy.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>

using namespace ctnn;
namespace fs = std::filesystem;

namespace {
using net = sequential<input<2, 2>, flatten, dense<5, ctnn::relu>, batch_normalization<>, dense<3>>;

struct temp_dir {
  fs::path path = fs::temp_directory_path() / ("ctnn_npy_" + std::to_string(::getpid()));
  temp_dir() { fs::create_directories(path); }
  ~temp_dir() { fs::remove_all(path); }
};

std::string message_of(auto&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no exception)";
}

xt::xtensor<float, 3> inputs(std::size_t n) {
  xt::xtensor<float, 3> x = xt::xtensor<float, 3>::from_shape({n, 2, 2});
  for (std::size_t i = 0; i < x.size(); ++i) x.data()[i] = std::cos(float(i) * 0.3f);
  return x;
}

std::vector<float> values(auto s) { return std::vector<float>(s.begin(), s.end()); }
}  // namespace

TEST_CASE("save_npy / load_npy / load_inputs_npy round trip, leaving no temporary") {
  temp_dir d;
  const auto x = inputs(5);
  save_npy(d.path / "x.npy", x);
  CHECK(load_npy<float, 3>(d.path / "x.npy") == x);
  using M = model<net>;
  const auto in = load_inputs_npy<M>(d.path / "x.npy");
  static_assert(std::is_same_v<std::remove_cvref_t<decltype(in)>, xt::xtensor<float, 3>>);
  CHECK(in == x);
  // outputs: predict's result saved and read back bit for bit
  auto m = make_model<net>(3);
  const auto y = ctnn::predict(m, in);
  save_npy(d.path / "y.npy", y);
  CHECK(load_npy<float, 2>(d.path / "y.npy") == y);
  // only the two files: no temporary left beside them
  CHECK(std::distance(fs::directory_iterator(d.path), fs::directory_iterator{}) == 2);
}

TEST_CASE("load_npy: a wrong dtype, rank or shape, a truncated or foreign file is a clear error") {
  temp_dir d;
  const fs::path p = d.path / "x.npy";
  save_npy(p, xt::xtensor<double, 3>(xt::cast<double>(inputs(2))));
  CHECK(message_of([&] { load_npy<float, 3>(p); }) ==
        "load_npy: " + p.string() + ": holds float64 ('<f8') values, float32 ('<f4') are wanted");
  save_npy(p, inputs(2));
  CHECK(message_of([&] { load_npy<float, 2>(p); }) == "load_npy: " + p.string() + ": has shape (2, 2, 2), rank 2 is wanted");
  save_npy(p, xt::xtensor<float, 2>(xt::zeros<float>({4, 3})));
  CHECK(message_of([&] { load_inputs_npy<model<net>>(p); }) ==
        "load_inputs_npy: the input has shape (4, 3); this network takes (n, 2, 2)");
  {
    std::string bytes(xt::dump_npy(inputs(2)));
    std::ofstream(p, std::ios::binary) << bytes.substr(0, bytes.size() - 5);
  }
  CHECK(message_of([&] { load_npy<float, 3>(p); }) ==
        "load_npy: " + p.string() + ": truncated: the header announces more values than the file holds");
  {
    // a corrupt header announcing 2^61 values (16 EiB) is refused before anything is allocated for it
    std::string bytes(xt::dump_npy(inputs(2)));
    const std::string from = "'shape': (2, 2, 2), ";
    const std::string to = "'shape': (2305843009213693952,), ";
    const auto at = bytes.find(from);
    REQUIRE(at != std::string::npos);
    bytes.replace(at, from.size(), to);
    // keep the header length: take the extra characters out of the space padding
    const auto pad = bytes.find("   ", at);
    REQUIRE(pad != std::string::npos);
    bytes.erase(pad, to.size() - from.size());
    std::ofstream(p, std::ios::binary) << bytes;
  }
  CHECK(message_of([&] { load_npy<float, 1>(p); }) ==
        "load_npy: " + p.string() + ": truncated: the header announces more values than the file holds");
  std::ofstream(p, std::ios::binary) << "hello, this is not numpy";
  CHECK(message_of([&] { load_npy<float, 3>(p); }).starts_with("load_npy: " + p.string() + ": not a valid .npy file ("));
  CHECK(message_of([&] { load_npy<float, 3>(d.path / "missing.npy"); }) ==
        "load_npy: " + (d.path / "missing.npy").string() + ": no such file");
}

TEST_CASE("save_variables_npy / load_variables_npy carry every variable, state included") {
  temp_dir d;
  auto a = make_model<net>(1);
  // give batch_norm's moving statistics values that differ from their initial ones
  auto mean = variable<2, "moving_mean">(a);
  for (std::size_t i = 0; i < mean.size(); ++i) mean(i) = 0.25f * float(i);
  save_variables_npy(a, d.path);
  for (const char* f : {"layer1_kernel", "layer1_bias", "layer2_gamma", "layer2_beta", "layer2_moving_mean",
                        "layer2_moving_variance", "layer3_kernel", "layer3_bias"})
    CHECK(fs::exists(d.path / (std::string(f) + ".npy")));
  CHECK(load_npy<float, 2>(d.path / "layer1_kernel.npy") == variable<1, "kernel">(a));
  auto b = make_model<net>(2);
  REQUIRE(values(b.parameters()) != values(a.parameters()));
  load_variables_npy(b, d.path);
  CHECK(values(b.parameters()) == values(a.parameters()));
  CHECK(values(b.state()) == values(a.state()));
  const auto x = inputs(4);
  CHECK(ctnn::predict(b, x) == ctnn::predict(a, x));
}

TEST_CASE("load_variables_npy names the first mismatching file and changes nothing") {
  temp_dir d;
  auto a = make_model<net>(1);
  save_variables_npy(a, d.path);
  save_npy(d.path / "layer3_kernel.npy", xt::xtensor<float, 2>(xt::zeros<float>({3, 5})));
  auto b = make_model<net>(2);
  const auto before = values(b.parameters());
  CHECK(message_of([&] { load_variables_npy(b, d.path); }) ==
        "load_variables_npy: " + (d.path / "layer3_kernel.npy").string() +
            ": has shape (3, 5) but layer 3's 'kernel' is (5, 3)");
  CHECK(values(b.parameters()) == before);
  save_npy(d.path / "layer3_kernel.npy", xt::xtensor<double, 2>(xt::zeros<double>({5, 3})));
  CHECK(message_of([&] { load_variables_npy(b, d.path); }) ==
        "load_variables_npy: " + (d.path / "layer3_kernel.npy").string() +
            ": holds float64 ('<f8') values, float32 ('<f4') are wanted");
  fs::remove(d.path / "layer2_beta.npy");
  CHECK(message_of([&] { load_variables_npy(b, d.path); }) ==
        "load_variables_npy: " + (d.path / "layer2_beta.npy").string() + ": no such file");
  CHECK(values(b.parameters()) == before);
}

TEST_CASE("NumPy reads the variables ctnn writes (skipped without python3 and numpy)") {
  if (std::system("python3 -c 'import numpy' >/dev/null 2>&1") != 0) {
    MESSAGE("CTNN_SKIP: python3 with numpy is not available");
    return;
  }
  temp_dir d;
  auto a = make_model<net>(1);
  save_variables_npy(a, d.path);
  const auto k = variable<3, "kernel">(a);
  const std::string cmd = "python3 -c \"import numpy as np; k = np.load('" + (d.path / "layer3_kernel.npy").string() +
                          "'); assert k.dtype == np.float32 and k.shape == (5, 3), k.shape; print(repr(float(k[4, 2])))\" > " +
                          (d.path / "out.txt").string();
  REQUIRE(std::system(cmd.c_str()) == 0);
  std::ifstream in(d.path / "out.txt");
  double v = 0;
  in >> v;
  CHECK(float(v) == k(4, 2));
}
