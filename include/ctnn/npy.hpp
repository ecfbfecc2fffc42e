// ctnn/npy.hpp — .npy files (NumPy's format) for inputs, outputs and variables, through xtensor's xnpy.
//
//   save_npy(path, e)                any xtensor expression to path (written to a
//                                    temporary and renamed: io/atomic_file.hpp)
//   load_npy<T, R>(path)             xt::xtensor<T, R>
//   load_inputs_npy<M>(path)         a batch for model type M: (n, input shape...) of its
//                                    value type, ready for predict / evaluate
//   save_variables_npy(m, dir)       every parameter, state, mask and metadata buffer of m
//                                    as dir/layer<i>_<name>.npy (i counted from 0, as in
//                                    variable<i, "name">), with its declared shape and dtype
//   load_variables_npy(m, dir)       reads them all back; every file is read and checked
//                                    before anything is copied into m
// The format work is xt::dump_npy and xtensor's npy reader; this header only
// checks what they return: the file's dtype (np.float32 is '<f4') must be the
// requested one (no silent conversion), C order, the shape the one wanted, and
// the file no shorter than its header says. Every failure is a ctnn::io_error
// "<function>: <path>: <what is wrong>".
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include <xtensor/xnpy.hpp>

#include "core/errors.hpp"
#include "io/atomic_file.hpp"
#include "io/read_file.hpp"
#include "xtensor.hpp"

namespace ctnn {

namespace npyd {

inline std::string dtype_name(const std::string& typestring) {
  if (typestring.size() < 3) return "'" + typestring + "'";
  const char k = typestring[1];
  const std::string bits = std::to_string(std::atoi(typestring.c_str() + 2) * 8);
  const std::string kind = k == 'f' ? "float" : k == 'i' ? "int" : k == 'u' ? "uint" : k == 'b' ? "bool" : "";
  return (kind.empty() ? std::string("'") : kind + bits + " ('") + typestring + (kind.empty() ? "'" : "')");
}

// The file's header and values, read by xtensor's reader.
inline xt::detail::npy_file read(const std::filesystem::path& path, const char* who) {
  const std::string bytes = io::read_file(path, who);
  // The header first, by xtensor's own parser: a corrupt header announcing a huge
  // shape is refused here, before xtensor's reader would allocate for it.
  try {
    std::istringstream head(bytes);
    unsigned char major = 0, minor = 0;
    xt::detail::read_magic(head, &major, &minor);
    std::string header;
    if (major == 1 && minor == 0) header = xt::detail::read_header_1_0(head);
    else if (major == 2 && minor == 0) header = xt::detail::read_header_2_0(head);
    else throw std::runtime_error("unsupported file format version");
    std::string typestr;
    bool fortran = false;
    std::vector<std::size_t> shape;
    xt::detail::parse_header(header, typestr, &fortran, shape);
    const auto start = head.tellg();
    if (!head || start < 0) throw std::runtime_error("the header is cut short");
    const std::size_t available = bytes.size() - static_cast<std::size_t>(start);
    std::size_t announced = typestr.size() > 2 ? static_cast<std::size_t>(std::atoi(typestr.c_str() + 2)) : 1;
    for (const std::size_t d : shape) {
      if (d != 0 && announced > available / d) {
        announced = available + 1;  // more than the file holds (and no overflow)
        break;
      }
      announced *= d;
    }
    if (announced > available)
      throw io_error(who, path, "truncated: the header announces more values than the file holds");
  } catch (const io_error&) {
    throw;
  } catch (const std::exception& e) {
    throw io_error(who, path, std::string("not a valid .npy file (") + e.what() + ")");
  }
  std::istringstream in(bytes);
  auto f = [&] {
    try {
      return xt::detail::load_npy_file(in);
    } catch (const std::exception& e) {
      throw io_error(who, path, std::string("not a valid .npy file (") + e.what() + ")");
    }
  }();
  if (in.fail()) throw io_error(who, path, "truncated: the header announces more values than the file holds");
  if (f.m_fortran_order) throw io_error(who, path, "the values are in Fortran order; ctnn reads C (row-major) order");
  return f;
}

template <class T>
void check_dtype(const xt::detail::npy_file& f, const std::filesystem::path& path, const char* who) {
  const std::string want = xt::detail::build_typestring<T>();
  if (f.m_typestring != want)
    throw io_error(who, path,
                   "holds " + dtype_name(f.m_typestring) + " values, " + dtype_name(want) + " are wanted");
}

template <class Dims>
std::string dims_str(const Dims& d, std::size_t rank) {
  std::string r = "(";
  for (std::size_t i = 0; i < rank; ++i) r += (i ? ", " : "") + std::to_string(d[i]);
  return r + (rank == 1 ? ",)" : ")");
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
  }
}

inline std::filesystem::path variable_file(const std::filesystem::path& dir, const variable_ref& v) {
  return dir / ("layer" + std::to_string(v.layer) + "_" + std::string(v.name) + ".npy");
}

}  // namespace npyd

template <class E>
void save_npy(const std::filesystem::path& path, const xt::xexpression<E>& e) {
  io::write_file_atomically(path, xt::dump_npy(e));
}

template <class T, std::size_t R>
xt::xtensor<T, R> load_npy(const std::filesystem::path& path) {
  auto f = npyd::read(path, "load_npy");
  npyd::check_dtype<T>(f, path, "load_npy");
  if (f.m_shape.size() != R)
    throw io_error("load_npy", path,
                   "has shape " + npyd::dims_str(f.m_shape, f.m_shape.size()) + ", rank " + std::to_string(R) +
                       " is wanted");
  return std::move(f).cast<T, xt::layout_type::row_major>();
}

// A batch of inputs for model type M: shape (n, M's input shape...), M's value type.
template <Model M>
xt::xtensor<xtd::value_t<M>, xtd::in_shape_t<M>::rank + 1> load_inputs_npy(const std::filesystem::path& path) {
  using I = xtd::in_shape_t<M>;
  auto f = npyd::read(path, "load_inputs_npy");
  npyd::check_dtype<xtd::value_t<M>>(f, path, "load_inputs_npy");
  try {
    xtd::check_shape<I, 1>("load_inputs_npy", f.m_shape);
  } catch (const std::invalid_argument& e) {
    throw io_error(std::string(e.what()), path);
  }
  return std::move(f).cast<xtd::value_t<M>, xt::layout_type::row_major>();
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
      const auto a = xt::adapt(reinterpret_cast<const V*>(v.data), v.extent, xt::no_ownership(), sh);
      io::write_file_atomically(npyd::variable_file(dir, v), xt::dump_npy(a));
    });
  });
}

// Reads dir/layer<i>_<name>.npy for every variable of m; checks each file's
// dtype and shape against the variable's, all before copying any.
template <Model M>
void load_variables_npy(M& m, const std::filesystem::path& dir) {
  using MM = std::remove_cvref_t<M>;
  std::vector<xt::detail::npy_file> files;
  m.for_each_variable([&](const variable_ref& v) {
    const auto path = npyd::variable_file(dir, v);
    auto f = npyd::read(path, "load_variables_npy");
    npyd::with_element_type<MM>(v, [&]<class V>() { npyd::check_dtype<V>(f, path, "load_variables_npy"); });
    bool same = f.m_shape.size() == v.rank;
    for (std::size_t a = 0; same && a < v.rank; ++a) same = f.m_shape[a] == v.dims[a];
    if (!same)
      throw io_error("load_variables_npy", path,
                     "has shape " + npyd::dims_str(f.m_shape, f.m_shape.size()) + " but layer " +
                         std::to_string(v.layer) + "'s '" + std::string(v.name) + "' is " +
                         npyd::dims_str(v.dims, v.rank));
    files.push_back(std::move(f));
  });
  std::size_t i = 0;
  m.for_each_variable([&](const variable_ref& v) {
    std::memcpy(v.data, files[i++].ptr(), v.extent * v.element_bytes);
  });
}

}  // namespace ctnn
