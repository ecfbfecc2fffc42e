// weights.hpp and atomic_file.hpp: round trip, wrong network, corruption, atomicity; the version-2
// format of logical tensors and the loading of version-1 files.
#include <doctest/doctest.h>

#include <ctnn/io/atomic_file.hpp>
#include <ctnn/io/weights.hpp>
#include <ctnn/backends/cpu/half_ops.hpp>
#include <ctnn/layers/batch_norm.hpp>
#include <ctnn/layers/reshape.hpp>
#include <ctnn/layers/dense.hpp>
#include <ctnn/layers/dropout.hpp>
#include <ctnn/layers/sparse_dense_csc.hpp>
#include <ctnn/pruning/prune.hpp>
#include <ctnn/train/model.hpp>
#include <ctnn/train/runtime_factors.hpp>

#include "io/weights_file.hpp"

#include <array>
#include <cstdint>
#include <cstring>
#include <limits>
#include <span>
#include <tuple>
#include <filesystem>
#include <string>
#include <fstream>
#include <vector>

using namespace ctnn;
namespace fs = std::filesystem;

namespace {
using net = sequential<input<3>, dense<4, relu>, dense<2>>;
using other = sequential<input<3>, dense<5, relu>, dense<2>>;
struct tmpdir {
  fs::path p;
  tmpdir() {
    p = fs::temp_directory_path() / ("ctnn_w_" + std::to_string(::getpid()));
    fs::create_directories(p);
  }
  ~tmpdir() { fs::remove_all(p); }
};
std::vector<char> slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}
void spit(const fs::path& p, const std::vector<char>& d) {
  std::ofstream(p, std::ios::binary).write(d.data(), std::streamsize(d.size()));
}
}  // namespace

TEST_CASE("weights round trip exactly") {
  tmpdir t;
  auto a = make_model<net>(1), b = make_model<net>(2);
  io::save_weights(a, t.p / "w.ctnn");
  io::load_weights(b, t.p / "w.ctnn");
  CHECK(std::vector<float>(a.parameters().begin(), a.parameters().end()) ==
        std::vector<float>(b.parameters().begin(), b.parameters().end()));
  // nothing but the file itself is left in the directory
  CHECK(std::distance(fs::directory_iterator(t.p), fs::directory_iterator{}) == 1);
}

TEST_CASE("loading into a different network names both architectures") {
  tmpdir t;
  auto a = make_model<net>(1);
  auto o = make_model<other>(1);
  io::save_weights(a, t.p / "w.ctnn");
  CHECK_THROWS_WITH_AS(io::load_weights(o, t.p / "w.ctnn"),
                       doctest::Contains("saved from the network 'input<3> | dense<4, relu> | dense<2>' but this model is "
                                         "'input<3> | dense<5, relu> | dense<2>'"),
                       io::weights_error);
  auto d = make_model<net, double>(1);
  CHECK_THROWS_WITH_AS(io::load_weights(d, t.p / "w.ctnn"), doctest::Contains("holds float32 values but this model uses float64"), io::weights_error);
}

TEST_CASE("truncated, corrupted and foreign files are rejected and the model is untouched") {
  tmpdir t;
  auto a = make_model<net>(1), b = make_model<net>(2);
  const std::vector<float> before(b.parameters().begin(), b.parameters().end());
  io::save_weights(a, t.p / "w.ctnn");
  const auto good = slurp(t.p / "w.ctnn");

  auto trunc = good;
  trunc.resize(good.size() - 10);
  spit(t.p / "t.ctnn", trunc);
  CHECK_THROWS_WITH_AS(io::load_weights(b, t.p / "t.ctnn"), doctest::Contains("truncated"), io::weights_error);

  auto flip = good;
  flip[good.size() / 2] ^= 0x10;
  spit(t.p / "c.ctnn", flip);
  CHECK_THROWS_WITH_AS(io::load_weights(b, t.p / "c.ctnn"), doctest::Contains("checksum mismatch"), io::weights_error);

  spit(t.p / "x.ctnn", std::vector<char>(100, 'x'));
  CHECK_THROWS_WITH_AS(io::load_weights(b, t.p / "x.ctnn"), doctest::Contains("wrong magic"), io::weights_error);
  CHECK_THROWS_WITH_AS(io::load_weights(b, t.p / "none.ctnn"), doctest::Contains("no such file"), io::weights_error);
  CHECK(std::vector<float>(b.parameters().begin(), b.parameters().end()) == before);
}

TEST_CASE("a failed write leaves the old file intact and no temporary behind") {
  tmpdir t;
  io::write_file_atomically(t.p / "f", "old");
  fs::create_directory(t.p / "dir");
  // a directory is never replaced
  std::ofstream(t.p / "dir" / "keep") << "x";
  CHECK_THROWS_WITH_AS(io::write_file_atomically(t.p / "dir", "new"), doctest::Contains("is a directory"),
                       std::runtime_error);
  CHECK_THROWS_AS(io::write_file_atomically(t.p / "no" / "such" / "dir" / "f", "x"), std::runtime_error);
  std::size_t n = 0;
  for (auto& e : fs::directory_iterator(t.p)) n += e.path().filename().string().find(".tmp-") != std::string::npos;
  CHECK(n == 0);
  CHECK(slurp(t.p / "f") == std::vector<char>{'o', 'l', 'd'});
}

namespace {
using bn_net = sequential<input<3, 2>, batch_norm, flatten, dense<2>>;
void put_crc(std::vector<char>& d) {  // rewrites the trailing CRC-32 after an edit
  const auto crc = std::uint32_t(::crc32(0L, reinterpret_cast<const Bytef*>(d.data()), uInt(d.size() - 4)));
  std::memcpy(d.data() + d.size() - 4, &crc, 4);
}
}  // namespace

TEST_CASE("version 2 holds logical tensors: names, dtypes, shapes, no padding, state included") {
  tmpdir t;
  auto a = make_model<bn_net>(1);
  auto st = a.state();
  for (std::size_t i = 0; i < bn_net::state_count; ++i) st[i] = float(i) + 0.5f;  // moving statistics must travel too
  io::save_weights(a, t.p / "w.ctnn");
  const auto d = slurp(t.p / "w.ctnn");
  // header 8 + 4 + 8 + 4 + text + 4; per tensor 4 + 4 + 4 + name + 8 * rank + values; CRC 4
  const std::string arch = bn_net::spec_string();
  std::size_t want = 8 + 4 + 8 + 4 + arch.size() + 4 + 4;
  std::vector<std::string> names;
  a.for_each_variable([&](const variable_ref& v) {
    want += 12 + v.name.size() + 8 * v.rank + v.extent * v.element_bytes;
    names.emplace_back(v.name);
  });
  CHECK(d.size() == want);
  CHECK(names == std::vector<std::string>{"gamma", "beta", "moving_mean", "moving_variance", "kernel", "bias"});
  auto b = make_model<bn_net>(2);
  io::load_weights(b, t.p / "w.ctnn");
  CHECK(std::vector<float>(b.state().begin(), b.state().end()) == std::vector<float>(st.begin(), st.end()));
  CHECK(std::vector<float>(b.parameters().begin(), b.parameters().end()) ==
        std::vector<float>(a.parameters().begin(), a.parameters().end()));
}

TEST_CASE("weights: the last byte is checksummed, version, dtype, shape and fingerprint mismatches are named") {
  tmpdir t;
  auto a = make_model<net>(1), b = make_model<net>(2);
  const std::vector<float> before(b.parameters().begin(), b.parameters().end());
  io::save_weights(a, t.p / "w.ctnn");
  const auto good = slurp(t.p / "w.ctnn");

  auto last = good;
  last[good.size() - 5] ^= 0x01;  // the last value byte, just before the CRC
  spit(t.p / "l.ctnn", last);
  CHECK_THROWS_WITH_AS(io::load_weights(b, t.p / "l.ctnn"), doctest::Contains("checksum mismatch"), io::weights_error);
  auto crc_byte = good;
  crc_byte.back() ^= 0x01;
  spit(t.p / "k.ctnn", crc_byte);
  CHECK_THROWS_WITH_AS(io::load_weights(b, t.p / "k.ctnn"), doctest::Contains("checksum mismatch"), io::weights_error);

  auto v3 = good;
  v3[8] = 3;
  put_crc(v3);
  spit(t.p / "v.ctnn", v3);
  CHECK_THROWS_WITH_AS(io::load_weights(b, t.p / "v.ctnn"),
                       doctest::Contains("format version 3 is not supported (this build reads versions 1 and 2)"),
                       io::weights_error);

  auto fp = good;
  fp[12] ^= 0x40;
  put_crc(fp);
  spit(t.p / "f.ctnn", fp);
  CHECK_THROWS_WITH_AS(io::load_weights(b, t.p / "f.ctnn"), doctest::Contains("saved from the network"), io::weights_error);

  // the first tensor (layer 1's kernel, 3x4): its dtype byte, then its first dimension
  const std::size_t first = 8 + 4 + 8 + 4 + net::spec_string().size() + 4;
  auto dt = good;
  dt[first + 5] = 2;  // float64
  put_crc(dt);
  spit(t.p / "d.ctnn", dt);
  CHECK_THROWS_WITH_AS(io::load_weights(b, t.p / "d.ctnn"),
                       doctest::Contains("layer 1 parameter 'kernel' holds float64 values but this model uses float32"),
                       io::weights_error);
  auto sh = good;
  sh[first + 12 + 6] = 5;  // after the 12-byte tensor header and the name "kernel": dims[0] = 5
  put_crc(sh);
  spit(t.p / "s.ctnn", sh);
  CHECK_THROWS_WITH_AS(io::load_weights(b, t.p / "s.ctnn"),
                       doctest::Contains("layer 1 parameter 'kernel' has shape [5x4] but this model's is [3x4]"),
                       io::weights_error);
  CHECK(std::vector<float>(b.parameters().begin(), b.parameters().end()) == before);
  CHECK_THROWS_WITH_AS(io::load_weights(b, t.p), doctest::Contains("is a directory"), io::weights_error);
}

TEST_CASE("version-1 files (the padded arena of ctnn 0.1) still load") {
  tmpdir t;
  auto a = make_model<bn_net>(3);
  auto st = a.state();
  for (std::size_t i = 0; i < bn_net::state_count; ++i) st[i] = 2.0f + float(i);
  const auto p = a.parameters();
  const std::string arch = bn_net::spec_string();
  std::string out(io::weights_magic, 8);
  auto put = [&](auto v) { out.append(reinterpret_cast<const char*>(&v), sizeof v); };
  put(std::uint32_t(1));
  put(std::uint32_t(4));
  put(bn_net::fingerprint());
  put(std::uint64_t(p.size()));
  put(std::uint64_t(st.size()));
  put(std::uint32_t(arch.size()));
  out += arch;
  out.append(reinterpret_cast<const char*>(p.data()), p.size_bytes());
  out.append(reinterpret_cast<const char*>(st.data()), st.size_bytes());
  put(std::uint32_t(::crc32(0L, reinterpret_cast<const Bytef*>(out.data()), uInt(out.size()))));
  std::vector<char> v1(out.begin(), out.end());
  spit(t.p / "v1.ctnn", v1);
  auto b = make_model<bn_net>(4);
  io::load_weights(b, t.p / "v1.ctnn");
  CHECK(std::vector<float>(b.parameters().begin(), b.parameters().end()) == std::vector<float>(p.begin(), p.end()));
  CHECK(std::vector<float>(b.state().begin(), b.state().end()) == std::vector<float>(st.begin(), st.end()));
  auto d = make_model<bn_net, double>(4);
  CHECK_THROWS_WITH_AS(io::load_weights(d, t.p / "v1.ctnn"),
                       doctest::Contains("a version-1 file, holds 32-bit values but this model uses 64-bit values"),
                       io::weights_error);
}

// ---- every element type the loader reads has its shape checked; values it checks ----
namespace {
// A model holding one uint32 tensor [2 x 3] (no layer declares a saved uint32
// buffer, but the format and the loader accept the type).
struct u32_net {
  static std::string spec_string() { return "u32 test"; }
  static std::uint64_t fingerprint() { return 0x5eed; }
};
struct u32_model {
  using network = u32_net;
  using variable_type = float;
  mutable std::array<std::uint32_t, 6> values{1, 2, 3, 4, 5, 6};
  std::span<float> parameters() const { return {}; }  // what a version-1 file would load into
  std::span<float> state() const { return {}; }
  template <class F>
  void for_each_variable(F&& f) const {
    variable_ref v;
    v.name = "counts";
    v.kind = role::metadata;
    v.type = elem::u32;
    v.element_bytes = 4;
    v.dims = {2, 3};
    v.rank = 2;
    v.extent = 6;
    v.data = reinterpret_cast<std::byte*>(values.data());
    f(v);
  }
};
static_assert(io::SavableModel<u32_model>);

// The bytes of every variable of m, to see that a refused load changed nothing.
template <class M>
std::vector<std::byte> variable_bytes(const M& m) {
  std::vector<std::byte> out;
  m.for_each_variable([&](const variable_ref& v) {
    for (std::size_t i = 0; i < v.extent * v.element_bytes; ++i) out.push_back(v.data[i]);
  });
  return out;
}

// Saves a model made by make(seed), gives tensor `name` of layer `layer` (0-based) a
// shape of the same rank it does not have (its two dimensions swapped, or one more
// element), and checks that another model refuses the file with the shapes named and is
// left as it was.
template <class Make>
void check_wrong_shape(const fs::path& dir, Make make, std::size_t layer, const std::string& name,
                       std::uint8_t dtype, const std::string& want) {
  CAPTURE(name);
  auto a = make(1), b = make(2);
  const auto before = variable_bytes(b);
  io::save_weights(a, dir / "w.ctnn");
  auto d = weights_file::slurp(dir / "w.ctnn");
  const auto t = weights_file::find(d, layer, name);
  REQUIRE(t.dtype == dtype);
  if (t.rank == 2) {
    const auto d0 = weights_file::get<std::uint64_t>(d, t.dims_at), d1 = weights_file::get<std::uint64_t>(d, t.dims_at + 8);
    REQUIRE(d0 != d1);
    weights_file::set(d, t.dims_at, d1);
    weights_file::set(d, t.dims_at + 8, d0);
  } else {
    weights_file::set(d, t.dims_at, weights_file::get<std::uint64_t>(d, t.dims_at) + 1);
  }
  weights_file::put_crc(d);
  weights_file::spit(dir / "s.ctnn", d);
  CHECK_THROWS_WITH_AS(io::load_weights(b, dir / "s.ctnn"), doctest::Contains(want.c_str()), io::weights_error);
  CHECK(variable_bytes(b) == before);
}
}  // namespace

TEST_CASE("weights: a tensor of every element type the loader reads has its shape checked (float32, float64, float16, bfloat16, uint8 masks and indices, uint32)") {
  tmpdir t;
  using pruned = sequential<input<3>, prune_low_magnitude<dense<4>, constant_sparsity<0.5, 0>>, dense<2>>;
  using sparse = sequential<input<8>, sparse_dense_csc<8, 4, 12>>;
  check_wrong_shape(t.p, [](int s) { return make_model<net>(s); }, 0, "kernel", 1,
                    "layer 1 parameter 'kernel' has shape [4x3] but this model's is [3x4]");
  check_wrong_shape(t.p, [](int s) { return make_model<net, double>(s); }, 0, "kernel", 2,
                    "layer 1 parameter 'kernel' has shape [4x3] but this model's is [3x4]");
  check_wrong_shape(t.p, [](int s) { return make_model<net, precision::float16>(s); }, 1, "bias", 5,
                    "layer 2 parameter 'bias' has shape [3] but this model's is [2]");
  check_wrong_shape(t.p, [](int s) { return make_model<net, precision::policy<bfloat16_t>>(s); }, 0, "kernel", 6,
                    "layer 1 parameter 'kernel' has shape [4x3] but this model's is [3x4]");
  check_wrong_shape(t.p, [](int s) { return make_model<pruned>(s); }, 0, "kernel_mask", 3,
                    "layer 1 mask 'kernel_mask' has shape [4x3] but this model's is [3x4]");
  check_wrong_shape(t.p, [](int s) { return make_model<sparse>(s); }, 0, "index", 3,
                    "layer 1 metadata 'index' has shape [45] but this model's is [44]");
  check_wrong_shape(t.p, [](int) { return u32_model{}; }, 0, "counts", 4,
                    "layer 1 metadata 'counts' has shape [3x2] but this model's is [2x3]");
}

TEST_CASE("weights: a dynamic_l2 / dynamic_l1 factor in a file that is negative or not finite is refused, naming it") {
  tmpdir t;
  using rnet = sequential<input<3>, dense<4, relu, dynamic_l2>, dense<2, identity, dynamic_l1>>;
  auto a = make_model<rnet>(1), b = make_model<rnet>(2);
  set_regularization(a, "l2", 0.125);
  set_regularization(a, "l1", 0.5);
  io::save_weights(a, t.p / "w.ctnn");
  io::load_weights(b, t.p / "w.ctnn");  // factors in range travel
  CHECK(b.penalty() == a.penalty());
  CHECK(b.penalty() > 0.0);
  const auto before = variable_bytes(b);
  for (const float bad : {-1.0f, -0.0001f, std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    CAPTURE(bad);
    for (const auto& [layer, name, who] : {std::tuple{0, "l2", "dynamic_l2"}, std::tuple{1, "l1", "dynamic_l1"}}) {
      auto d = weights_file::slurp(t.p / "w.ctnn");
      weights_file::set(d, weights_file::find(d, layer, name).values_at, bad);
      weights_file::put_crc(d);
      weights_file::spit(t.p / "r.ctnn", d);
      const std::string want = "r.ctnn: layer " + std::to_string(layer + 1) + " metadata '" + name + "': " + who +
                               ": the factor is " + detail::format_number(double(bad)) + ", not finite and >= 0";
      CHECK_THROWS_WITH_AS(io::load_weights(b, t.p / "r.ctnn"), doctest::Contains(want.c_str()), io::weights_error);
      CHECK(variable_bytes(b) == before);
    }
  }
}

TEST_CASE("weights: a dynamic_dropout rate in a file outside 0 <= rate < 1 is refused, naming the layer and the rate") {
  tmpdir t;
  using dnet = sequential<input<3>, dense<4, relu>, dynamic_dropout, dense<2>>;
  auto a = make_model<dnet>(1), b = make_model<dnet>(2);
  set_dropout_rate(a, 0.25);
  io::save_weights(a, t.p / "w.ctnn");
  io::load_weights(b, t.p / "w.ctnn");  // a rate in range travels
  float r = 0;
  b.for_each_variable([&](const variable_ref& v) {
    if (v.name == "rate") std::memcpy(&r, v.data, 4);
  });
  CHECK(r == 0.25f);
  set_dropout_rate(b, 0.5);
  const auto before = variable_bytes(b);
  for (const float bad : {1.0f, -0.1f, 7.0f, std::numeric_limits<float>::quiet_NaN()}) {
    CAPTURE(bad);
    auto d = weights_file::slurp(t.p / "w.ctnn");
    weights_file::set(d, weights_file::find(d, 1, "rate").values_at, bad);
    weights_file::put_crc(d);
    weights_file::spit(t.p / "r.ctnn", d);
    CHECK_THROWS_WITH_AS(io::load_weights(b, t.p / "r.ctnn"),
                         doctest::Contains(("r.ctnn: layer 2 metadata 'rate': the dropout rate is " +
                                           detail::format_number(double(bad)) + ", outside [0, 1)").c_str()),
                         io::weights_error);
    CHECK(variable_bytes(b) == before);
  }
}
