// ctnn/io/weights.hpp — saving and loading a model's weights.
//
// save_weights(m, path) writes every declared parameter, state, mask and
// metadata buffer of m as a logical tensor (layer, role, dtype, name, shape,
// values; no arena padding) after a magic, the format version (2) and the
// architecture's fingerprint and text, then a CRC-32; to a temporary file
// renamed over path (io/atomic_file.hpp). load_weights(m, path) reads the
// whole file and checks size, magic, version, checksum, fingerprint, every
// tensor's layer, role, name, element type and shape, the float32 <-> 16-bit
// conversions (finite values only) and each metadata buffer whose layer
// checks it (variable_ref::check: a sparse layout's index) before it changes
// the model, and each state buffer whose layer checks it (variable_ref::check_state: an int8
// kernel's range and row sums); it throws ctnn::io::weights_error naming the file and the
// problem. Version-1 files load when their element type and layout match.
// Works on any model type M with for_each_variable (train/model.hpp): io/
// does not include train/. read_weights_file(path) reads any weights file
// without the network type (the file's header and each tensor's layer, role,
// name, dtype, shape and values; ctnn-inspect prints it) under the same checks
// of size, magic, version, checksum and layout as load_weights, which shares
// them. A model file (train/model_file.hpp) holds a weights file's bytes as a section, through
// the same pieces: detail::weights_bytes, parse_weights, check_weights (changes nothing) and
// apply_weights. The byte layout, dtypes and rules: docs/weights-files.md.
#pragma once
#include <zlib.h>

#include "../core/half.hpp"

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <type_traits>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include "../core/errors.hpp"
#include "../core/format.hpp"
#include "../core/plan.hpp"
#include "../core/precision.hpp"
#include "atomic_file.hpp"
#include "read_file.hpp"

namespace ctnn::io {

static_assert(std::endian::native == std::endian::little, "ctnn weight files assume a little-endian host");

// A weights file that cannot be read or does not fit the model (an io_error naming the path).
class weights_error : public io_error {
 public:
  using io_error::io_error;
};

inline constexpr char weights_magic[8] = {'C', 'T', 'N', 'N', 'W', 'T', 'S', '\0'};
inline constexpr std::uint32_t weights_version = 2;

namespace detail {
// The callable SavableModel probes for_each_variable with (a named type, not a
// lambda: nvcc 13 judges a concept with a lambda in its requires-expression false).
struct variable_visitor {
  void operator()(const variable_ref&) const {}
};
}  // namespace detail

// A model whose variables can be saved: its network type and for_each_variable.
template <class M>
concept SavableModel = requires(const M& m, detail::variable_visitor f) {
  typename M::network;
  typename M::variable_type;
  m.for_each_variable(f);
};

namespace detail {
template <class V>
void put(std::string& s, V v) {
  s.append(reinterpret_cast<const char*>(&v), sizeof v);
}

enum dtype : std::uint8_t { f32 = 1, f64 = 2, u8 = 3, u32 = 4, f16 = 5, bf16 = 6, i8 = 7, i32 = 8 };  // i8, i32: quantized layers

// W: the model's variable_type (tells float16 from bfloat16 for 2-byte variables).
template <class W = float>
std::uint8_t dtype_of(const variable_ref& v) {
  if (v.type == elem::u8) return u8;
  if (v.type == elem::u32) return u32;
  if (v.type == elem::i8) return i8;
  if (v.type == elem::i32) return i32;
  if (v.type == elem::f32) return f32;
  if (v.element_bytes == 2) return std::is_same_v<W, bfloat16_t> ? bf16 : f16;
  return v.element_bytes == 8 ? f64 : f32;
}
// float32 <-> 16-bit: converted on load.
inline bool converts(std::uint8_t from, std::uint8_t to) {
  auto half = [](std::uint8_t d) { return d == f16 || d == bf16; };
  return from != to && (from == f32 || half(from)) && (to == f32 || half(to)) && (half(from) || half(to));
}
inline float dtype_value(const char* p, std::uint8_t d) {
  std::uint16_t h;
  if (d == f32) {
    float f;
    std::memcpy(&f, p, 4);
    return f;
  }
  std::memcpy(&h, p, 2);
  return d == f16 ? float(float16_t::from_bits(h)) : float(bfloat16_t::from_bits(h));
}
inline void put_dtype_value(std::byte* p, std::uint8_t d, float f) {
  if (d == f32) {
    std::memcpy(p, &f, 4);
    return;
  }
  const std::uint16_t h = d == f16 ? float16_t(f).bits : bfloat16_t(f).bits;
  std::memcpy(p, &h, 2);
}
inline std::string dtype_name(std::uint8_t d) {
  switch (d) {
    case f32: return "float32";
    case f64: return "float64";
    case u8: return "uint8";
    case u32: return "uint32";
    case f16: return "float16";
    case bf16: return "bfloat16";
    case i8: return "int8";
    case i32: return "int32";
  }
  return "unknown type " + std::to_string(d);
}
inline std::size_t dtype_bytes(std::uint8_t d) {
  return d == f64 ? 8 : (d == u8 || d == i8) ? 1 : (d == f16 || d == bf16) ? 2 : 4;
}

// n values of dtype `from` at p converted to `to` (float32 <-> 16-bit): "" when
// every one is finite in the file and after the conversion, else the first that
// is not ("value [i] is NaN in the file", "value [i] = 1e+05 overflows float16").
inline std::string conversion_fault(const char* p, std::uint8_t from, std::uint8_t to, std::size_t n) {
  const std::size_t sb = dtype_bytes(from);
  for (std::size_t i = 0; i < n; ++i) {
    const float f = dtype_value(p + i * sb, from);
    if (!std::isfinite(f))
      return "value [" + std::to_string(i) + "] is " + (std::isnan(f) ? "NaN" : f > 0 ? "+Inf" : "-Inf") +
             " in the file (a " + dtype_name(from) + " tensor converted to " + dtype_name(to) +
             " must hold finite values)";
    std::byte b[4];
    put_dtype_value(b, to, f);
    if (!std::isfinite(dtype_value(reinterpret_cast<const char*>(b), to)))
      return "value [" + std::to_string(i) + "] = " + ctnn::detail::format_number(f) + " overflows " + dtype_name(to) +
             " (largest finite value " +
             ctnn::detail::format_number(to == f16 ? float(float16_t::from_bits(0x7bff))
                                                   : float(bfloat16_t::from_bits(0x7f7f))) +
             ")";
  }
  return {};
}

inline std::string shape_text(const std::uint64_t* d, std::size_t rank) {
  std::string s = "[";
  for (std::size_t i = 0; i < rank; ++i) s += (i ? "x" : "") + std::to_string(d[i]);
  return s + "]";
}

// Bounds-checked reading of the file's bytes.
struct reader {
  const std::vector<char>& d;
  std::size_t at = 0;
  std::size_t end;
  bool ok = true;
  template <class V>
  V get() {
    V v{};
    if (end - at < sizeof v) {
      ok = false;
      return v;
    }
    std::memcpy(&v, d.data() + at, sizeof v);
    at += sizeof v;
    return v;
  }
  const char* take(std::uint64_t n) {
    if (end - at < n) {
      ok = false;
      return nullptr;
    }
    const char* p = d.data() + at;
    at += std::size_t(n);
    return p;
  }
};

// The value at p of a known dtype d, as a double (ctnn-inspect's values and statistics).
inline double dtype_number(const char* p, std::uint8_t d) {
  switch (d) {
    case f64: {
      double v;
      std::memcpy(&v, p, 8);
      return v;
    }
    case u8: return double(std::uint8_t(*p));
    case i8: return double(std::int8_t(*p));
    case u32: {
      std::uint32_t v;
      std::memcpy(&v, p, 4);
      return double(v);
    }
    case i32: {
      std::int32_t v;
      std::memcpy(&v, p, 4);
      return double(v);
    }
  }
  return double(dtype_value(p, d));
}

// The checks every weights file meets before its contents are read (load_weights and
// read_weights_file): its size, magic, version and checksum; returns the version.
template <class Fail>
std::uint32_t check_weights_header(const std::vector<char>& d, Fail&& fail) {
  if (d.size() < 16) fail("truncated (" + std::to_string(d.size()) + " bytes, too short for a header)");
  if (std::memcmp(d.data(), weights_magic, 8) != 0) fail("not a ctnn weights file (wrong magic)");
  std::uint32_t version;
  std::memcpy(&version, d.data() + 8, 4);
  if (version != 1 && version != weights_version)
    fail("format version " + std::to_string(version) + " is not supported (this build reads versions 1 and " +
         std::to_string(weights_version) + ")");
  std::uint32_t stored_crc;
  std::memcpy(&stored_crc, d.data() + d.size() - 4, 4);
  const auto crc = std::uint32_t(::crc32(0L, reinterpret_cast<const Bytef*>(d.data()), uInt(d.size() - 4)));
  if (crc != stored_crc) fail("checksum mismatch: the file is corrupt or truncated");
  return version;
}

}  // namespace detail

// One tensor of a weights file, read without the network type (read_weights_file).
struct weights_file_tensor {
  std::uint32_t layer = 0;  // 0-based
  role kind = role::parameter;
  std::uint8_t dtype = 0;  // the file's dtype code (docs/weights-files.md); dtype_name() names it
  std::string name;
  std::vector<std::uint64_t> dims;
  std::size_t elements = 0, bytes = 0;
  std::size_t offset = 0;  // of its first value in weights_file::data
  std::string dtype_name() const { return detail::dtype_name(dtype); }
  std::string shape() const { return detail::shape_text(dims.data(), dims.size()); }
  double value(std::size_t i, const std::vector<char>& data) const {
    return detail::dtype_number(data.data() + offset + i * detail::dtype_bytes(dtype), dtype);
  }
};

namespace detail {
// One version-2 tensor record up to its values: layer, role (kind, unchecked), dtype, rank,
// name and dimensions into t; false when the file ends inside it. load_weights and
// read_weights_file read records through it.
CTNN_LAZY CTNN_DECL bool read_tensor_record(reader& r, weights_file_tensor& t, std::uint8_t& kind)
#if CTNN_DEFINITIONS
{
  t.layer = r.get<std::uint32_t>();
  kind = r.get<std::uint8_t>();
  t.dtype = r.get<std::uint8_t>();
  const auto rank = r.get<std::uint8_t>();
  r.get<std::uint8_t>();
  const auto nlen = r.get<std::uint32_t>();
  const char* name = r.take(nlen);
  if (!r.ok) return false;
  t.name.assign(name, nlen);
  for (std::size_t i = 0; i < rank && r.ok; ++i) t.dims.push_back(r.get<std::uint64_t>());
  return r.ok;
}
#else
;
#endif
}  // namespace detail

// A whole weights file as read_weights_file found it.
struct weights_file {
  std::uint32_t version = 0;
  std::uint64_t fingerprint = 0;
  std::string architecture;  // Net::spec_string() of the network that saved it
  std::vector<weights_file_tensor> tensors;  // version 2; none in a version-1 file
  // Version 1 (the padded arena): bytes per value, parameter and state values.
  std::uint32_t element_bytes = 0;
  std::uint64_t parameter_values = 0, state_values = 0;
  std::vector<char> data;  // the file's bytes
};

namespace detail {
// The checks of read_weights_file on a weights file's bytes f.data (a file, or a model file's
// weights section), failing through fail(what).
template <class Fail>
void parse_weights(weights_file& f, Fail&& fail) {
  const std::vector<char>& d = f.data;
  f.version = check_weights_header(d, fail);
  reader r{d, 12, d.size() - 4};
  if (f.version == 1) {
    f.element_bytes = r.get<std::uint32_t>();
    f.fingerprint = r.get<std::uint64_t>();
    f.parameter_values = r.get<std::uint64_t>();
    f.state_values = r.get<std::uint64_t>();
    const auto len = r.get<std::uint32_t>();
    const char* text = r.take(len);
    if (!r.ok) fail("a version-1 file, truncated");
    f.architecture.assign(text, len);
    const std::uint64_t values = r.end - r.at;
    if (f.element_bytes == 0 || f.parameter_values > values / f.element_bytes ||
        f.state_values > values / f.element_bytes - f.parameter_values ||
        (f.parameter_values + f.state_values) * f.element_bytes != values)
      fail("a version-1 file, its size does not match its header");
    return;
  }
  f.fingerprint = r.get<std::uint64_t>();
  const auto len = r.get<std::uint32_t>();
  const char* text = r.take(len);
  const auto count = r.get<std::uint32_t>();
  if (!r.ok) fail("truncated header");
  f.architecture.assign(text, len);
  for (std::uint32_t k = 0; k < count; ++k) {
    weights_file_tensor t;
    const std::string which = "tensor " + std::to_string(k + 1) + " of " + std::to_string(count);
    std::uint8_t kind = 0;
    const bool whole = read_tensor_record(r, t, kind);
    if (t.name.empty() && !whole) fail("truncated inside " + which);
    const std::string where = which + " (layer " + std::to_string(t.layer + std::uint64_t(1)) + " '" + t.name + "')";
    if (!whole) fail("truncated inside the shape of " + where);
    if (kind >= role_count) fail(where + " has an unknown role " + std::to_string(kind));
    if (role(kind) == role::derived) fail(where + " has the role 'derived', which files never hold");
    t.kind = role(kind);
    if (dtype_name(t.dtype).starts_with("unknown")) fail(where + " has an unknown dtype " + std::to_string(t.dtype));
    // The extent, bounded by the bytes left (no overflow: each factor is checked against them).
    const std::uint64_t left = (r.end - r.at) / dtype_bytes(t.dtype);
    std::uint64_t n = 1;
    for (std::uint64_t dim : t.dims) {
      if (dim != 0 && n > left / dim) fail("truncated inside the values of " + where + " of shape " + t.shape());
      n *= dim;
    }
    t.elements = std::size_t(n);
    t.bytes = t.elements * dtype_bytes(t.dtype);
    t.offset = r.at;
    r.take(t.bytes);
    f.tensors.push_back(std::move(t));
  }
  if (r.at != r.end) fail("corrupt: " + std::to_string(r.end - r.at) + " bytes follow the last tensor");
}
}  // namespace detail

// Reads a weights file of any network: the checks of load_weights that need no network
// type (size, magic, version, checksum, every tensor's role, dtype and extent within the
// file, nothing after the last tensor). Throws weights_error naming the file and the problem.
CTNN_LAZY CTNN_DECL weights_file read_weights_file(const std::filesystem::path& path)
#if CTNN_DEFINITIONS
{
  auto fail = [&](const std::string& what) { throw weights_error("read_weights_file", path, what); };
  weights_file f;
  f.data = read_file<std::vector<char>, weights_error>(path, "read_weights_file");
  detail::parse_weights(f, fail);
  return f;
}
#else
;
#endif

namespace detail {
// A version-2 weights file's bytes (save_weights, and a model file's weights section).
template <class M>
std::string weights_bytes(const M& m) {
  using Net = typename M::network;
  const std::string arch = Net::spec_string();
  std::string out;
  out.append(weights_magic, 8);
  put<std::uint32_t>(out, weights_version);
  put<std::uint64_t>(out, Net::fingerprint());
  put<std::uint32_t>(out, std::uint32_t(arch.size()));
  out += arch;
  std::uint32_t count = 0;
  m.for_each_variable([&](const variable_ref&) { ++count; });
  put<std::uint32_t>(out, count);
  m.for_each_variable([&](const variable_ref& v) {
    put<std::uint32_t>(out, std::uint32_t(v.layer));
    put<std::uint8_t>(out, std::uint8_t(v.kind));
    put<std::uint8_t>(out, dtype_of<typename M::variable_type>(v));
    put<std::uint8_t>(out, std::uint8_t(v.rank));
    put<std::uint8_t>(out, 0);
    put<std::uint32_t>(out, std::uint32_t(v.name.size()));
    out.append(v.name);
    for (std::size_t i = 0; i < v.rank; ++i) put<std::uint64_t>(out, v.dims[i]);
    out.append(reinterpret_cast<const char*>(v.data), v.extent * v.element_bytes);
  });
  const auto crc = std::uint32_t(::crc32(0L, reinterpret_cast<const Bytef*>(out.data()), uInt(out.size())));
  put<std::uint32_t>(out, crc);
  return out;
}
}  // namespace detail

template <SavableModel M>
void save_weights(const M& m, const std::filesystem::path& path) {
  write_file_atomically(path, detail::weights_bytes(m));
}

namespace detail {
// Version 1: magic, u32 1, u32 element size, u64 fingerprint, u64 P, u64 S,
// u32 L, the text, P parameter values then S state values (the padded
// arena), u32 CRC. It loads when the element size and both counts match the
// model's padded regions (the same 64-byte blocks per layer).
template <class M>
void load_v1(M& m, const std::vector<char>& d, const std::string& name) {
  using Net = typename M::network;
  using W = typename M::variable_type;
  auto fail = [&](const std::string& what) { throw weights_error("load_weights", name, "a version-1 file, " + what); };
  reader r{d, 12, d.size() - 4};
  const auto esize = r.get<std::uint32_t>();
  const auto fp = r.get<std::uint64_t>();
  const auto np = r.get<std::uint64_t>();
  const auto ns = r.get<std::uint64_t>();
  const auto len = r.get<std::uint32_t>();
  const char* text = r.take(len);
  if (!r.ok) fail("truncated");
  const std::string arch(text, len);
  if (fp != Net::fingerprint() || arch != Net::spec_string())
    fail("saved from the network '" + arch + "' but this model is '" + Net::spec_string() + "'");
  if (esize != sizeof(W))
    fail("holds " + std::to_string(esize * 8) + "-bit values but this model uses " + std::to_string(sizeof(W) * 8) +
         "-bit values");
  const std::size_t p_size = m.parameters().size(), s_size = m.state().size();
  if (np != p_size || ns != s_size)
    fail("its padded layout (" + std::to_string(np) + " parameter and " + std::to_string(ns) +
         " state values) differs from this build's (" + std::to_string(p_size) + " and " + std::to_string(s_size) +
         "); re-save it with ctnn 0.1");
  const char* src = r.take((np + ns) * esize);
  if (!r.ok || r.at != r.end) fail("its size does not match its header");
  if constexpr (requires { m.host_region(role::parameter, false); }) {  // any backend's model: host views
    auto p = m.host_region(role::parameter, false);
    auto s = m.host_region(role::state, false);
    std::memcpy(p.data(), src, np * esize);
    std::memcpy(s.data(), src + np * esize, ns * esize);
    p.commit();
    s.commit();
  } else {
    std::memcpy(m.parameters().data(), src, np * esize);
    std::memcpy(m.state().data(), src + np * esize, ns * esize);
  }
}
}  // namespace detail

namespace detail {
// One tensor's values checked against the model, to copy (converted when from != 0).
struct pending_copy {
  const char* src;
  std::size_t bytes;
  std::uint8_t from = 0, to = 0;  // dtypes when converted (float32 <-> 16-bit)
  std::size_t count = 0;
};

// The checks of load_weights on a version-2 file's bytes d (a file, or a model file's weights
// section) after its header checks: the network, every tensor against m and nothing after the
// last. Returns the copies apply_weights makes; changes nothing; fails through fail(what).
template <class M, class Fail>
std::vector<pending_copy> check_weights(M& m, const std::vector<char>& d, Fail&& fail) {
  using Net = typename M::network;
  reader r{d, 12, d.size() - 4};
  const auto fp = r.get<std::uint64_t>();
  const auto len = r.get<std::uint32_t>();
  const char* text = r.take(len);
  const auto count = r.get<std::uint32_t>();
  if (!r.ok) fail("truncated header");
  const std::string arch(text, len);
  if (fp != Net::fingerprint() || arch != Net::spec_string())
    fail("it was saved from the network '" + arch + "' but this model is '" + Net::spec_string() + "'");
  std::uint32_t expected = 0;
  m.for_each_variable([&](const variable_ref&) { ++expected; });
  if (count != expected)
    fail("it holds " + std::to_string(count) + " tensors but this model has " + std::to_string(expected));

  // Check every tensor against the model first; apply_weights copies only when all match (a
  // second walk in the same order: each tensor read gives one copy).
  std::vector<pending_copy> copies;
  copies.reserve(count);
  std::string error;
  std::size_t state_layer = std::size_t(-1);
  std::vector<const std::byte*> layer_state;  // the file's bytes of this layer's state buffers read so far
  // the last output_scale and output_zero_point read (a full-integer layer's), for the next layer
  // reading its int8 output (variable_ref::int8_input): their layer, and the file's bytes of each
  std::size_t out_layer = std::size_t(-1);
  const std::byte* out_param[2] = {nullptr, nullptr};
  m.for_each_variable([&](const variable_ref& v) {
    if (!error.empty()) return;
    weights_file_tensor t;
    std::uint8_t kind = 0;
    if (!read_tensor_record(r, t, kind)) {
      error = "truncated inside tensor '" + std::string(v.name) + "' of layer " + std::to_string(v.layer + 1);
      return;
    }
    const std::uint32_t layer = t.layer;
    const std::uint8_t type = t.dtype;
    const std::size_t rank = t.dims.size();
    const std::uint64_t* dims = t.dims.data();
    const std::string where = "layer " + std::to_string(v.layer + 1) + " " + std::string(role_name(v.kind)) + " '" +
                              std::string(v.name) + "'";
    const std::string& stored = t.name;
    if (layer != v.layer || kind != std::uint8_t(v.kind) || stored != v.name) {
      error = "expected " + where + " but found layer " + std::to_string(layer + 1) + " tensor '" + stored + "'";
      return;
    }
    const std::uint8_t want = dtype_of<typename M::variable_type>(v);
    if (type != want && !converts(type, want)) {
      error = where + " holds " + dtype_name(type) + " values but this model uses " + dtype_name(want);
      return;
    }
    std::uint64_t want_dims[4] = {v.dims[0], v.dims[1], v.dims[2], v.dims[3]};
    bool same = rank == v.rank;
    for (std::size_t i = 0; same && i < rank; ++i) same = dims[i] == v.dims[i];
    if (!same) {
      error = where + " has shape " + shape_text(dims, rank) + " but this model's is " +
              shape_text(want_dims, v.rank);
      return;
    }
    const std::size_t bytes = v.extent * dtype_bytes(type);
    const char* src = r.take(bytes);
    if (!r.ok) {
      error = "truncated inside the values of " + where;
      return;
    }
    if (v.check)
      if (std::string why = v.check(v.name, reinterpret_cast<const std::byte*>(src)); !why.empty()) {
        error = where + ": " + why;
        return;
      }
    if (v.kind == role::state && type == want && v.extent == 1 && dtype_bytes(type) == 4) {
      const bool scale = v.name == "output_scale" || v.name == "input_scale";
      const auto* at = reinterpret_cast<const std::byte*>(src);
      if (v.name == "output_scale" || v.name == "output_zero_point") {
        out_layer = v.layer;
        out_param[scale ? 0 : 1] = at;
      } else if (v.int8_input && (v.name == "input_scale" || v.name == "input_zero_point")) {
        // one tensor between the two layers: one scale and zero point (quantization::int8_io)
        // (the last layer before it with an output scale: int8_pass layers between them have none)
        const std::byte* want_at = out_layer < v.layer ? out_param[scale ? 0 : 1] : nullptr;
        if (!want_at || std::memcmp(want_at, at, 4) != 0) {
          const auto text = [&](const std::byte* p) {
            if (!scale) {
              std::int32_t z;
              std::memcpy(&z, p, 4);
              return std::to_string(z);
            }
            float f;
            std::memcpy(&f, p, 4);
            char b[32];
            std::snprintf(b, sizeof b, "%.9g", double(f));
            return std::string(b);
          };
          error = where + " is " + text(at) + " but this layer reads layer " +
                  std::to_string(out_layer < v.layer ? out_layer + 1 : v.layer) +
                  "'s int8 output, whose " + (scale ? "output_scale" : "output_zero_point") + " is " +
                  (want_at ? text(want_at) : std::string("missing")) +
                  " (one tensor, one scale and zero point; quantization::float_between_t<Net> requantizes in float)";
          return;
        }
      }
    }
    if (v.kind == role::state) {
      if (v.layer != state_layer) layer_state.clear();
      state_layer = v.layer;
      layer_state.push_back(reinterpret_cast<const std::byte*>(src));
      if (v.check_state && type == want)
        if (std::string why = v.check_state(v.name, layer_state.back(), layer_state.data(), layer_state.size());
            !why.empty()) {
          error = where + ": " + why;
          return;
        }
    }
    if (type == want) {
      copies.push_back({src, bytes});
      return;
    }
    if (std::string why = conversion_fault(src, type, want, v.extent); !why.empty()) {
      error = where + " " + why;
      return;
    }
    copies.push_back({src, bytes, type, want, v.extent});
  });
  if (!error.empty()) fail(error);
  if (r.at != r.end) fail("corrupt: " + std::to_string(r.end - r.at) + " bytes follow the last tensor");
  return copies;
}

// Copies checked tensors (check_weights) into m.
template <class M>
void apply_weights(M& m, const std::vector<pending_copy>& copies) {
  std::size_t k = 0;
  m.for_each_variable([&](const variable_ref& v) {
    const pending_copy& c = copies[k++];
    if (!c.from) {
      std::memcpy(v.data, c.src, c.bytes);
      return;
    }
    const std::size_t sb = dtype_bytes(c.from), db = dtype_bytes(c.to);
    for (std::size_t i = 0; i < c.count; ++i)
      put_dtype_value(v.data + i * db, c.to, dtype_value(c.src + i * sb, c.from));
  });
}
}  // namespace detail

template <SavableModel M>
void load_weights(M& m, const std::filesystem::path& path) {
  const std::string name = path.string();
  auto fail = [&](const std::string& what) { throw weights_error("load_weights", path, what); };
  const auto d = read_file<std::vector<char>, weights_error>(path, "load_weights");
  const std::uint32_t version = detail::check_weights_header(d, fail);
  if (version == 1) return detail::load_v1(m, d, name);
  detail::apply_weights(m, detail::check_weights(m, d, fail));
}

}  // namespace ctnn::io
