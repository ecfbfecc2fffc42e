// libFuzzer target: read_model_file (train/model_file.hpp), the type-free reader ctnn-inspect uses,
// and load_model into a small trained model with Adam's slots, on an arbitrary file. An accepted
// file's tensors must lie within its weights section; a refused file must throw weights_error (or
// io_error) and leave the model's weights, slots and counts as they were; anything else is a bug.
#include <ctnn/ctnn.hpp>
#include <ctnn/train/model_file.hpp>

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace {
using net = ctnn::sequential<ctnn::input<3>, ctnn::dense<4, ctnn::relu>, ctnn::batch_norm, ctnn::dense<2>>;
const std::filesystem::path& file() {
  static const std::filesystem::path p =
      std::filesystem::temp_directory_path() / ("ctnn_fuzz_model_file_" + std::to_string(::getpid()) + ".ctnn-model");
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
  // CTNN_FUZZ_WRITE_SEED=path writes a valid file for the seed corpus instead of fuzzing (and
  // path + ".plain": one saved without the optimizer).
  static const bool seeded = [] {
    if (const char* seed = std::getenv("CTNN_FUZZ_WRITE_SEED")) {
      const auto m = trained(7);
      ctnn::io::save_model(m, ctnn::adam{0.01}, seed, {.loss = "mean_squared_error", .metrics = {"mae"}});
      ctnn::io::save_model(m, std::string(seed) + ".plain");
    }
    return true;
  }();
  (void)seeded;
  std::ofstream(file(), std::ios::binary).write(reinterpret_cast<const char*>(data), std::streamsize(size));
  try {
    const ctnn::io::model_file f = ctnn::io::read_model_file(file());
    double sum = 0;
    for (const auto& t : f.weights.tensors) {
      if (t.offset + t.bytes > f.weights.data.size() - 4) std::abort();  // a tensor past the values
      for (std::size_t i = 0; i < t.elements; ++i) sum += t.value(i, f.weights.data);
    }
    static volatile double sink;
    sink = sum;
  } catch (const ctnn::io::weights_error&) {
  } catch (const ctnn::io_error&) {
  }
  static auto m = trained(1);
  static std::vector<float> weights(m.parameters().begin(), m.parameters().end());
  static std::vector<float> slots(m.optimizer_slots().begin(), m.optimizer_slots().end());
  static auto iterations = m.optimizer_state().iterations;
  try {
    ctnn::io::load_model(m, ctnn::adam{0.01}, file());
    weights.assign(m.parameters().begin(), m.parameters().end());  // a valid file: m took it
    slots.assign(m.optimizer_slots().begin(), m.optimizer_slots().end());
    iterations = m.optimizer_state().iterations;
    return 0;
  } catch (const ctnn::io::weights_error&) {
  } catch (const ctnn::io_error&) {
  }
  // bytes, not values: a loaded file may hold NaN weights (copied bit for bit)
  if (m.optimizer_state().iterations != iterations ||
      std::memcmp(weights.data(), m.parameters().data(), weights.size() * sizeof(float)) != 0 ||
      std::memcmp(slots.data(), m.optimizer_slots().data(), slots.size() * sizeof(float)) != 0)
    std::abort();  // a refused file changed the model
  return 0;
}
