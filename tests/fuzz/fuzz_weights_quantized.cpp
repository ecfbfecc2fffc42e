// libFuzzer target: load_weights from an arbitrary file into int8 networks (quantized_dense and
// quantized_conv2d, full integer and dynamic range: int8 and int32 tensors, docs/quantization.md; quantized_dense_block:
// the block-sparse groups and their index). A bad file must throw weights_error (or io_error); anything else is a bug.
// The seeds: valid files of each, one with a weight of -128 and one whose kernel_sum does not match its kernel, one
// block-sparse file whose index names an input past K, one whose second block layer's input zero point is not the
// first one's output zero point (the two chained: int8 between them) (all four refused by load_weights).
#include <ctnn/ctnn.hpp>
#include <ctnn/pruning.hpp>
#include <ctnn/quantization/convert.hpp>

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <filesystem>
#include <fstream>
#include <string>

namespace {
using net = ctnn::sequential<ctnn::input<6>, ctnn::dense<5, ctnn::relu>, ctnn::dropout<0.25f>, ctnn::dense<3>>;
using full = ctnn::quantized_t<net>;
using dynamic = ctnn::quantized_t<net, ctnn::quantization::dynamic_range>;
using cnn = ctnn::sequential<ctnn::input<4, 4, 2>, ctnn::conv2d<3, 3, 3, 2, ctnn::padding::same, ctnn::relu>,
                             ctnn::flatten, ctnn::dense<2>>;
using full_cnn = ctnn::quantized_t<cnn>;
using block = ctnn::sequential<ctnn::input<8>, ctnn::sparse_dense_block<8, 16, 48, 1, 16, ctnn::relu>,
                               ctnn::sparse_dense_block<16, 4, 32, 4, 4>>;
using full_block = ctnn::quantized_t<block>;
const std::filesystem::path& file() {
  static const std::filesystem::path p =
      std::filesystem::temp_directory_path() / ("ctnn_fuzz_weights_quantized_" + std::to_string(::getpid()) + ".ctnn");
  return p;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  // CTNN_FUZZ_WRITE_SEED=path writes valid files for the seed corpus (path_full, path_dynamic) instead of fuzzing.
  static const bool seeded = [] {
    if (const char* seed = std::getenv("CTNN_FUZZ_WRITE_SEED")) {
      auto m = ctnn::make_model<net>(7);
      const float x[12] = {0.5f, -1.0f, 0.25f, 2.0f, -0.75f, 1.5f, -0.5f, 1.0f, 0.0f, 0.3f, -2.0f, 0.9f};
      ctnn::io::save_weights(ctnn::quantize_full_integer(m, x, 2), std::string(seed) + "_full");
      ctnn::io::save_weights(ctnn::quantize_dynamic(m), std::string(seed) + "_dynamic");
      auto c = ctnn::make_model<cnn>(7);
      float images[2 * 32];
      for (int i = 0; i < 64; ++i) images[i] = float((i * 37) % 11) / 5.0f - 1.0f;
      ctnn::io::save_weights(ctnn::quantize_full_integer(c, images, 2), std::string(seed) + "_cnn");
      // files load_weights refuses: a weight of -128, a kernel_sum that does not match the kernel
      auto poke = [&](const char* name, auto change, const char* suffix) {
        auto q = ctnn::quantize_full_integer(m, x, 2);
        q.for_each_variable([&](const ctnn::variable_ref& v) {
          if (v.layer == 0 && v.name == name) change(v.data);
        });
        ctnn::io::save_weights(q, std::string(seed) + suffix);
      };
      poke("kernel", [](std::byte* p) { p[1] = std::byte(0x80); }, "_weight_minus_128");
      poke("kernel_sum", [](std::byte* p) { p[0] = std::byte(std::uint8_t(p[0]) ^ 1u); }, "_kernel_sum_mismatch");
      auto b = ctnn::quantize_full_integer(ctnn::make_model<block>(7), x, 1);
      ctnn::io::save_weights(b, std::string(seed) + "_block");
      b.for_each_variable([&](const ctnn::variable_ref& v) {
        if (v.layer == 0 && v.name == "index") v.data[8] = std::byte(9);  // group 0's first input: 9 >= K = 8
      });
      ctnn::io::save_weights(b, std::string(seed) + "_block_input_past_k");
      // refused by the chained full_block (its layer 2 reads layer 1's int8 output): layer 2's
      // input zero point is not layer 1's output one
      auto bc = ctnn::quantize_full_integer(ctnn::make_model<block>(7), x, 1);
      bc.for_each_variable([&](const ctnn::variable_ref& v) {
        if (v.layer == 1 && v.name == "input_zero_point") v.data[0] = std::byte(std::uint8_t(v.data[0]) ^ 1u);
      });
      ctnn::io::save_weights(bc, std::string(seed) + "_block_chain_mismatch");
    }
    return true;
  }();
  (void)seeded;
  std::ofstream(file(), std::ios::binary).write(reinterpret_cast<const char*>(data), std::streamsize(size));
  static auto f = ctnn::make_model<full>(1);
  static auto d = ctnn::make_model<dynamic>(1);
  static const float x[3 * 6] = {0.5f, -1.0f, 0.25f, 2.0f, -0.75f, 1.5f, -0.5f, 1.0f, 0.0f,
                                 0.3f, -2.0f, 0.9f, 9.0f, -9.0f, 0.1f, 0.0f, 1e30f, -1e30f};
  try {
    ctnn::io::load_weights(f, file());
    try {
      (void)f.predict(x, 3);  // a loaded file runs without undefined behaviour (UBSan)
    } catch (const std::invalid_argument&) {  // a multiplier outside its range: refused by name
    }
  } catch (const ctnn::io::weights_error&) {
  } catch (const ctnn::io_error&) {
  }
  try {
    ctnn::io::load_weights(d, file());
    (void)d.predict(x, 3);
  } catch (const ctnn::io::weights_error&) {
  } catch (const ctnn::io_error&) {
  }
  static auto c = ctnn::make_model<full_cnn>(1);
  static const float image[32] = {0.5f, -1.0f, 0.25f, 2.0f, -0.75f, 1.5f, -0.5f, 1.0f, 0.0f,  0.3f,  -2.0f,
                                  0.9f, 9.0f,  -9.0f, 0.1f, 0.0f,   1e30f, -1e30f, 0.7f, -0.2f, 1.1f, 0.4f,
                                  0.0f, -0.6f, 3.0f,  0.8f, -1.4f,  0.2f,  0.6f,  -0.9f, 0.05f, 1.9f};
  try {
    ctnn::io::load_weights(c, file());
    try {
      (void)c.predict(image, 1);
    } catch (const std::invalid_argument&) {  // a multiplier or zero point outside its range: refused by name
    }
  } catch (const ctnn::io::weights_error&) {
  } catch (const ctnn::io_error&) {
  }
  static auto bl = ctnn::make_model<full_block>(1);
  try {
    ctnn::io::load_weights(bl, file());
    try {
      (void)bl.predict(x, 2);  // 2 rows of 8 of x's 18 values
    } catch (const std::invalid_argument&) {  // a multiplier outside its range: refused by name
    }
  } catch (const ctnn::io::weights_error&) {
  } catch (const ctnn::io_error&) {
  }
  return 0;
}
