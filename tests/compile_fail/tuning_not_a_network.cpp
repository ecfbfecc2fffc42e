// A tuner's architecture list holds network types only.
// expect: tuning::architectures: every type must be a network
// first-error: tuning::architectures: type 2 (ctnn::dense<3>) is not a network; give ctnn::sequential<input<...>, layers...>
#include <ctnn/layers/dense.hpp>
#include <ctnn/tuning/tuner.hpp>
using archs = ctnn::tuning::architectures<ctnn::sequential<ctnn::input<4>, ctnn::dense<2>>, ctnn::dense<3>>;
constexpr auto n = archs::size;
