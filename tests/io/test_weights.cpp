// weights.hpp and atomic_file.hpp: round trip, wrong network, corruption, atomicity.
#include <doctest/doctest.h>

#include <ctnn/io/atomic_file.hpp>
#include <ctnn/io/weights.hpp>
#include <ctnn/layers/dense.hpp>

#include <filesystem>
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
  CHECK_THROWS_WITH_AS(io::load_weights(d, t.p / "w.ctnn"), doctest::Contains("32-bit values"), io::weights_error);
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
