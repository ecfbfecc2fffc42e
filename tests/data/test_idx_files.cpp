// idx_files.hpp, fashion_mnist_files.hpp: IDX shards read each pass; a corrupt shard is reported.
#include <doctest/doctest.h>

#include <ctnn/data/fashion_mnist_files.hpp>
#include <ctnn/data/idx_files.hpp>
#include <ctnn/data/pipeline.hpp>
#include <zlib.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <vector>

using namespace ctnn;
namespace fs = std::filesystem;

namespace {
struct tmpdir {
  fs::path p;
  tmpdir() {
    p = fs::temp_directory_path() / ("ctnn_idxf_" + std::to_string(::getpid()));
    fs::create_directories(p);
  }
  ~tmpdir() { fs::remove_all(p); }
};
std::vector<unsigned char> idx_bytes(std::vector<std::uint32_t> dims, std::vector<unsigned char> data) {
  std::vector<unsigned char> b{0, 0, 0x08, std::uint8_t(dims.size())};
  for (auto d : dims)
    for (int s = 24; s >= 0; s -= 8) b.push_back(std::uint8_t(d >> s));
  b.insert(b.end(), data.begin(), data.end());
  return b;
}
void write_gz(const fs::path& p, const std::vector<unsigned char>& b) {
  gzFile f = gzopen(p.c_str(), "wb");
  gzwrite(f, b.data(), unsigned(b.size()));
  gzclose(f);
}
// A shard of n 2x2 images with pixel values base+i and labels i.
data::idx_shard shard(const fs::path& dir, const std::string& name, unsigned char base, unsigned n) {
  std::vector<unsigned char> px, lb;
  for (unsigned i = 0; i < n; ++i) {
    for (int k = 0; k < 4; ++k) px.push_back(std::uint8_t(base + i));
    lb.push_back(std::uint8_t(i));
  }
  write_gz(dir / (name + "-images.gz"), idx_bytes({n, 2, 2}, px));
  write_gz(dir / (name + "-labels.gz"), idx_bytes({n}, lb));
  return {dir / (name + "-images.gz"), dir / (name + "-labels.gz")};
}
using S = data::sample<shape<2, 2>>;
}  // namespace

TEST_CASE("from_idx: shards one after another, scaled") {
  tmpdir t;
  auto d = data::from_idx<shape<2, 2>>({shard(t.p, "a", 10, 2), shard(t.p, "b", 20, 3)}, 0.5);
  auto c = d.open(0);
  S s;
  std::vector<float> first;
  std::vector<int> y;
  while (c.next(s)) {
    first.push_back(s.x[0]);
    y.push_back(s.y[0]);
  }
  CHECK(first == std::vector<float>{5, 5.5f, 10, 10.5f, 11});
  CHECK(y == std::vector<int>{0, 1, 0, 1, 2});
}

TEST_CASE("from_idx: a corrupt shard in the middle of the stream is reported after the earlier samples") {
  tmpdir t;
  const auto a = shard(t.p, "a", 1, 3);
  auto b = shard(t.p, "b", 1, 3);
  {  // cut the gzip stream of b's images short
    std::ifstream f(b.images, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    std::ofstream(b.images, std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  }
  const auto c3 = shard(t.p, "c", 1, 3);
  auto d = data::from_idx<shape<2, 2>>({a, b, c3}).prefetch(2);
  auto c = d.open(0);
  S s;
  for (int i = 0; i < 3; ++i) REQUIRE(c.next(s));
  CHECK_THROWS_WITH_AS(c.next(s), doctest::Contains("b-images.gz: truncated gzip stream"), data::idx_error);

  // Shape and count mismatches name the files.
  auto c2 = data::from_idx<shape<3>>(a.images, a.labels).open(0);
  data::sample<shape<3>> x3;
  CHECK_THROWS_WITH_AS(c2.next(x3), doctest::Contains("a-images.gz: samples of 4 values, but the pipeline's sample shape 3 has 3"),
                       data::idx_error);
  auto mixed = data::from_idx<shape<2, 2>>(a.images, shard(t.p, "d", 1, 2).labels).open(0);
  CHECK_THROWS_WITH_AS(mixed.next(s), doctest::Contains("has 3 samples but"), data::idx_error);
}

TEST_CASE("fashion_mnist_files: decodes the test files each pass, cache() once") {
  const auto dir = data::fashion_mnist::default_dir();
  if (!fs::exists(dir / "t10k-images-idx3-ubyte.gz")) {
    MESSAGE("CTNN_SKIP: " << dir << " is missing (apt-get install dataset-fashion-mnist)");  // CTest reports it as skipped
    return;
  }
  auto d = data::fashion_mnist::test_files().take(1000).batch(100);
  const auto mem = data::fashion_mnist::test();
  auto c = d.open(0);
  data::batch_of<shape<28, 28>> b;
  std::size_t n = 0;
  while (c.next(b)) {
    for (std::size_t i = 0; i < b.size; ++i) {
      CHECK(b.y[i] == mem.targets()[n + i]);
      CHECK(b.x[i * 784 + 400] == mem.features()[(n + i) * 784 + 400]);
    }
    n += b.size;
  }
  CHECK(n == 1000);
  CHECK_THROWS_WITH_AS(data::fashion_mnist::train_files("/nonexistent"), doctest::Contains("/nonexistent"), data::idx_error);
}
