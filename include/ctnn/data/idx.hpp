// ctnn/data/idx.hpp — reading IDX files (the MNIST family's format), plain or gzip.
//
// An IDX file is: two zero bytes, a type code (0x08 ubyte, 0x09 byte, 0x0B
// int16, 0x0C int32, 0x0D float32, 0x0E float64), the number of dimensions,
// then each dimension as a big-endian uint32, then the values, big-endian.
// read_idx(path) decompresses gzip (detected by its magic bytes, via zlib),
// checks the header and that the data holds exactly the values the
// dimensions announce. Every failure throws ctnn::data::idx_error (a
// ctnn::io_error) whose message names the file and what is wrong: missing,
// a directory or not a regular file, unreadable, corrupt or truncated gzip
// stream, bad magic, unknown type code, dimensions whose product does not fit
// in 64 bits, too few or too many bytes. A gzip stream is inflated only as far
// as the header allows: inflating stops, and the file is rejected, as soon as
// the data exceeds the size the header announces. as<T>() range-checks every
// value: one that T cannot hold (a label 1e16 or 2.5 read as int32, a float64
// beyond float's range) throws idx_error naming the file and the index.
// On Linux as<T>() asks for transparent huge pages for a result of 4 MiB or
// more before writing it (Fashion-MNIST's images: 188 MB of floats, which a
// shuffled pass reads one image here, one there: 4 KiB pages cost a TLB walk
// per image; docs/performance.md, "MLP training").
#pragma once
#include <zlib.h>
#if defined(__linux__)
#include <sys/mman.h>
#endif

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "../core/errors.hpp"
#include "../io/read_file.hpp"
#include "../core/separate.hpp"

namespace ctnn::data {

class idx_error : public io_error {
 public:
  using io_error::io_error;
};

struct idx_array {
  std::uint8_t type = 0;              // IDX type code
  std::vector<std::uint32_t> dims;    // e.g. {60000, 28, 28}
  std::vector<unsigned char> bytes;   // the values, still big-endian
  std::string name;                   // the file it came from (for error messages)
  std::size_t count() const {
    std::size_t n = 1;
    for (auto d : dims) n *= d;
    return n;
  }
  // Values converted to T (scaled by `scale`), e.g. as<float>(1 / 255.0f).
  template <class T>
  std::vector<T> as(double scale = 1.0) const;
};

namespace detail {

inline std::size_t idx_type_size(std::uint8_t t) {
  switch (t) {
    case 0x08: case 0x09: return 1;
    case 0x0B: return 2;
    case 0x0C: case 0x0D: return 4;
    case 0x0E: return 8;
    default: return 0;
  }
}

// Asks the kernel to back the whole 2 MiB pages of [p, p + bytes) with huge
// pages (madvise MADV_HUGEPAGE, for memory not yet written: it applies as the
// pages are first touched). Advice only: where it is refused, or off Linux,
// nothing changes but the speed. Below 4 MiB nothing is asked.
inline void advise_huge_pages(const void* p, std::size_t bytes) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  constexpr std::uintptr_t huge = std::uintptr_t(2) << 20;
  if (!p || bytes < 2 * huge) return;
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  const std::uintptr_t lo = (a + huge - 1) & ~(huge - 1), hi = (a + bytes) & ~(huge - 1);
  if (hi > lo) (void)::madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_HUGEPAGE);
#else
  (void)p;
  (void)bytes;
#endif
}

CTNN_LAZY CTNN_DECL std::vector<unsigned char> read_file_bytes(const std::filesystem::path& p)
#if CTNN_DEFINITIONS
{
  return io::read_file<std::vector<unsigned char>, idx_error>(p, "read_idx");
}
#else
;
#endif

// The whole size in bytes (header + values) that an IDX image starting with
// d[0..n) announces, or nullopt while fewer bytes than the header are known.
// Throws idx_error on a bad magic number, type code or rank, or when the size
// does not fit in 64 bits.
CTNN_LAZY CTNN_DECL std::optional<std::size_t> idx_announced_size(const unsigned char* d, std::size_t n, const std::string& name)
#if CTNN_DEFINITIONS
{
  if (n < 4) return std::nullopt;
  if (d[0] != 0 || d[1] != 0)
    throw idx_error("read_idx", name, "wrong magic number (first two bytes must be 0, the file is not IDX)");
  const std::size_t esize = idx_type_size(d[2]);
  if (!esize) {
    char hex[8];
    std::snprintf(hex, sizeof hex, "0x%02X", unsigned(d[2]));
    throw idx_error("read_idx", name, std::string("unknown IDX type code ") + hex);
  }
  const std::size_t rank = d[3];
  if (rank == 0) throw idx_error("read_idx", name, "IDX header declares 0 dimensions");
  const std::size_t header = 4 + 4 * rank;
  if (n < header) return std::nullopt;
  std::size_t total = esize;
  for (std::size_t i = 0; i < rank; ++i) {
    const unsigned char* p = d + 4 + 4 * i;
    const std::uint32_t v = (std::uint32_t(p[0]) << 24) | (std::uint32_t(p[1]) << 16) | (std::uint32_t(p[2]) << 8) | p[3];
    if (v != 0 && total > (std::numeric_limits<std::size_t>::max() - header) / v)
      throw idx_error("read_idx", name, "the header's dimensions announce more values than 64 bits can count");
    total *= v;
  }
  return header + total;
}
#else
;
#endif

// Inflates a whole gzip file held in memory (several concatenated members
// allowed), stopping with idx_error as soon as the output exceeds the size
// the IDX header at its start announces.
CTNN_LAZY CTNN_DECL std::vector<unsigned char> gunzip(const std::vector<unsigned char>& in, const std::string& name)
#if CTNN_DEFINITIONS
{
  std::vector<unsigned char> out;
  std::optional<std::size_t> limit;
  z_stream s{};
  if (inflateInit2(&s, 15 + 16) != Z_OK) throw idx_error("read_idx", name, "zlib initialisation failed");
  struct ender {
    z_stream* s;
    ~ender() { inflateEnd(s); }
  } end_guard{&s};
  s.next_in = const_cast<Bytef*>(in.data());
  s.avail_in = static_cast<uInt>(in.size());
  unsigned char buf[1 << 16];
  int rc = Z_OK;
  for (;;) {
    s.next_out = buf;
    s.avail_out = sizeof buf;
    rc = inflate(&s, Z_NO_FLUSH);
    out.insert(out.end(), buf, buf + (sizeof buf - s.avail_out));
    if (!limit) {
      limit = idx_announced_size(out.data(), out.size(), name);
      // No reserve(*limit): a few bytes of header must not allocate what they announce (found by fuzz_idx).
    }
    if (limit && out.size() > *limit)
      throw idx_error("read_idx", name, "corrupt file: the decompressed data holds more than the " +
                                            std::to_string(*limit) + " bytes the header announces");
    if (rc == Z_STREAM_END) {
      if (s.avail_in == 0) break;
      inflateReset(&s);  // next gzip member
      continue;
    }
    if (rc == Z_OK) continue;
    if (rc == Z_BUF_ERROR && s.avail_in == 0)
      throw idx_error("read_idx", name, "truncated gzip stream (ended after " + std::to_string(in.size()) +
                                            " compressed bytes)");
    const std::string msg = s.msg ? s.msg : "error " + std::to_string(rc);
    throw idx_error("read_idx", name, "corrupt gzip data (" + msg + ")");
  }
  return out;
}
#else
;
#endif

inline std::string idx_show(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%g", v);
  return b;
}

// as<T>()'s error, out of its loop: one cold copy instead of one per T.
CTNN_LAZY [[noreturn, gnu::cold, gnu::noinline]] CTNN_DECL void throw_idx_value_error(const std::string& name, double v, std::size_t i,
                                                                        std::size_t bits, bool integral)
#if CTNN_DEFINITIONS
{
  if (integral)
    throw idx_error("read_idx", name, "value " + idx_show(v) + " at index " + std::to_string(i) +
                                          " is not a whole number that fits in a " + std::to_string(bits) +
                                          "-bit integer");
  throw idx_error("read_idx", name, "value " + idx_show(v) + " at index " + std::to_string(i) +
                                        " is out of range for a " + std::to_string(bits) + "-bit floating-point value");
}
#else
;
#endif

}  // namespace detail

// Parses an IDX image held in memory; `name` is used in error messages.
CTNN_LAZY CTNN_DECL idx_array parse_idx(const std::vector<unsigned char>& d, const std::string& name)
#if CTNN_DEFINITIONS
{
  const std::optional<std::size_t> total = detail::idx_announced_size(d.data(), d.size(), name);
  if (!total) throw idx_error("read_idx", name, "truncated header (" + std::to_string(d.size()) + " bytes)");
  idx_array a;
  a.type = d[2];
  a.name = name;
  const std::size_t rank = d[3];
  const std::size_t header = 4 + 4 * rank;
  for (std::size_t i = 0; i < rank; ++i) {
    const unsigned char* p = d.data() + 4 + 4 * i;
    a.dims.push_back((std::uint32_t(p[0]) << 24) | (std::uint32_t(p[1]) << 16) | (std::uint32_t(p[2]) << 8) | p[3]);
  }
  const std::size_t expected = *total - header;
  const std::size_t have = d.size() - header;
  if (have < expected)
    throw idx_error("read_idx", name, "truncated data: the header announces " + std::to_string(expected) +
                                          " bytes of values but the file holds " + std::to_string(have));
  if (have > expected)
    throw idx_error("read_idx", name, "corrupt file: " + std::to_string(have - expected) +
                                          " bytes after the values the header announces");
  a.bytes.assign(d.begin() + std::ptrdiff_t(header), d.end());
  return a;
}
#else
;
#endif

CTNN_LAZY CTNN_DECL idx_array read_idx(const std::filesystem::path& path)
#if CTNN_DEFINITIONS
{
  std::vector<unsigned char> raw = detail::read_file_bytes(path);
  const bool gz = raw.size() >= 2 && raw[0] == 0x1f && raw[1] == 0x8b;
  if (gz) raw = detail::gunzip(raw, path.string());
  return parse_idx(raw, path.string());
}
#else
;
#endif

template <class T>
std::vector<T> idx_array::as(double scale) const {
  const std::size_t n = count();
  std::vector<T> out;
  out.reserve(n);  // not written yet: the advice applies as resize first writes the pages
  detail::advise_huge_pages(out.data(), n * sizeof(T));
  out.resize(n);
  const unsigned char* p = bytes.data();
  auto be = [&](std::size_t i, std::size_t w) {
    std::uint64_t v = 0;
    for (std::size_t k = 0; k < w; ++k) v = (v << 8) | p[i * w + k];
    return v;
  };
  for (std::size_t i = 0; i < n; ++i) {
    double v = 0;
    switch (type) {
      case 0x08: v = p[i]; break;
      case 0x09: v = static_cast<std::int8_t>(p[i]); break;
      case 0x0B: v = static_cast<std::int16_t>(be(i, 2)); break;
      case 0x0C: v = static_cast<std::int32_t>(be(i, 4)); break;
      case 0x0D: { std::uint32_t u = std::uint32_t(be(i, 4)); float f; std::memcpy(&f, &u, 4); v = f; break; }
      case 0x0E: { std::uint64_t u = be(i, 8); double f; std::memcpy(&f, &u, 8); v = f; break; }
    }
    v *= scale;
    if constexpr (std::is_integral_v<T>) {
      // Only whole values that T holds: a float label 1e16 or 2.5 is not a class.
      if (!(v >= double(std::numeric_limits<T>::min()) && v <= double(std::numeric_limits<T>::max())) ||
          v != std::trunc(v))
        detail::throw_idx_value_error(name, v, i, 8 * sizeof(T), true);
    } else {
      if (std::isfinite(v) && std::abs(v) > double(std::numeric_limits<T>::max()))
        detail::throw_idx_value_error(name, v, i, 8 * sizeof(T), false);
    }
    out[i] = static_cast<T>(v);
  }
  return out;
}
CTNN_INSTANCE(template std::vector<float> idx_array::as<float>(double) const;)
CTNN_INSTANCE(template std::vector<std::int32_t> idx_array::as<std::int32_t>(double) const;)

}  // namespace ctnn::data
