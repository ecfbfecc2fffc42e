// Frame for documentation blocks that are members of a bound layer: a layer of
// K inputs and N outputs that declares its buffers (core/plan.hpp).
#include <ctnn/core/plan.hpp>

#include <array>
#include <cstddef>

using namespace ctnn;

struct example_layer {
  static constexpr std::size_t K = 784, N = 10;
// @snippet@
};
static_assert(example_layer::buffers[0].extent == 7840);

int main() {}
