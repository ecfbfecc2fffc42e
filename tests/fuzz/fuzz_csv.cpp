// libFuzzer target: from_csv on an arbitrary file (3 features + 1 sparse label, and 2 features + 2 dense targets).
// Anything but a csv_error (or success) is a bug.
#include <ctnn/data/csv.hpp>
#include <ctnn/data/pipeline.hpp>

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

namespace {
const std::filesystem::path& file() {
  static const std::filesystem::path p =
      std::filesystem::temp_directory_path() / ("ctnn_fuzz_csv_" + std::to_string(::getpid()) + ".csv");
  return p;
}
template <class D>
void drain(const D& d) {
  auto c = d.open(0);
  typename D::element_type e;
  while (c.next(e)) {
  }
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::ofstream(file(), std::ios::binary).write(reinterpret_cast<const char*>(data), std::streamsize(size));
  try {
    drain(ctnn::data::from_csv<ctnn::shape<3>>(file()));
  } catch (const ctnn::data::csv_error&) {
  }
  try {
    drain(ctnn::data::from_csv<ctnn::shape<2>, ctnn::dense_targets<ctnn::shape<2>>>(
        file(), {.header = true, .delimiter = ';', .targets = ctnn::data::column::last}));
  } catch (const ctnn::data::csv_error&) {
  }
  return 0;
}
