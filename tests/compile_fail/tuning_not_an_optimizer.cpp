// A tuner's optimizer list holds optimizer types only.
// expect: tuning::optimizers: every type must satisfy ctnn::Optimizer
#include <ctnn/optimizers/adam.hpp>
#include <ctnn/tuning/tuner.hpp>
using opts = ctnn::tuning::optimizers<ctnn::adam<>, double>;
constexpr auto n = opts::size;
