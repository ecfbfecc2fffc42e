// libFuzzer target: load_optimizer_state from an arbitrary file into a small trained model with
// Adam's slots (train/optimizer_state_file.hpp). A bad file must throw weights_error (or
// io_error) and leave the model's slots and counts as they were; anything else is a bug.
#include <ctnn/ctnn.hpp>
#include <ctnn/train/optimizer_state_file.hpp>

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace {
using net = ctnn::sequential<ctnn::input<3>, ctnn::dense<4, ctnn::relu>, ctnn::dense<2>>;
const std::filesystem::path& file() {
  static const std::filesystem::path p =
      std::filesystem::temp_directory_path() / ("ctnn_fuzz_optimizer_state_" + std::to_string(::getpid()) + ".ctnn");
  return p;
}
// A model trained one step with adam, so that it holds slots and counts.
ctnn::model<net> trained(std::uint64_t seed) {
  auto m = ctnn::make_model<net>(seed);
  ctnn::adam opt{0.01};
  const ctnn::data::in_memory<ctnn::shape<3>, ctnn::dense_targets<ctnn::shape<2>>> d({1, 2, 3, -1, 0, 1}, {1, 0, 0, 1});
  ctnn::fit(m, ctnn::mean_squared_error{}, opt, d.batch(2), ctnn::epochs{1});
  return m;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  // CTNN_FUZZ_WRITE_SEED=path writes a valid file for the seed corpus instead of fuzzing.
  static const bool seeded = [] {
    if (const char* seed = std::getenv("CTNN_FUZZ_WRITE_SEED")) ctnn::io::save_optimizer_state(trained(7), ctnn::adam{0.01}, seed);
    return true;
  }();
  (void)seeded;
  std::ofstream(file(), std::ios::binary).write(reinterpret_cast<const char*>(data), std::streamsize(size));
  static auto m = trained(1);
  static std::vector<float> before(m.optimizer_slots().begin(), m.optimizer_slots().end());
  static auto iterations = m.optimizer_state().iterations;
  try {
    ctnn::io::load_optimizer_state(m, ctnn::adam{0.01}, file());
    before.assign(m.optimizer_slots().begin(), m.optimizer_slots().end());  // a valid file: m took it
    iterations = m.optimizer_state().iterations;
    return 0;
  } catch (const ctnn::io::weights_error&) {
  } catch (const ctnn::io_error&) {
  }
  if (m.optimizer_state().iterations != iterations ||
      !std::equal(before.begin(), before.end(), m.optimizer_slots().begin()))
    std::abort();  // a refused file changed the model
  return 0;
}
