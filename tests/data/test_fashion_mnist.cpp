// fashion_mnist.hpp and in_memory.hpp on the real files (Debian's
// dataset-fashion-mnist, which the test command installs).
#include <doctest/doctest.h>

#include <ctnn/data/fashion_mnist.hpp>
#include <ctnn/data/in_memory.hpp>
#include <ctnn/backends/cpu/thread_pool.hpp>

#include <algorithm>
#include <filesystem>
#include <utility>
#include <vector>

using namespace ctnn;

TEST_CASE("Fashion-MNIST: 60000 + 10000 images of 28x28 in [0, 1], labels 0..9") {
  const auto dir = data::fashion_mnist::default_dir();
  if (!std::filesystem::exists(dir / "t10k-images-idx3-ubyte.gz")) {
    MESSAGE("CTNN_SKIP: " << dir << " is missing (apt-get install dataset-fashion-mnist)");  // CTest reports it as skipped
    return;
  }
  const auto test = data::fashion_mnist::test();
  CHECK(test.size() == 10000);
  const float* x = test.features();
  CHECK(*std::max_element(x, x + 784 * 10000) == 1.0f);
  CHECK(*std::min_element(x, x + 784 * 10000) == 0.0f);
  std::vector<int> counts(10);
  for (std::size_t i = 0; i < test.size(); ++i) counts[std::size_t(test.targets()[i])]++;
  for (int c : counts) CHECK(c == 1000);  // the test set is balanced
  CHECK(data::fashion_mnist::train().size() == 60000);
}

TEST_CASE("Fashion-MNIST: a directory without the files gives a clear error") {
  CHECK_THROWS_WITH_AS(data::fashion_mnist::test("/nonexistent"),
                       doctest::Contains("install Debian's dataset-fashion-mnist or set CTNN_FASHION_MNIST_DIR"),
                       data::idx_error);
  // a directory name the system refuses to look up is the reader's error too, naming the path and why
  const std::filesystem::path longer = std::filesystem::path("/tmp") / std::string(300, 'n');
  CHECK_THROWS_WITH_AS(data::fashion_mnist::test(longer),
                       doctest::Contains("t10k-images-idx3-ubyte.gz: cannot be looked up (File name too long)"),
                       data::idx_error);
}

TEST_CASE("in_memory: batching, remainder, take and skip") {
  std::vector<float> x(10);
  std::vector<std::int32_t> y(10);
  for (int i = 0; i < 10; ++i) x[std::size_t(i)] = float(i), y[std::size_t(i)] = i;
  const data::in_memory<shape<1>, sparse_labels> ds(x, y);
  CHECK(ds.batch(4).batches_per_epoch() == 3);
  CHECK(ds.batch(4, true).batches_per_epoch() == 2);
  data::batch_of<shape<1>, sparse_labels> b;
  auto c = ds.batch(4).open(0);
  std::vector<std::size_t> sizes;
  while (c.next(b)) sizes.push_back(b.size);
  CHECK(sizes == std::vector<std::size_t>{4, 4, 2});
  auto c2 = ds.skip(3).take(2).batch(8).open(0);
  REQUIRE(c2.next(b));
  CHECK(b.size == 2);
  CHECK(b.y[0] == 3);
  CHECK(b.x[1] == 4.0f);
  CHECK_FALSE(c2.next(b));
}

TEST_CASE("in_memory: share_gather copies the same shuffled batches on one and two threads") {
  // 300 samples of 16 x 16: batches of 100 and 256 go over the pool (from 2^14 values on: 64
  // samples), batch 16 and the last 44 of the 256-batches stay on the caller
  constexpr std::size_t n = 300, size = 256;
  std::vector<float> x(n * size);
  std::vector<std::int32_t> y(n);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = float(i) * 0.5f;
  for (std::size_t i = 0; i < n; ++i) y[i] = std::int32_t(i % 10);
  const data::in_memory<shape<16, 16>, sparse_labels> ds(x, y);
  const std::size_t before = kernels::cpu::threads();  // restored at the end: the binary's other cases keep theirs
  for (const std::size_t batch : {std::size_t(16), std::size_t(100), std::size_t(256)}) {
    auto batches = [&](bool share, std::size_t threads) {
      kernels::cpu::set_threads(threads);
      std::vector<std::vector<float>> xs;
      std::vector<std::vector<std::int32_t>> ys;
      data::batch_of<shape<16, 16>, sparse_labels> b;
      auto c = ds.shuffle(7).batch(batch).open(3);
      c.share_gather(share);
      while (c.next(b)) {
        xs.emplace_back(b.x.begin(), b.x.begin() + std::ptrdiff_t(b.size * size));
        ys.emplace_back(b.y.begin(), b.y.begin() + std::ptrdiff_t(b.size));
      }
      kernels::cpu::set_threads(before);
      return std::pair{xs, ys};
    };
    CAPTURE(batch);
    const auto serial = batches(false, 1);
    CHECK(serial.first.size() == (n + batch - 1) / batch);
    CHECK(batches(true, 2) == serial);
    CHECK(batches(true, 1) == serial);
    CHECK(batches(false, 2) == serial);
  }
}

TEST_CASE("in_memory: each batch row is its sample, as a scalar gather copies it") {
  // samples of 37 floats (148 bytes: rows that start and end inside cache lines), each sample's
  // label its index: a batch row must be the sample its label names, every sample once an epoch,
  // on batches of 1 to more than the samples, on one and two threads, with take / skip and a remainder
  constexpr std::size_t n = 203, size = 37;
  std::vector<float> x(n * size);
  std::vector<std::int32_t> y(n);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = float(i) * 0.25f;
  for (std::size_t i = 0; i < n; ++i) y[i] = std::int32_t(i);
  const data::in_memory<shape<size>, sparse_labels> all(x, y);
  const std::size_t before = kernels::cpu::threads();
  for (const bool shuffled : {false, true})
    for (const std::size_t batch : {std::size_t(1), std::size_t(2), std::size_t(3), std::size_t(64), std::size_t(500)})
      for (const std::size_t threads : {std::size_t(1), std::size_t(2)}) {
        CAPTURE(shuffled);
        CAPTURE(batch);
        CAPTURE(threads);
        const auto ds = shuffled ? all.skip(5).take(190).shuffle(11).batch(batch) : all.skip(5).take(190).batch(batch);
        kernels::cpu::set_threads(threads);
        data::batch_of<shape<size>, sparse_labels> b;
        auto c = ds.open(2);
        c.share_gather(true);
        std::vector<int> seen(n, 0);
        std::size_t rows = 0, out_of_order = 0;
        while (c.next(b)) {
          for (std::size_t r = 0; r < b.size; ++r, ++rows) {
            const std::size_t s = std::size_t(b.y[r]);
            REQUIRE(s >= 5);
            REQUIRE(s < 195);
            seen[s]++;
            out_of_order += s != 5 + rows;
            // the scalar gather: sample s's values, one by one
            std::size_t equal = 0;
            for (std::size_t k = 0; k < size; ++k) equal += b.x[r * size + k] == x[s * size + k];
            CHECK(equal == size);
          }
        }
        kernels::cpu::set_threads(before);
        CHECK(rows == 190);
        CHECK(std::count(seen.begin(), seen.end(), 1) == 190);
        CHECK((out_of_order > 0) == shuffled);
      }
}
