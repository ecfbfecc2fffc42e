// Frame for documentation blocks that build datasets from vectors: `features`
// (4 values per sample), `labels` (one class per sample) and `targets` (3
// values per sample), for 2 samples.
#include <ctnn/ctnn.hpp>

#include <cstdint>
#include <vector>

int main() {
  std::vector<float> features(2 * 4), targets(2 * 3);
  std::vector<std::int32_t> labels{0, 1};
// @snippet@
}
