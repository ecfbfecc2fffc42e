// with_options<O> wraps only an optimizer: the missing piece is named.
// expect: Optimizer
// expect: has_slots
#include <ctnn/optimizers/options.hpp>
struct not_an_optimizer {};
ctnn::with_options<not_an_optimizer>* p = nullptr;
