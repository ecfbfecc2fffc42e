// libFuzzer target: read_idx on arbitrary bytes (plain or gzip), then the conversions fit's readers use.
// Anything but an idx_error (or success) is a bug; so is any sanitizer report or a run past -rss_limit_mb.
#include <ctnn/data/idx.hpp>

#include <cstddef>
#include <cstdint>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::vector<unsigned char> raw(data, data + size);
  try {
    if (raw.size() >= 2 && raw[0] == 0x1f && raw[1] == 0x8b) raw = ctnn::data::detail::gunzip(raw, "fuzz");
    const auto a = ctnn::data::parse_idx(raw, "fuzz");
    (void)a.as<float>(1.0 / 255);
    (void)a.as<std::int32_t>();
  } catch (const ctnn::data::idx_error&) {
  }
  return 0;
}
