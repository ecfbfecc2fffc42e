// libFuzzer target: an arbitrary file where a pipeline's cache(path) expects its cache, for samples and for
// batches. A corrupt file must throw pipeline_error (or io_error); anything else is a bug.
#include <ctnn/core/errors.hpp>
#include <ctnn/data/pipeline.hpp>

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace {
const std::filesystem::path& file() {
  static const std::filesystem::path p =
      std::filesystem::temp_directory_path() / ("ctnn_fuzz_cache_" + std::to_string(::getpid()) + ".cache");
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
  // The upstream is never read when the file exists; it only fixes the element type.
  const auto source = ctnn::data::from_tensors<ctnn::shape<3>>(std::vector<float>(6), std::vector<int>(2));
  try {
    drain(source.cache(file()));
  } catch (const ctnn::data::pipeline_error&) {
  } catch (const ctnn::io_error&) {
  }
  try {
    drain(source.batch(2).cache(file()));
  } catch (const ctnn::data::pipeline_error&) {
  } catch (const ctnn::io_error&) {
  }
  return 0;
}
