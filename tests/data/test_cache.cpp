// cache.hpp: the in-memory and file caches are kept only after a complete pass.
#include <doctest/doctest.h>

#include <ctnn/data/cache.hpp>
#include <ctnn/data/pipeline.hpp>

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <memory>
#include <numeric>
#include <vector>

using namespace ctnn;
namespace fs = std::filesystem;
using S1 = data::sample<shape<1>>;

namespace {
struct tmpdir {
  fs::path p;
  tmpdir() {
    p = fs::temp_directory_path() / ("ctnn_cache_" + std::to_string(::getpid()));
    fs::create_directories(p);
  }
  ~tmpdir() { fs::remove_all(p); }
};
// numbers 0..n-1 that count how often the source is read.
data::dataset<S1> counted(std::size_t n, std::shared_ptr<std::atomic<int>> reads) {
  std::vector<float> x(n);
  std::vector<int> y(n);
  std::iota(x.begin(), x.end(), 0.5f);
  std::iota(y.begin(), y.end(), 0);
  return data::from_tensors<shape<1>>(x, y).map([reads](S1 s) {
    ++*reads;
    return s;
  });
}
template <class E>
std::vector<int> labels(const data::dataset<E>& d, std::size_t pass = 0) {
  std::vector<int> out;
  auto c = d.open(pass);
  E e;
  while (c.next(e))
    for (std::size_t i = 0; i < e.y.size(); ++i) out.push_back(e.y[i]);
  return out;
}
std::size_t files_in(const fs::path& dir) {
  return std::size_t(std::distance(fs::directory_iterator(dir), fs::directory_iterator()));
}
}  // namespace

TEST_CASE("cache(): the first complete pass is kept, later passes do not read upstream") {
  auto reads = std::make_shared<std::atomic<int>>(0);
  auto d = counted(10, reads).shuffle(10, 5).cache();
  // A pass stopped early leaves no cache.
  CHECK(labels(d.take(4)).size() == 4);
  const auto first = labels(d, 0);
  const int after_first = *reads;
  CHECK(after_first == 20);  // the take pass filled the shuffle buffer (10), the full pass read all 10 again
  CHECK(labels(d, 1) == first);  // the cache keeps pass 0's order
  CHECK(labels(d, 2) == first);
  CHECK(*reads == after_first);
}

TEST_CASE("cache(path): written only after a complete pass, atomically, then read instead of upstream") {
  tmpdir t;
  const fs::path file = t.p / "numbers.cache";
  auto reads = std::make_shared<std::atomic<int>>(0);
  auto d = counted(9, reads).batch(4).cache(file);
  {
    auto c = d.open(0);
    data::batch_of<shape<1>> b;
    REQUIRE(c.next(b));
  }  // stopped after one batch
  CHECK_FALSE(fs::exists(file));
  CHECK(files_in(t.p) == 0);  // no temporary left either
  const auto want = labels(d);
  CHECK(want == std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7, 8});
  CHECK(fs::exists(file));
  CHECK(files_in(t.p) == 1);

  // Another pipeline with the same file never reads its upstream.
  auto reads2 = std::make_shared<std::atomic<int>>(0);
  auto again = counted(9, reads2).batch(4).cache(file);
  CHECK(labels(again) == want);
  CHECK(*reads2 == 0);
  auto c = again.open(0);
  data::batch_of<shape<1>> b;
  REQUIRE(c.next(b));
  REQUIRE(c.next(b));
  REQUIRE(c.next(b));
  CHECK(b.size == 1);
  CHECK(b.x == std::vector<float>{8.5f});
}

TEST_CASE("cache(path): a damaged or foreign cache file is reported, never used or silently rebuilt") {
  tmpdir t;
  const fs::path file = t.p / "c.cache";
  auto reads = std::make_shared<std::atomic<int>>(0);
  (void)labels(counted(20, reads).cache(file));
  std::string bytes;
  {
    std::ifstream f(file, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  }
  auto write = [&](const std::string& b) { std::ofstream(file, std::ios::binary) << b; };

  std::string flipped = bytes;
  flipped[flipped.size() / 2] ^= 0x10;
  write(flipped);
  CHECK_THROWS_WITH_AS(labels(counted(20, reads).cache(file)), doctest::Contains("c.cache: corrupt: CRC-32 mismatch"),
                       data::pipeline_error);
  write(bytes.substr(0, bytes.size() - 9));
  CHECK_THROWS_WITH_AS(labels(counted(20, reads).cache(file)), doctest::Contains("c.cache: truncated or corrupt"),
                       data::pipeline_error);
  write("hello");
  CHECK_THROWS_WITH_AS(labels(counted(20, reads).cache(file)), doctest::Contains("not a ctnn cache file"),
                       data::pipeline_error);
  write(bytes);
  CHECK_THROWS_WITH_AS(labels(counted(20, reads).batch(2).cache(file)),
                       doctest::Contains("written for elements sample<1, sparse, 4-byte float> but this pipeline yields "
                                         "batch_of<1, sparse, 4-byte float>"),
                       data::pipeline_error);
  CHECK(labels(counted(20, reads).cache(file)).size() == 20);  // intact again: used
}

// Issue 14, item 5.
TEST_CASE("cache(path): a directory at path is an io_error naming it") {
  tmpdir t;
  auto reads = std::make_shared<std::atomic<int>>(0);
  fs::create_directory(t.p / "c");
  const auto d = counted(3, reads).cache(t.p / "c");
  const std::string want = "cache: " + (t.p / "c").string() + ": is a directory";
  CHECK_THROWS_WITH_AS(labels(d), doctest::Contains(want.c_str()), ctnn::io_error);
}

// Issue 24, item 7: a cache file under a regular file, or with a name too long.
TEST_CASE("cache(path): a path under a regular file or a name too long is an io_error naming it") {
  tmpdir t;
  auto reads = std::make_shared<std::atomic<int>>(0);
  std::ofstream(t.p / "file") << "a regular file";
  const fs::path under = t.p / "file" / "c.cache", longer = t.p / std::string(300, 'n');
  CHECK_THROWS_WITH_AS(labels(counted(3, reads).cache(under)),
                       ("write_file_atomically: " + under.string() + ": cannot stat (Not a directory)").c_str(), ctnn::io_error);
  CHECK_THROWS_WITH_AS(labels(counted(3, reads).cache(longer)),
                       ("write_file_atomically: " + longer.string() + ": cannot stat (File name too long)").c_str(), ctnn::io_error);
}
