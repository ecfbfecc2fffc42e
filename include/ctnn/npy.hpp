// ctnn/npy.hpp — .npy files (NumPy's format) for inputs, outputs and variables.
//
//   save_npy(path, e)                any xtensor expression of numbers to path, C order
//                                    (written to a temporary and renamed: io/atomic_file.hpp)
//   load_npy<T, R>(path)             xt::xtensor<T, R>
//   load_npy<T, R>(path, npy_convert::allow)  the same from any bool, integer or floating-point
//                                    dtype (uint8 images, int64 labels, float64 arrays, either
//                                    byte order), converted value by value; a value T cannot
//                                    hold (out of range, NaN or a fraction for an integer T) is
//                                    an io_error naming the file and the value's index
//   load_inputs_npy<M>(path[, npy_convert::allow])  a batch for model type M: (n, input
//                                    shape...) of its value type, ready for predict / evaluate
//   save_variables_npy(m, dir)       every parameter, state, mask and metadata buffer of m
//                                    as dir/layer<i>_<name>.npy (i counted from 0, as in
//                                    variable<i, "name">), with its declared shape and dtype
//   load_variables_npy(m, dir)       reads them all back; every file is read and checked
//                                    (a sparse layout's index as load_weights checks it)
//                                    before anything is copied into m
// ctnn's own reader checks the whole file before it allocates or copies: format 1.0,
// 2.0 or 3.0, a header of at most 1 MiB, the dtype asked for (strict, the default: no
// conversion; bfloat16 and big-endian refused), exactly the announced bytes; Fortran order is read into C
// order. Every failure is a ctnn::io_error "<function>: <path>: <what is wrong>".
// Needs xtensor (CMake target ctnn::xtensor). Docs: docs/interop.md (".npy files").
#pragma once
#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <limits>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "core/errors.hpp"
#include "core/format.hpp"
#include "core/half.hpp"
#include "core/plan.hpp"
#include "io/atomic_file.hpp"
#include "io/read_file.hpp"
#include "train/model.hpp"
#include "xtensor/shapes.hpp"

namespace ctnn {

namespace npyd {

inline constexpr std::size_t max_header_bytes = std::size_t(1) << 20;
inline constexpr std::size_t max_rank = 64;  // NumPy 2's NPY_MAXDIMS

// NumPy's descr of T: '<f4' (little-endian float32), '|u1', '|b1', '<f2' (float16_t), ...;
// "" for bfloat16_t, which NumPy has no dtype for.
template <class T>
std::string descr_of() {
  static_assert(std::is_arithmetic_v<T> || is_half_v<T>,
                "ctnn npy: only bool, integer and floating-point values have a .npy dtype");
  if constexpr (std::is_same_v<T, bfloat16_t>) return "";
  const char order = sizeof(T) == 1 ? '|' : std::endian::native == std::endian::little ? '<' : '>';
  const char kind = std::is_same_v<T, bool> ? 'b'
                    : (std::is_floating_point_v<T> || is_half_v<T>) ? 'f'
                    : std::is_signed_v<T> ? 'i' : 'u';
  return std::string{order, kind} + std::to_string(sizeof(T));
}

// "float32 ('<f4')"; descr is one that parse() accepted.
inline std::string dtype_name(const std::string& descr) {
  const char k = descr[1];
  const std::string kind = k == 'f' ? "float" : k == 'i' ? "int" : k == 'u' ? "uint" : k == 'b' ? "bool" : "complex";
  const std::string bits = std::to_string(std::stoul(descr.substr(2)) * 8);
  return kind + bits + (descr[0] == '>' ? " big-endian" : "") + " ('" + descr + "')";
}

template <class Dims>
std::string dims_str(const Dims& d, std::size_t rank) {
  std::string r = "(";
  for (std::size_t i = 0; i < rank; ++i) r += (i ? ", " : "") + std::to_string(d[i]);
  return r + (rank == 1 ? ",)" : ")");
}

// A .npy file, checked: its header and where its values are.
struct array {
  std::string descr;  // normalised: one-byte types '|', native order '<' (on little-endian hosts)
  bool fortran_order = false;
  std::vector<std::size_t> shape;
  std::size_t count = 1;      // values (shape () holds one)
  std::size_t item_size = 0;  // bytes per value
  std::string bytes;          // the whole file
  std::size_t data_at = 0;    // where the values start in bytes
  const char* data() const { return bytes.data() + data_at; }
};

// The header's dictionary, a Python literal: {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
struct header_parser {
  std::string_view s;
  std::size_t i = 0;
  std::string error;  // the first problem found, empty while there is none

  bool fail(const std::string& what) {
    if (error.empty()) error = what;
    return false;
  }
  void ws() {
    while (i < s.size() && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r')) ++i;
  }
  bool eat(char c) {
    ws();
    if (i < s.size() && s[i] == c) {
      ++i;
      return true;
    }
    return false;
  }
  std::string found() const {
    if (i >= s.size()) return "the end of the header";
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7f) return std::string("'") + s[i] + "'";
    return "byte " + std::to_string(c);
  }
  bool string(std::string& out) {
    ws();
    if (i >= s.size() || (s[i] != '\'' && s[i] != '"')) return fail("expected a quoted string, found " + found());
    const char q = s[i++];
    const std::size_t end = s.find(q, i);
    if (end == std::string_view::npos) return fail("a string is not closed");
    out.assign(s.substr(i, end - i));
    if (out.find('\\') != std::string::npos) return fail("a string holds an escape sequence");
    i = end + 1;
    return true;
  }
  bool boolean(bool& out) {
    ws();
    if (s.substr(i, 4) == "True") out = true, i += 4;
    else if (s.substr(i, 5) == "False") out = false, i += 5;
    else return fail("'fortran_order' is not True or False");
    return true;
  }
  bool tuple(std::vector<std::size_t>& out) {
    if (!eat('(')) return fail("'shape' is not a tuple");
    out.clear();
    for (;;) {
      if (eat(')')) return true;
      ws();
      if (i >= s.size() || s[i] < '0' || s[i] > '9') return fail("'shape' holds " + found() + ", not a size");
      std::size_t v = 0;
      while (i < s.size() && s[i] >= '0' && s[i] <= '9') {
        const std::size_t digit = std::size_t(s[i++] - '0');
        if (v > (std::size_t(std::numeric_limits<std::int64_t>::max()) - digit) / 10)
          return fail("a size in 'shape' does not fit in 63 bits");
        v = v * 10 + digit;
      }
      if (i < s.size() && s[i] == 'L') ++i;  // Python 2's long literal (format.py's _filter_header)
      if (out.size() == max_rank) return fail("'shape' has more than " + std::to_string(max_rank) + " axes");
      out.push_back(v);
      if (eat(',')) continue;
      if (eat(')')) {
        if (out.size() == 1) return fail("'shape' is (" + std::to_string(v) + "), a number, not a tuple");
        return true;
      }
      return fail("'shape' holds " + found() + " after a size");
    }
  }
};

// Reads and checks path: everything but the dtype wanted (check_dtype) and the shape wanted.
inline array read(const std::filesystem::path& path, const char* who) {
  array f;
  f.bytes = io::read_file(path, who);
  const std::string& b = f.bytes;
  auto invalid = [&](const std::string& what) { return io_error(who, path, "not a valid .npy file (" + what + ")"); };
  static constexpr char magic[] = "\x93NUMPY";
  if (b.size() < 8) throw invalid(std::to_string(b.size()) + " bytes, too short for the magic string and version");
  if (b.compare(0, 6, magic, 6) != 0) throw invalid("no \\x93NUMPY magic string");
  const auto u8 = [&](std::size_t at) { return std::size_t(static_cast<unsigned char>(b[at])); };
  const std::size_t major = u8(6), minor = u8(7);
  if ((major != 1 && major != 2 && major != 3) || minor != 0)
    throw invalid("format version " + std::to_string(major) + "." + std::to_string(minor) +
                  "; ctnn reads 1.0, 2.0 and 3.0");
  const std::size_t len_bytes = major == 1 ? 2 : 4;
  if (b.size() < 8 + len_bytes) throw invalid("the file ends inside the header length");
  std::size_t header_len = 0;
  for (std::size_t k = 0; k < len_bytes; ++k) header_len |= u8(8 + k) << (8 * k);
  const std::size_t header_at = 8 + len_bytes;
  if (header_len == 0) throw invalid("the header is empty");
  if (header_len > max_header_bytes)
    throw invalid("the header length " + std::to_string(header_len) + " is more than the " +
                  std::to_string(max_header_bytes) + " bytes ctnn reads");
  if (header_len > b.size() - header_at)
    throw invalid("the header length " + std::to_string(header_len) + " is more than the " +
                  std::to_string(b.size() - header_at) + " bytes after it");
  f.data_at = header_at + header_len;

  header_parser p{std::string_view(b).substr(header_at, header_len)};
  bool have_descr = false, have_fortran = false, have_shape = false;
  std::string descr;
  if (!p.eat('{')) throw invalid("the header is not a dictionary");
  while (p.error.empty() && !p.eat('}')) {
    std::string key;
    if (!p.string(key)) break;
    if (!p.eat(':')) {
      p.fail("no ':' after '" + printable(key, 40) + "'");
      break;
    }
    bool* seen = key == "descr" ? &have_descr : key == "fortran_order" ? &have_fortran : key == "shape" ? &have_shape : nullptr;
    if (!seen) p.fail("unknown key '" + printable(key, 40) + "'");
    else if (*seen) p.fail("the key '" + key + "' appears twice");
    else if (key == "descr") {
      if (p.eat('[')) p.fail("a structured dtype (a list of fields); ctnn reads numbers");
      else p.string(descr);
    } else if (key == "fortran_order") p.boolean(f.fortran_order);
    else p.tuple(f.shape);
    if (!p.error.empty()) break;
    *seen = true;
    if (!p.eat(',')) {
      if (!p.eat('}')) p.fail("expected ',' or '}', found " + p.found());
      break;
    }
  }
  if (p.error.empty()) {
    p.ws();
    if (p.i != p.s.size()) p.fail("the header goes on after its dictionary with " + p.found());
  }
  if (p.error.empty() && !(have_descr && have_fortran && have_shape))
    p.fail(std::string("the header has no '") + (!have_descr ? "descr" : !have_fortran ? "fortran_order" : "shape") + "'");
  if (!p.error.empty()) throw invalid(p.error);

  // descr: byte order, kind, item size
  const bool number = descr.size() >= 3 && descr.size() <= 4 && std::string_view("<>|=").find(descr[0]) != std::string_view::npos &&
                      std::string_view("biufc").find(descr[1]) != std::string_view::npos &&
                      descr.find_first_not_of("0123456789", 2) == std::string::npos;
  const std::size_t size = number ? std::stoul(descr.substr(2)) : 0;
  const bool size_ok = number && (descr[1] == 'b'   ? size == 1
                                  : descr[1] == 'f' ? (size == 2 || size == 4 || size == 8 || size == 16)
                                  : descr[1] == 'c' ? (size == 8 || size == 16 || size == 32)
                                                    : (size == 1 || size == 2 || size == 4 || size == 8));
  if (!size_ok)
    throw io_error(who, path, "holds '" + printable(descr, 40) + "' values; ctnn reads bool, integer and floating-point numbers");
  const char native = std::endian::native == std::endian::little ? '<' : '>';
  descr[0] = size == 1 ? '|' : (descr[0] == '|' || descr[0] == '=') ? native : descr[0];
  f.descr = descr;
  f.item_size = size;

  // the values: exactly shape x item size bytes
  const std::size_t available = b.size() - f.data_at;
  std::size_t need = size;
  bool too_many = false;
  for (const std::size_t d : f.shape) {
    if (d != 0 && need > available / d) too_many = true;  // (and no overflow)
    if (!too_many) need *= d;
  }
  if (std::find(f.shape.begin(), f.shape.end(), std::size_t(0)) != f.shape.end()) too_many = false, need = 0;
  if (too_many || need > available)
    throw io_error(who, path, "truncated: the header announces more values than the file holds");
  if (need < available)
    throw io_error(who, path, "the file holds " + std::to_string(available) + " bytes of values; its header announces " +
                                  std::to_string(need) + " (shape " + dims_str(f.shape, f.shape.size()) + " of " +
                                  dtype_name(f.descr) + ")");
  f.count = need / size;
  if (descr[1] == 'b')
    for (std::size_t k = 0; k < f.count; ++k)
      if (const unsigned char v = static_cast<unsigned char>(b[f.data_at + k]); v > 1)
        throw io_error(who, path, "byte " + std::to_string(k) + " of the bool values is " + std::to_string(v) + ", neither 0 nor 1");
  return f;
}

inline void check_dtype(const array& f, const std::string& want, const std::filesystem::path& path, const char* who) {
  if (want.empty()) throw io_error(who, path, "bfloat16 values have no NumPy dtype");
  if (f.descr != want) throw io_error(who, path, "holds " + dtype_name(f.descr) + " values, " + dtype_name(want) + " are wanted");
}

// Copies f's values to out in C (row-major) order.
inline void copy_values(const array& f, void* out) {
  auto* dst = static_cast<char*>(out);
  const std::size_t r = f.shape.size(), w = f.item_size;
  if (f.count == 0) return;  // (an empty tensor's data() may be null, which memcpy may not be given)
  if (!f.fortran_order || r <= 1) {
    std::memcpy(dst, f.data(), f.count * w);
    return;
  }
  // Fortran order: axis 0 varies fastest in the file. Walk the C-order indices.
  std::vector<std::size_t> stride(r), index(r, 0);
  stride[0] = w;
  for (std::size_t a = 1; a < r; ++a) stride[a] = stride[a - 1] * f.shape[a - 1];
  std::size_t from = 0;
  for (std::size_t k = 0; k < f.count; ++k) {
    std::memcpy(dst + k * w, f.data() + from, w);
    for (std::size_t a = r; a-- > 0;) {  // the last axis varies fastest in C order
      from += stride[a];
      if (++index[a] < f.shape[a]) break;
      from -= stride[a] * f.shape[a];
      index[a] = 0;
    }
  }
}

// Value k (C order) of f's values, already copied in C order to `raw` (f.item_size bytes each),
// converted to T; a value T cannot hold throws io_error naming path and k.
template <class T>
struct converter {
  const array& f;
  const std::filesystem::path& path;
  const char* who;

  [[noreturn]] void refuse(std::size_t k, const std::string& value, const char* why) const {
    throw io_error(who, path, "value " + value + " at index " + std::to_string(k) + " (C order) of its " +
                                  dtype_name(f.descr) + " values " + why + " " + type_name());
  }
  static std::string type_name() {
    if constexpr (std::is_floating_point_v<T>) return "float" + std::to_string(8 * sizeof(T));
    else return std::string(std::is_signed_v<T> ? "int" : "uint") + std::to_string(8 * sizeof(T));
  }
  template <class U>
  static U load(const char* p, bool swap) {
    char b[sizeof(U)];
    std::memcpy(b, p, sizeof(U));
    if (swap) std::reverse(b, b + sizeof(U));
    U v;
    std::memcpy(&v, b, sizeof(U));
    return v;
  }
  T operator()(const char* p, std::size_t k) const {
    const bool swap = f.descr[0] != '|' && (f.descr[0] == '<') != (std::endian::native == std::endian::little);
    const char kind = f.descr[1];
    const std::size_t w = f.item_size;
    if (kind == 'f') {
      const double v = w == 2 ? double(float(float16_t::from_bits(load<std::uint16_t>(p, swap))))
                       : w == 4 ? double(load<float>(p, swap))
                                : load<double>(p, swap);
      return from_double(v, k);
    }
    if (kind == 'i') {
      const std::int64_t v = w == 1 ? load<std::int8_t>(p, swap) : w == 2 ? load<std::int16_t>(p, swap)
                              : w == 4 ? std::int64_t(load<std::int32_t>(p, swap)) : load<std::int64_t>(p, swap);
      return from_integer(v < 0, std::uint64_t(v), std::to_string(v), k);
    }
    const std::uint64_t v = w == 1 ? std::uint64_t(static_cast<unsigned char>(*p)) : w == 2 ? load<std::uint16_t>(p, swap)
                            : w == 4 ? std::uint64_t(load<std::uint32_t>(p, swap)) : load<std::uint64_t>(p, swap);
    return from_integer(false, v, std::to_string(v), k);  // 'u', and 'b' (0 or 1, read checked them)
  }
  T from_double(double v, std::size_t k) const {
    if constexpr (std::is_floating_point_v<T>) {
      if (std::isfinite(v) && std::abs(v) > double(std::numeric_limits<T>::max())) refuse(k, detail::format_number(v), "is out of the range of");
      return T(v);
    } else {
      if (std::isnan(v)) refuse(k, "nan", "is not a number, so not an");
      if (v != std::trunc(v) || !std::isfinite(v)) refuse(k, detail::format_number(v), "is not a whole number, so not an");
      if (!(v >= double(std::numeric_limits<T>::min()) && v <= double(std::numeric_limits<T>::max())))
        refuse(k, detail::format_number(v), "is out of the range of");
      return T(v);
    }
  }
  // The magnitude of a negative value is -v as uint64 (two's complement); v as text for the message.
  T from_integer(bool negative, std::uint64_t bits, const std::string& text, std::size_t k) const {
    if constexpr (std::is_floating_point_v<T>) {
      return negative ? T(std::int64_t(bits)) : T(bits);  // rounded to nearest, as NumPy's astype
    } else {
      const std::int64_t v = std::int64_t(bits);
      if (negative ? (!std::is_signed_v<T> || v < std::int64_t(std::numeric_limits<T>::min()))
                   : bits > std::uint64_t(std::numeric_limits<T>::max()))
        refuse(k, text, "is out of the range of");
      return negative ? T(v) : T(bits);
    }
  }
};

// f's values converted to T into out (f.count values, C order).
template <class T>
void convert_values(const array& f, T* out, const std::filesystem::path& path, const char* who) {
  if (f.descr[1] == 'c' || (f.descr[1] == 'f' && f.item_size == 16))
    throw io_error(who, path, "holds " + dtype_name(f.descr) + " values; ctnn converts bool, integer, float16, float32 "
                              "and float64 values");
  std::string raw(f.count * f.item_size, '\0');
  copy_values(f, raw.data());
  const converter<T> c{f, path, who};
  for (std::size_t k = 0; k < f.count; ++k) out[k] = c(raw.data() + k * f.item_size, k);
}

// The file of a model's values: header (version 1.0, or 2.0 when it needs more than
// 65535 bytes), then the values in C order.
template <class V, class Shape>
std::string npy_bytes(const Shape& shape, std::size_t count, const auto& write_values, const std::filesystem::path& path,
                      const char* who) {
  if (descr_of<V>().empty()) throw io_error(who, path, "bfloat16 values have no NumPy dtype");
  std::string dict = "{'descr': '" + descr_of<V>() + "', 'fortran_order': False, 'shape': " + dims_str(shape, std::size(shape)) + ", }";
  const std::size_t unpadded = dict.size() + 1;  // + '\n'
  const bool v1 = 10 + unpadded + 64 <= 65535;
  const std::size_t prefix = v1 ? 10 : 12;
  dict.append(64 - (prefix + unpadded) % 64, ' ');
  dict += '\n';
  std::string out("\x93NUMPY", 6);
  out += char(v1 ? 1 : 2);
  out += char(0);
  for (std::size_t k = 0; k < (v1 ? 2u : 4u); ++k) out += char((dict.size() >> (8 * k)) & 0xff);
  out += dict;
  const std::size_t at = out.size();
  out.resize(at + count * sizeof(V));
  write_values(out.data() + at);
  return out;
}

// Calls f.template operator()<V>() with the C++ type of a variable_ref's element.
template <class M, class F>
void with_element_type(const variable_ref& v, F&& f) {
  switch (v.type) {
    case elem::variable: return f.template operator()<typename M::variable_type>();
    case elem::compute: return f.template operator()<typename M::compute_type>();
    case elem::f32: return f.template operator()<float>();
    case elem::u8: return f.template operator()<std::uint8_t>();
    case elem::u32: return f.template operator()<std::uint32_t>();
    case elem::i8: return f.template operator()<std::int8_t>();
    case elem::i32: return f.template operator()<std::int32_t>();
  }
}

inline std::filesystem::path variable_file(const std::filesystem::path& dir, const variable_ref& v) {
  return dir / ("layer" + std::to_string(v.layer) + "_" + std::string(v.name) + ".npy");
}

}  // namespace npyd

// Writes e's values in C (row-major) order, whatever e's layout or strides.
template <class E>
void save_npy(const std::filesystem::path& path, const xt::xexpression<E>& e) {
  using V = typename E::value_type;
  const E& x = e.derived_cast();
  const std::vector<std::size_t> shape(x.shape().begin(), x.shape().end());
  const std::size_t n = std::size_t(x.size());
  io::write_file_atomically(path, npyd::npy_bytes<V>(shape, n, [&](char* out) {
                              std::size_t k = 0;
                              for (auto it = x.template begin<xt::layout_type::row_major>();
                                   it != x.template end<xt::layout_type::row_major>(); ++it, ++k) {
                                const V v = *it;
                                std::memcpy(out + k * sizeof(V), &v, sizeof(V));
                              }
                            }, path, "save_npy"));
}

// How load_npy treats a file of another dtype: strict (the default) refuses it; allow
// converts its values to the type asked for, refusing a value that type cannot hold.
enum class npy_convert { strict, allow };

template <class T, std::size_t R>
xt::xtensor<T, R> load_npy(const std::filesystem::path& path, npy_convert mode = npy_convert::strict) {
  const auto f = npyd::read(path, "load_npy");
  const bool convert = mode == npy_convert::allow && f.descr != npyd::descr_of<T>();
  if constexpr (!std::is_arithmetic_v<T> || std::is_same_v<T, bool>) {
    if (convert) throw io_error("load_npy", path, "converts to integer, float32 and float64 values only");
  }
  if (!convert) npyd::check_dtype(f, npyd::descr_of<T>(), path, "load_npy");
  if (f.shape.size() != R)
    throw io_error("load_npy", path,
                   "has shape " + npyd::dims_str(f.shape, f.shape.size()) + ", rank " + std::to_string(R) + " is wanted");
  std::array<std::size_t, R> sh{};
  std::copy(f.shape.begin(), f.shape.end(), sh.begin());
  auto out = xt::xtensor<T, R>::from_shape(sh);
  if constexpr (std::is_arithmetic_v<T> && !std::is_same_v<T, bool>) {
    if (convert) {
      npyd::convert_values(f, out.data(), path, "load_npy");
      return out;
    }
  }
  npyd::copy_values(f, out.data());
  return out;
}

// A batch of inputs for model type M: shape (n, M's input shape...), M's value type.
template <Model M>
xt::xtensor<xtd::value_t<M>, xtd::in_shape_t<M>::rank + 1> load_inputs_npy(const std::filesystem::path& path,
                                                                             npy_convert mode = npy_convert::strict) {
  using I = xtd::in_shape_t<M>;
  using T = xtd::value_t<M>;
  const auto f = npyd::read(path, "load_inputs_npy");
  const bool convert = mode == npy_convert::allow && f.descr != npyd::descr_of<T>();
  if constexpr (!std::is_arithmetic_v<T>) {
    if (convert) throw io_error("load_inputs_npy", path, "converts to float32 and float64 models only");
  }
  if (!convert) npyd::check_dtype(f, npyd::descr_of<T>(), path, "load_inputs_npy");
  std::size_t n = 0;
  try {
    n = xtd::check_shape<I, 1>("load_inputs_npy", f.shape);
  } catch (const std::invalid_argument& e) {
    throw io_error(std::string(e.what()), path);
  }
  auto out = xtd::batch_tensor<T, I>(n);
  if constexpr (std::is_arithmetic_v<T>) {
    if (convert) {
      npyd::convert_values(f, out.data(), path, "load_inputs_npy");
      return out;
    }
  }
  npyd::copy_values(f, out.data());
  return out;
}

// Every variable of m as dir/layer<i>_<name>.npy (dir is created if missing).
template <Model M>
void save_variables_npy(const M& m, const std::filesystem::path& dir) {
  using MM = std::remove_cvref_t<M>;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw io_error("save_variables_npy", dir, "cannot create the directory (" + ec.message() + ")");
  m.for_each_variable([&](const variable_ref& v) {
    npyd::with_element_type<MM>(v, [&]<class V>() {
      const std::vector<std::size_t> sh(v.dims.begin(), v.dims.begin() + v.rank);
      io::write_file_atomically(npyd::variable_file(dir, v), npyd::npy_bytes<V>(sh, v.extent, [&](char* out) {
                                  std::memcpy(out, v.data, v.extent * sizeof(V));
                                }, dir, "save_variables_npy"));
    });
  });
}

// Reads dir/layer<i>_<name>.npy for every variable of m; checks each file's
// dtype and shape against the variable's, all before copying any.
template <Model M>
void load_variables_npy(M& m, const std::filesystem::path& dir) {
  using MM = std::remove_cvref_t<M>;
  std::vector<npyd::array> files;
  m.for_each_variable([&](const variable_ref& v) {
    const auto path = npyd::variable_file(dir, v);
    auto f = npyd::read(path, "load_variables_npy");
    npyd::with_element_type<MM>(v, [&]<class V>() { npyd::check_dtype(f, npyd::descr_of<V>(), path, "load_variables_npy"); });
    bool same = f.shape.size() == v.rank;
    for (std::size_t a = 0; same && a < v.rank; ++a) same = f.shape[a] == v.dims[a];
    if (!same)
      throw io_error("load_variables_npy", path,
                     "has shape " + npyd::dims_str(f.shape, f.shape.size()) + " but layer " + std::to_string(v.layer) +
                         "'s '" + std::string(v.name) + "' is " + npyd::dims_str(v.dims, v.rank));
    if (v.check) {  // an index a kernel reads (sparse layouts): checked as load_weights checks it
      std::vector<std::byte> values(f.count * f.item_size);
      npyd::copy_values(f, values.data());
      if (std::string why = v.check(v.name, values.data()); !why.empty())
        throw io_error("load_variables_npy", path, "layer " + std::to_string(v.layer) + "'s '" + std::string(v.name) + "': " + why);
    }
    files.push_back(std::move(f));
  });
  std::size_t i = 0;
  m.for_each_variable([&](const variable_ref& v) { npyd::copy_values(files[i++], v.data); });
}

}  // namespace ctnn
