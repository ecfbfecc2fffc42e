// libFuzzer target: load_weights from an arbitrary file into a small network with parameters and state
// (dense, batch_norm, dropout). A bad file must throw weights_error (or io_error); anything else is a bug.
#include <ctnn/ctnn.hpp>

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

namespace {
using net = ctnn::sequential<ctnn::input<3>, ctnn::dense<4, ctnn::relu>, ctnn::batch_norm, ctnn::dropout<0.25f>,
                             ctnn::dense<2>>;
const std::filesystem::path& file() {
  static const std::filesystem::path p =
      std::filesystem::temp_directory_path() / ("ctnn_fuzz_weights_" + std::to_string(::getpid()) + ".ctnn");
  return p;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  // CTNN_FUZZ_WRITE_SEED=path writes a valid file for the seed corpus instead of fuzzing.
  static const bool seeded = [] {
    if (const char* seed = std::getenv("CTNN_FUZZ_WRITE_SEED")) {
      auto m = ctnn::make_model<net>(7);
      ctnn::io::save_weights(m, seed);
    }
    return true;
  }();
  (void)seeded;
  std::ofstream(file(), std::ios::binary).write(reinterpret_cast<const char*>(data), std::streamsize(size));
  static auto m = ctnn::make_model<net>(1);
  try {
    ctnn::io::load_weights(m, file());
  } catch (const ctnn::io::weights_error&) {
  } catch (const ctnn::io_error&) {
  }
  return 0;
}
