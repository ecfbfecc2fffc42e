// idx.hpp: plain and gzip files, and every kind of bad file.
#include <doctest/doctest.h>

#include <ctnn/data/idx.hpp>
#include <zlib.h>

#include <filesystem>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

using namespace ctnn::data;
namespace fs = std::filesystem;

namespace {
struct tmpdir {
  fs::path p;
  tmpdir() {
    p = fs::temp_directory_path() / ("ctnn_idx_" + std::to_string(::getpid()));
    fs::create_directories(p);
  }
  ~tmpdir() { fs::remove_all(p); }
};

std::vector<unsigned char> idx_bytes(std::uint8_t type, std::vector<std::uint32_t> dims, std::vector<unsigned char> data) {
  std::vector<unsigned char> b{0, 0, type, std::uint8_t(dims.size())};
  for (auto d : dims)
    for (int s = 24; s >= 0; s -= 8) b.push_back(std::uint8_t(d >> s));
  b.insert(b.end(), data.begin(), data.end());
  return b;
}
void write(const fs::path& p, const std::vector<unsigned char>& b) {
  std::ofstream(p, std::ios::binary).write(reinterpret_cast<const char*>(b.data()), std::streamsize(b.size()));
}
void write_gz(const fs::path& p, const std::vector<unsigned char>& b) {
  gzFile f = gzopen(p.c_str(), "wb");
  gzwrite(f, b.data(), unsigned(b.size()));
  gzclose(f);
}
std::vector<unsigned char> read(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}
}  // namespace

TEST_CASE("read_idx: plain and gzip files give the same array") {
  tmpdir t;
  const auto b = idx_bytes(0x08, {2, 3}, {1, 2, 3, 4, 5, 255});
  write(t.p / "a.idx", b);
  write_gz(t.p / "a.idx.gz", b);
  for (auto name : {"a.idx", "a.idx.gz"}) {
    const auto a = read_idx(t.p / name);
    CHECK(a.dims == std::vector<std::uint32_t>{2, 3});
    CHECK(a.count() == 6);
    CHECK(a.as<float>(1.0 / 255) .back() == doctest::Approx(1.0));
    CHECK(a.as<int>() == std::vector<int>{1, 2, 3, 4, 5, 255});
  }
}

TEST_CASE("read_idx: big-endian int32 and float32 values") {
  tmpdir t;
  write(t.p / "i.idx", idx_bytes(0x0C, {2}, {0xff, 0xff, 0xff, 0xfe, 0, 0, 1, 0}));
  CHECK(read_idx(t.p / "i.idx").as<int>() == std::vector<int>{-2, 256});
  write(t.p / "f.idx", idx_bytes(0x0D, {1}, {0x3f, 0xc0, 0, 0}));
  CHECK(read_idx(t.p / "f.idx").as<float>() == std::vector<float>{1.5f});
}

TEST_CASE("read_idx: a large as<float>() (huge pages asked for on Linux) holds every value, scaled") {
  tmpdir t;
  // 3 x 1,000,000 ubytes: 12 MB of floats, past advise_huge_pages' 4 MiB
  std::vector<unsigned char> data(3'000'000);
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<unsigned char>((i * 7 + i / 256) % 256);
  write(t.p / "big.idx", idx_bytes(0x08, {3, 1'000'000}, data));
  const auto v = read_idx(t.p / "big.idx").as<float>(1.0 / 255);
  REQUIRE(v.size() == data.size());
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < data.size(); ++i) wrong += v[i] != float(double(data[i]) * (1.0 / 255));
  CHECK(wrong == 0);
  // the advice itself: any pointer and size, null and tiny included, changes no value
  detail::advise_huge_pages(nullptr, std::size_t(1) << 30);
  detail::advise_huge_pages(v.data(), 1);
  detail::advise_huge_pages(v.data(), v.size() * sizeof(float));
  CHECK(v[12345] == float(double(data[12345]) * (1.0 / 255)));
}

TEST_CASE("read_idx: every bad file is reported with its name and the problem") {
  tmpdir t;
  const auto good = idx_bytes(0x08, {4, 4}, std::vector<unsigned char>(16, 7));
  CHECK_THROWS_WITH_AS(read_idx(t.p / "missing.gz"), doctest::Contains("missing.gz: no such file"), idx_error);

  auto truncated = good;
  truncated.resize(good.size() - 3);
  write(t.p / "trunc.idx", truncated);
  CHECK_THROWS_WITH_AS(read_idx(t.p / "trunc.idx"),
                       doctest::Contains("trunc.idx: truncated data: the header announces 16 bytes of values but the file holds 13"),
                       idx_error);

  auto extra = good;
  extra.push_back(0);
  write(t.p / "extra.idx", extra);
  CHECK_THROWS_WITH_AS(read_idx(t.p / "extra.idx"), doctest::Contains("1 bytes after the values"), idx_error);

  auto magic = good;
  magic[0] = 1;
  write(t.p / "magic.idx", magic);
  CHECK_THROWS_WITH_AS(read_idx(t.p / "magic.idx"), doctest::Contains("wrong magic number"), idx_error);

  auto type = good;
  type[2] = 0x42;
  write(t.p / "type.idx", type);
  CHECK_THROWS_WITH_AS(read_idx(t.p / "type.idx"), doctest::Contains("unknown IDX type code 0x42"), idx_error);

  write_gz(t.p / "g.gz", good);
  auto gz = read(t.p / "g.gz");
  auto gz_trunc = gz;
  gz_trunc.resize(gz.size() / 2);
  write(t.p / "gtrunc.gz", gz_trunc);
  CHECK_THROWS_WITH_AS(read_idx(t.p / "gtrunc.gz"), doctest::Contains("gtrunc.gz: truncated gzip stream"), idx_error);

  auto gz_bad = gz;
  for (std::size_t i = 12; i < gz_bad.size() - 8; ++i) gz_bad[i] ^= 0x5a;
  write(t.p / "gbad.gz", gz_bad);
  CHECK_THROWS_WITH_AS(read_idx(t.p / "gbad.gz"), doctest::Contains("gbad.gz: corrupt gzip data"), idx_error);

  write(t.p / "empty.idx", {});
  CHECK_THROWS_WITH_AS(read_idx(t.p / "empty.idx"), doctest::Contains("truncated header"), idx_error);
}

// Issue 14, item 4 and 5: found by fuzzing and by hand.
TEST_CASE("read_idx: dimensions whose product does not fit in 64 bits are refused, not wrapped") {
  tmpdir t;
  write(t.p / "big.idx", idx_bytes(0x0D, {0xFFFFFFFFu, 0xFFFFFFFFu, 0x40000000u}, {}));
  CHECK_THROWS_WITH_AS(read_idx(t.p / "big.idx"), doctest::Contains("more values than 64 bits can count"), idx_error);
  // The 12-byte file of the report: 2^31 x 2^30 float64 values = 2^61 values of 8 bytes = 2^64 bytes, which
  // wrapped to 0, so the empty data matched and the file was accepted.
  write(t.p / "twelve.idx", idx_bytes(0x0E, {0x80000000u, 0x40000000u}, {}));
  CHECK_THROWS_WITH_AS(read_idx(t.p / "twelve.idx"), doctest::Contains("twelve.idx: the header's dimensions announce more"),
                       idx_error);
}

TEST_CASE("read_idx: as<int>() refuses values an int cannot hold instead of converting them (UB)") {
  tmpdir t;
  auto f32 = [](float v) {
    std::uint32_t u;
    std::memcpy(&u, &v, 4);
    return std::vector<unsigned char>{std::uint8_t(u >> 24), std::uint8_t(u >> 16), std::uint8_t(u >> 8), std::uint8_t(u)};
  };
  write(t.p / "huge.idx", idx_bytes(0x0D, {1}, f32(1e16f)));
  const auto a = read_idx(t.p / "huge.idx");
  CHECK_THROWS_WITH_AS(a.as<std::int32_t>(), doctest::Contains("value 1e+16 at index 0 is not a whole number"),
                       idx_error);
  CHECK(a.as<float>()[0] == 1e16f);
  write(t.p / "half.idx", idx_bytes(0x0D, {1}, f32(2.5f)));
  CHECK_THROWS_WITH_AS(read_idx(t.p / "half.idx").as<std::int32_t>(), doctest::Contains("half.idx"), idx_error);
}

TEST_CASE("read_idx: a gzip bomb is rejected as soon as the data exceeds what the header announces") {
  tmpdir t;
  // Header: one ubyte value; then 64 MiB of zeros, compressed to about 64 KiB.
  auto b = idx_bytes(0x08, {1}, {7});
  b.resize(b.size() + (64u << 20), 0);
  write_gz(t.p / "bomb.gz", b);
  CHECK(fs::file_size(t.p / "bomb.gz") < (1u << 20));
  CHECK_THROWS_WITH_AS(read_idx(t.p / "bomb.gz"), doctest::Contains("holds more than the 9 bytes the header announces"),
                       idx_error);
}

TEST_CASE("read_idx: a directory or a device is an idx_error (an io_error) naming it, not std::ios_base::failure") {
  tmpdir t;
  fs::create_directory(t.p / "dir");
  CHECK_THROWS_WITH_AS(read_idx(t.p / "dir"), doctest::Contains("dir: is a directory"), idx_error);
  CHECK_THROWS_AS(read_idx(t.p / "dir"), ctnn::io_error);
  try {
    (void)read_idx(t.p / "dir");
  } catch (const ctnn::io_error& e) {
    CHECK(e.path() == t.p / "dir");
  }
  if (fs::exists("/dev/null")) CHECK_THROWS_WITH_AS(read_idx("/dev/null"), doctest::Contains("not a regular file"), idx_error);
}

TEST_CASE("read_idx: a truncated gzip whose header announces 45 GB allocates nothing of the kind (found by fuzz_idx)") {
  tmpdir t;
  const std::vector<unsigned char> crash{0x1f, 0x8b, 0x8, 0x0, 0x0, 0x0, 0x0, 0x0, 0x2, 0x3, 0x63, 0x60,
                                         0xe0, 0x60, 0x62, 0x60, 0x60, 0x75, 0x41, 0x10, 0x0, 0x0, 0x0};
  write(t.p / "c.gz", crash);
  // Before: reserve() of the announced size (bad_alloc, or an ASan out-of-memory report).
  CHECK_THROWS_AS(read_idx(t.p / "c.gz"), idx_error);
}
