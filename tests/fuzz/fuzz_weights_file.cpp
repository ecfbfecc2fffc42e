// libFuzzer target: read_weights_file (io/weights.hpp), the type-free reader ctnn-inspect uses, on an
// arbitrary file; every tensor's values of an accepted file are read as ctnn-inspect reads them (each
// must lie within the file). A bad file must throw weights_error (or io_error); anything else is a bug.
#include <ctnn/ctnn.hpp>

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace {
using net = ctnn::sequential<ctnn::input<3>, ctnn::dense<4, ctnn::relu>, ctnn::batch_norm, ctnn::dropout<0.25f>,
                             ctnn::dense<2>>;
const std::filesystem::path& file() {
  static const std::filesystem::path p =
      std::filesystem::temp_directory_path() / ("ctnn_fuzz_weights_file_" + std::to_string(::getpid()) + ".ctnn");
  return p;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  // CTNN_FUZZ_WRITE_SEED=path writes a valid file for the seed corpus instead of fuzzing.
  static const bool seeded = [] {
    if (const char* seed = std::getenv("CTNN_FUZZ_WRITE_SEED")) ctnn::io::save_weights(ctnn::make_model<net>(7), seed);
    return true;
  }();
  (void)seeded;
  std::ofstream(file(), std::ios::binary).write(reinterpret_cast<const char*>(data), std::streamsize(size));
  try {
    const ctnn::io::weights_file f = ctnn::io::read_weights_file(file());
    double sum = 0;
    for (const auto& t : f.tensors) {
      if (t.offset + t.bytes > f.data.size() - 4) std::abort();  // a tensor past the values
      for (std::size_t i = 0; i < t.elements; ++i) sum += t.value(i, f.data);
    }
    static volatile double sink;
    sink = sum;
  } catch (const ctnn::io::weights_error&) {
  } catch (const ctnn::io_error&) {
  }
  return 0;
}
