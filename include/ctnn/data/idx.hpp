// ctnn/data/idx.hpp — reading IDX files (the MNIST family's format), plain or gzip.
//
// An IDX file is: two zero bytes, a type code (0x08 ubyte, 0x09 byte, 0x0B
// int16, 0x0C int32, 0x0D float32, 0x0E float64), the number of dimensions,
// then each dimension as a big-endian uint32, then the values, big-endian.
// read_idx(path) decompresses gzip (detected by its magic bytes, via zlib),
// checks the header and that the data holds exactly the values the
// dimensions announce. Every failure throws ctnn::data::idx_error whose
// message names the file and what is wrong: missing, unreadable, corrupt or
// truncated gzip stream, bad magic, unknown type code, too few or too many
// bytes.
#pragma once
#include <zlib.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace ctnn::data {

class idx_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct idx_array {
  std::uint8_t type = 0;              // IDX type code
  std::vector<std::uint32_t> dims;    // e.g. {60000, 28, 28}
  std::vector<unsigned char> bytes;   // the values, still big-endian
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

inline std::vector<unsigned char> read_file_bytes(const std::filesystem::path& p) {
  std::error_code ec;
  if (!std::filesystem::exists(p, ec)) throw idx_error("read_idx: " + p.string() + ": no such file");
  std::ifstream f(p, std::ios::binary);
  if (!f) throw idx_error("read_idx: " + p.string() + ": cannot open for reading");
  std::vector<unsigned char> raw((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (f.bad()) throw idx_error("read_idx: " + p.string() + ": read error");
  return raw;
}

// Inflates a whole gzip file held in memory (several concatenated members allowed).
inline std::vector<unsigned char> gunzip(const std::vector<unsigned char>& in, const std::string& name) {
  std::vector<unsigned char> out;
  out.reserve(in.size() * 4);
  z_stream s{};
  if (inflateInit2(&s, 15 + 16) != Z_OK) throw idx_error("read_idx: " + name + ": zlib initialisation failed");
  s.next_in = const_cast<Bytef*>(in.data());
  s.avail_in = static_cast<uInt>(in.size());
  unsigned char buf[1 << 16];
  int rc = Z_OK;
  for (;;) {
    s.next_out = buf;
    s.avail_out = sizeof buf;
    rc = inflate(&s, Z_NO_FLUSH);
    out.insert(out.end(), buf, buf + (sizeof buf - s.avail_out));
    if (rc == Z_STREAM_END) {
      if (s.avail_in == 0) break;
      inflateReset(&s);  // next gzip member
      continue;
    }
    if (rc == Z_OK) continue;
    if (rc == Z_BUF_ERROR && s.avail_in == 0) {
      inflateEnd(&s);
      throw idx_error("read_idx: " + name + ": truncated gzip stream (ended after " + std::to_string(in.size()) +
                      " compressed bytes)");
    }
    const std::string msg = s.msg ? s.msg : "error " + std::to_string(rc);
    inflateEnd(&s);
    throw idx_error("read_idx: " + name + ": corrupt gzip data (" + msg + ")");
  }
  inflateEnd(&s);
  return out;
}

}  // namespace detail

// Parses an IDX image held in memory; `name` is used in error messages.
inline idx_array parse_idx(const std::vector<unsigned char>& d, const std::string& name) {
  if (d.size() < 4) throw idx_error("read_idx: " + name + ": truncated header (" + std::to_string(d.size()) + " bytes)");
  if (d[0] != 0 || d[1] != 0)
    throw idx_error("read_idx: " + name + ": wrong magic number (first two bytes must be 0, the file is not IDX)");
  idx_array a;
  a.type = d[2];
  const std::size_t esize = detail::idx_type_size(a.type);
  if (!esize) {
    char hex[8];
    std::snprintf(hex, sizeof hex, "0x%02X", unsigned(a.type));
    throw idx_error("read_idx: " + name + ": unknown IDX type code " + hex);
  }
  const std::size_t rank = d[3];
  if (rank == 0) throw idx_error("read_idx: " + name + ": IDX header declares 0 dimensions");
  const std::size_t header = 4 + 4 * rank;
  if (d.size() < header) throw idx_error("read_idx: " + name + ": truncated header");
  std::size_t count = 1;
  for (std::size_t i = 0; i < rank; ++i) {
    const unsigned char* p = d.data() + 4 + 4 * i;
    const std::uint32_t v = (std::uint32_t(p[0]) << 24) | (std::uint32_t(p[1]) << 16) | (std::uint32_t(p[2]) << 8) | p[3];
    a.dims.push_back(v);
    count *= v;
  }
  const std::size_t expected = count * esize;
  const std::size_t have = d.size() - header;
  if (have < expected)
    throw idx_error("read_idx: " + name + ": truncated data: the header announces " + std::to_string(expected) +
                    " bytes of values but the file holds " + std::to_string(have));
  if (have > expected)
    throw idx_error("read_idx: " + name + ": corrupt file: " + std::to_string(have - expected) +
                    " bytes after the values the header announces");
  a.bytes.assign(d.begin() + std::ptrdiff_t(header), d.end());
  return a;
}

inline idx_array read_idx(const std::filesystem::path& path) {
  std::vector<unsigned char> raw = detail::read_file_bytes(path);
  const bool gz = raw.size() >= 2 && raw[0] == 0x1f && raw[1] == 0x8b;
  if (gz) raw = detail::gunzip(raw, path.string());
  return parse_idx(raw, path.string());
}

template <class T>
std::vector<T> idx_array::as(double scale) const {
  const std::size_t n = count();
  std::vector<T> out(n);
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
    out[i] = static_cast<T>(v * scale);
  }
  return out;
}

}  // namespace ctnn::data
