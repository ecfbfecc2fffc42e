// A tuner's optimizer list holds optimizer types only.
// expect: tuning::optimizers: every type must satisfy ctnn::Optimizer
// first-error: tuning::optimizers: type 2 (double) is not an optimizer (ctnn::Optimizer: adam<>, sgd<>, ...)
#include <ctnn/optimizers/adam.hpp>
#include <ctnn/tuning/tuner.hpp>
using opts = ctnn::tuning::optimizers<ctnn::adam<>, double>;
constexpr auto n = opts::size;
