// libFuzzer target: the .npy reader (ctnn/npy.hpp) on an arbitrary file: load_npy as float32, int64 and
// bool (whose bytes must be 0 or 1), the converting loads (npy_convert::allow) as float32, int32 and
// uint8 and load_inputs_npy converting, load_inputs_npy for a small model, and load_variables_npy with
// the file as one of the model's variables. Anything but an io_error (or success) is a bug; so is any
// sanitizer report or a run past -rss_limit_mb / -malloc_limit_mb.
#include <ctnn/layers/dense.hpp>
#include <ctnn/layers/reshape.hpp>
#include <ctnn/npy.hpp>

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

namespace {
using net = ctnn::sequential<ctnn::input<2, 3>, ctnn::flatten, ctnn::dense<2>>;
namespace fs = std::filesystem;

// A directory of this process's own, removed when it exits.
const fs::path& dir() {
  static const struct temp_dir {
    fs::path path = fs::temp_directory_path() / ("ctnn_fuzz_npy_" + std::to_string(::getpid()));
    temp_dir() { fs::create_directories(path); }
    ~temp_dir() {
      std::error_code ec;
      fs::remove_all(path, ec);
    }
  } d;
  return d.path;
}

// CTNN_FUZZ_WRITE_SEED=dir writes valid files of every kind the reader takes into dir.
void write_seeds(const fs::path& out) {
  fs::create_directories(out);
  ctnn::save_npy(out / "f4_2x3", xt::xtensor<float, 2>{{0.5f, 1, 2}, {3, 4, 5}});
  ctnn::save_npy(out / "f4_inputs_4x2x3", xt::xtensor<float, 3>(xt::ones<float>({4, 2, 3})));
  ctnn::save_npy(out / "i8_3", xt::xtensor<std::int64_t, 1>{-1, 0, 7});
  ctnn::save_npy(out / "b1_2x2", xt::xtensor<bool, 2>{{true, false}, {false, true}});
  ctnn::save_npy(out / "u1_0d", xt::xtensor<std::uint8_t, 0>(7));
  // what the converting loads take: uint8 images, int64 labels, float64 and float16 values
  ctnn::save_npy(out / "u1_images_3x2x3", xt::xtensor<std::uint8_t, 3>(xt::ones<std::uint8_t>({3, 2, 3}) * 200));
  ctnn::save_npy(out / "i8_labels_4", xt::xtensor<std::int64_t, 1>{0, 9, 3, 1});
  ctnn::save_npy(out / "f8_2x3", xt::xtensor<double, 2>{{0.25, -1, 1e300}, {2, 3, 4}});
  ctnn::save_npy(out / "f2_2", xt::xtensor<ctnn::float16_t, 1>{ctnn::float16_t(1.5f), ctnn::float16_t(-2.0f)});
  ctnn::save_npy(out / "f4_0x3", xt::xtensor<float, 2>::from_shape({0, 3}));  // no values
  const xt::xtensor<float, 2, xt::layout_type::column_major> cm{{0, 1, 2}, {3, 4, 5}};
  ctnn::save_npy(out / "f4_from_column_major", cm);
  // a Fortran-order file, version 3.0, keys out of order (as a hand-written or other writer's file may be)
  std::string dict = "{'shape': (2, 3), 'fortran_order': True, 'descr': '<f4'}";
  dict.append(64 - (12 + dict.size() + 1) % 64, ' ');
  dict += '\n';
  std::string f = std::string("\x93NUMPY\x03\x00", 8);
  for (int k = 0; k < 4; ++k) f += char((dict.size() >> (8 * k)) & 0xff);
  f += dict;
  const float v[6] = {0, 3, 1, 4, 2, 5};
  f.append(reinterpret_cast<const char*>(v), sizeof v);
  std::ofstream(out / "f4_fortran_v3", std::ios::binary) << f;
  auto m = ctnn::make_model<net>(1);
  ctnn::save_variables_npy(m, out / "variables");  // layer1_kernel.npy, layer1_bias.npy
  fs::rename(out / "variables" / "layer1_kernel.npy", out / "f4_kernel_6x2");
  fs::remove_all(out / "variables");
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const bool seeded = [] {
    if (const char* seed = std::getenv("CTNN_FUZZ_WRITE_SEED")) write_seeds(seed);
    return true;
  }();
  (void)seeded;
  static auto m = ctnn::make_model<net>(1);
  static const bool variables = [] {  // dir()/layer1_bias.npy stays valid; layer1_kernel.npy is the input
    ctnn::save_variables_npy(m, dir());
    return true;
  }();
  (void)variables;
  const fs::path file = dir() / "layer1_kernel.npy";
  std::ofstream(file, std::ios::binary).write(reinterpret_cast<const char*>(data), std::streamsize(size));
  try {
    (void)ctnn::load_npy<float, 2>(file);
  } catch (const ctnn::io_error&) {
  }
  try {
    (void)ctnn::load_npy<std::int64_t, 1>(file);
  } catch (const ctnn::io_error&) {
  }
  try {
    const auto b = ctnn::load_npy<bool, 2>(file);
    std::size_t n = 0;
    for (const bool x : b) n += x ? 1 : 0;  // every value is read as a bool (UBSan: 0 or 1)
    (void)n;
  } catch (const ctnn::io_error&) {
  }
  try {
    (void)ctnn::load_inputs_npy<decltype(m)>(file);
  } catch (const ctnn::io_error&) {
  }
  try {
    (void)ctnn::load_npy<float, 2>(file, ctnn::npy_convert::allow);
  } catch (const ctnn::io_error&) {
  }
  try {
    (void)ctnn::load_npy<std::int32_t, 1>(file, ctnn::npy_convert::allow);
  } catch (const ctnn::io_error&) {
  }
  try {
    (void)ctnn::load_npy<std::uint8_t, 3>(file, ctnn::npy_convert::allow);
  } catch (const ctnn::io_error&) {
  }
  try {
    (void)ctnn::load_inputs_npy<decltype(m)>(file, ctnn::npy_convert::allow);
  } catch (const ctnn::io_error&) {
  }
  try {
    ctnn::load_variables_npy(m, dir());
  } catch (const ctnn::io_error&) {
  }
  return 0;
}
