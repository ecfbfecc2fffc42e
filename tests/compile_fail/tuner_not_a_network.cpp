// A type that is not a network in a tuner's architecture list, used through
// tuner::search: the first error names the tuner and the list position (2)
// under g++ 12 and clang 19, not make_model's overload failure.
// first-error: tuner: architecture 2 (not_a_net) of architectures<...> is not a network
#include <ctnn/ctnn.hpp>
#include <ctnn/tuning/tuner.hpp>

#include <cstdint>
#include <vector>

namespace tn = ctnn::tuning;
using small = ctnn::sequential<ctnn::input<4>, ctnn::dense<8, ctnn::relu>, ctnn::dense<2>>;
struct not_a_net {};

int main() {
  std::vector<float> x(64 * 4, 0.5f);
  std::vector<std::int32_t> y(64, 1);
  const ctnn::data::in_memory<ctnn::shape<4>, ctnn::sparse_labels> data{x, y};
  tn::search_space space;
  space.real("learning_rate", 1e-3, 1e-1);
  tn::tuner<tn::architectures<small, not_a_net>, tn::optimizers<ctnn::adam<>>> t(
      space, std::make_unique<tn::random_search>(2), tn::tuner_options{});
  t.search(ctnn::sparse_categorical_crossentropy{.from_logits = true}, data.batch(16), data.batch(64), 1);
}
