// libFuzzer target: load_weights from an arbitrary file into one network under mixed_float16,
// mixed_bfloat16 (float32 variables, 16-bit compute copies) and float16 (16-bit variables: a
// float32 or bfloat16 file is converted on load), then predict a small batch with each model
// that accepted it. A bad file must throw weights_error (or io_error); anything else is a bug.
#include <ctnn/mixed_precision.hpp>

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

namespace {
using net = ctnn::sequential<ctnn::input<6>, ctnn::dense<8, ctnn::relu>, ctnn::dense<3>>;
using bf16 = ctnn::precision::policy<ctnn::bfloat16_t>;

const std::filesystem::path& file() {
  static const std::filesystem::path p =
      std::filesystem::temp_directory_path() / ("ctnn_fuzz_weights_mixed_" + std::to_string(::getpid()) + ".ctnn");
  return p;
}

template <class P>
void load_and_predict() {
  static auto m = ctnn::make_model<net, P>(1);
  try {
    ctnn::io::load_weights(m, file());
  } catch (const ctnn::io::weights_error&) {
    return;
  } catch (const ctnn::io_error&) {
    return;
  }
  static const std::vector<float> x = [] {
    std::vector<float> v(5 * net::input_type::size);
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = float(int(i % 7) - 3) / 4.0f;
    return v;
  }();
  (void)m.predict(x.data(), 5, 5);
}

// The seeds: the file of a float32 (= mixed) model, of a float16 and of a bfloat16 model, and
// float32 files a float16 model refuses (1e5 overflows float16; a NaN).
void write_seeds(const std::string& dir) {
  auto f32 = ctnn::make_model<net>(7);
  ctnn::io::save_weights(f32, dir + "/valid_float32");
  auto f16 = ctnn::make_model<net, ctnn::precision::float16>(7);
  ctnn::io::save_weights(f16, dir + "/valid_float16");
  auto b16 = ctnn::make_model<net, bf16>(7);
  ctnn::io::save_weights(b16, dir + "/valid_bfloat16");
  f32.parameters()[5] = 1e5f;
  ctnn::io::save_weights(f32, dir + "/regress_float32_overflows_float16");
  f32.parameters()[5] = std::numeric_limits<float>::quiet_NaN();
  ctnn::io::save_weights(f32, dir + "/regress_float32_nan");
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  // CTNN_FUZZ_WRITE_SEED=dir writes the seed corpus (valid_* and regress_*) into dir first.
  static const bool seeded = [] {
    if (const char* dir = std::getenv("CTNN_FUZZ_WRITE_SEED")) write_seeds(dir);
    return true;
  }();
  (void)seeded;
  std::ofstream(file(), std::ios::binary).write(reinterpret_cast<const char*>(data), std::streamsize(size));
  load_and_predict<ctnn::precision::mixed_float16>();
  load_and_predict<ctnn::precision::mixed_bfloat16>();
  load_and_predict<ctnn::precision::float16>();
  return 0;
}
