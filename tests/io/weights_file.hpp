// Hand-editing version-2 weights files (io/weights.hpp) in tests: read a file,
// find a tensor by layer and name, change its bytes, recompute the CRC (as
// someone editing a file would) and write it back.
#pragma once
#include <zlib.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <vector>

namespace weights_file {

inline std::vector<char> slurp(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}
inline void spit(const std::filesystem::path& p, const std::vector<char>& d) {
  std::ofstream(p, std::ios::binary).write(d.data(), std::streamsize(d.size()));
}
// Rewrites the trailing CRC-32 after an edit.
inline void put_crc(std::vector<char>& d) {
  const auto crc = std::uint32_t(::crc32(0L, reinterpret_cast<const Bytef*>(d.data()), uInt(d.size() - 4)));
  std::memcpy(d.data() + d.size() - 4, &crc, 4);
}

// Where one tensor of a file lies.
struct tensor {
  std::size_t layer = 0;  // 0-based
  std::uint8_t dtype = 0, rank = 0;
  std::string name;
  std::size_t dims_at = 0;    // offset of its rank u64 dimensions
  std::size_t values_at = 0;  // offset of its first value
  std::size_t extent = 0;     // values
};

template <class V>
V get(const std::vector<char>& d, std::size_t at) {
  V v;
  std::memcpy(&v, d.data() + at, sizeof v);
  return v;
}
template <class V>
void set(std::vector<char>& d, std::size_t at, V v) {
  std::memcpy(d.data() + at, &v, sizeof v);
}

inline std::size_t dtype_bytes(std::uint8_t t) { return t == 2 ? 8 : t == 3 ? 1 : (t == 5 || t == 6) ? 2 : 4; }

// The tensors of a well-formed version-2 file, in order.
inline std::vector<tensor> tensors(const std::vector<char>& d) {
  std::size_t at = 20;
  at += 4 + get<std::uint32_t>(d, at);
  const auto count = get<std::uint32_t>(d, at);
  at += 4;
  std::vector<tensor> out;
  for (std::uint32_t i = 0; i < count; ++i) {
    tensor t;
    t.layer = get<std::uint32_t>(d, at);
    t.dtype = get<std::uint8_t>(d, at + 5);
    t.rank = get<std::uint8_t>(d, at + 6);
    const auto nlen = get<std::uint32_t>(d, at + 8);
    t.name.assign(d.data() + at + 12, nlen);
    t.dims_at = at + 12 + nlen;
    t.extent = 1;
    for (std::size_t r = 0; r < t.rank; ++r) t.extent *= get<std::uint64_t>(d, t.dims_at + 8 * r);
    t.values_at = t.dims_at + 8 * t.rank;
    at = t.values_at + t.extent * dtype_bytes(t.dtype);
    out.push_back(t);
  }
  return out;
}

// Tensor `name` of layer `layer` (0-based); throws when the file has none.
inline tensor find(const std::vector<char>& d, std::size_t layer, const std::string& name) {
  for (const tensor& t : tensors(d))
    if (t.layer == layer && t.name == name) return t;
  throw std::logic_error("weights_file::find: no tensor '" + name + "' in layer " + std::to_string(layer));
}

}  // namespace weights_file
