// with_options<O> wraps only an optimizer: the missing piece is named.
// expect: Optimizer
// expect: has_slots
// first-error-gcc: requires  Optimizer<O, float> struct ctnn::with_options
// first-error-clang: constraints not satisfied for class template 'with_options' [with O = not_an_optimizer]
#include <ctnn/optimizers/options.hpp>
struct not_an_optimizer {};
ctnn::with_options<not_an_optimizer>* p = nullptr;
