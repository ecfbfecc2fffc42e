// ctnn/io/weights.hpp — saving and loading a model's weights.
//
// File format (version 1), all integers little-endian:
//   offset 0   8 bytes  magic "CTNNWTS\0"
//          8   u32      format version (1)
//         12   u32      element size in bytes (4 = float32, 8 = float64)
//         16   u64      architecture fingerprint (FNV-1a of Net::spec_string())
//         24   u64      parameter value count  (P, as parameters().size())
//         32   u64      state value count      (S, as state().size())
//         40   u32      length L of the architecture text
//         44   L bytes  architecture text, e.g. "input<28x28> | flatten | dense<10>"
//              P values parameters, then S values state (IEEE, little-endian)
//   last       u32      CRC-32 (zlib) of every byte before it
// save_weights writes to a temporary file and renames it. load_weights reads
// the whole file, checks size, magic, version, checksum, element size and
// fingerprint before touching the model, and throws ctnn::io::weights_error
// naming the file and the problem (a different network names both
// architectures).
#pragma once
#include <zlib.h>

#include <bit>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "../train/model.hpp"
#include "atomic_file.hpp"

namespace ctnn::io {

static_assert(std::endian::native == std::endian::little, "ctnn weight files assume a little-endian host");

class weights_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

inline constexpr char weights_magic[8] = {'C', 'T', 'N', 'N', 'W', 'T', 'S', '\0'};
inline constexpr std::uint32_t weights_version = 1;

namespace detail {
template <class V>
void put(std::string& s, V v) {
  s.append(reinterpret_cast<const char*>(&v), sizeof v);
}
template <class V>
V get(const std::vector<char>& d, std::size_t off) {
  V v;
  std::memcpy(&v, d.data() + off, sizeof v);
  return v;
}
}  // namespace detail

template <class Net, class T, class B>
void save_weights(const model<Net, T, B>& m, const std::filesystem::path& path) {
  const std::string arch = Net::spec_string();
  const auto p = m.parameters();
  const auto s = m.state();
  std::string out;
  out.reserve(64 + arch.size() + (p.size() + s.size()) * sizeof(T));
  out.append(weights_magic, 8);
  detail::put<std::uint32_t>(out, weights_version);
  detail::put<std::uint32_t>(out, sizeof(T));
  detail::put<std::uint64_t>(out, Net::fingerprint());
  detail::put<std::uint64_t>(out, p.size());
  detail::put<std::uint64_t>(out, s.size());
  detail::put<std::uint32_t>(out, std::uint32_t(arch.size()));
  out += arch;
  out.append(reinterpret_cast<const char*>(p.data()), p.size() * sizeof(T));
  out.append(reinterpret_cast<const char*>(s.data()), s.size() * sizeof(T));
  const auto crc = std::uint32_t(::crc32(0L, reinterpret_cast<const Bytef*>(out.data()), uInt(out.size())));
  detail::put<std::uint32_t>(out, crc);
  write_file_atomically(path, out);
}

template <class Net, class T, class B>
void load_weights(model<Net, T, B>& m, const std::filesystem::path& path) {
  const std::string name = path.string();
  auto fail = [&](const std::string& what) { throw weights_error("load_weights: " + name + ": " + what); };
  std::ifstream f(path, std::ios::binary);
  if (!f) fail(std::filesystem::exists(path) ? "cannot open for reading" : "no such file");
  std::vector<char> d((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  constexpr std::size_t header = 44;
  if (d.size() < header + 4) fail("truncated (" + std::to_string(d.size()) + " bytes, too short for a header)");
  if (std::memcmp(d.data(), weights_magic, 8) != 0) fail("not a ctnn weights file (wrong magic)");
  const auto version = detail::get<std::uint32_t>(d, 8);
  if (version != weights_version)
    fail("format version " + std::to_string(version) + " is not supported (this build reads version " +
         std::to_string(weights_version) + ")");
  const auto arch_len = detail::get<std::uint32_t>(d, 40);
  const auto np = detail::get<std::uint64_t>(d, 24);
  const auto ns = detail::get<std::uint64_t>(d, 32);
  const auto esize = detail::get<std::uint32_t>(d, 12);
  if (esize != 4 && esize != 8) fail("corrupt header (element size " + std::to_string(esize) + ")");
  const std::uint64_t expected = header + std::uint64_t(arch_len) + (np + ns) * esize + 4;
  if (np > (1ull << 40) || ns > (1ull << 40) || d.size() != expected)
    fail(d.size() < expected ? "truncated (" + std::to_string(d.size()) + " of " + std::to_string(expected) + " bytes)"
                             : "corrupt (size " + std::to_string(d.size()) + " does not match its header)");
  const auto stored_crc = detail::get<std::uint32_t>(d, d.size() - 4);
  const auto crc = std::uint32_t(::crc32(0L, reinterpret_cast<const Bytef*>(d.data()), uInt(d.size() - 4)));
  if (crc != stored_crc) fail("checksum mismatch: the file is corrupt");
  const std::string arch(d.data() + header, arch_len);
  if (detail::get<std::uint64_t>(d, 16) != Net::fingerprint() || arch != Net::spec_string())
    fail("it was saved from the network '" + arch + "' but this model is '" + Net::spec_string() + "'");
  if (esize != sizeof(T))
    fail("it holds " + std::to_string(esize * 8) + "-bit values but this model uses " + std::to_string(sizeof(T) * 8) +
         "-bit values");
  auto p = m.parameters();
  auto s = m.state();
  if (np != p.size() || ns != s.size()) fail("its parameter layout differs from this build's");
  const char* src = d.data() + header + arch_len;
  std::memcpy(p.data(), src, np * sizeof(T));
  std::memcpy(s.data(), src + np * sizeof(T), ns * sizeof(T));
}

}  // namespace ctnn::io
