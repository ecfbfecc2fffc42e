// An int8 max pooling (quantization::int8_pass, which quantized_t places only between two
// full-integer layers) reads int8 values: here nothing writes them (the model's float input).
// first-error: sequential: a layer writing int8 values (quantization::int8_io) must be followed by one reading them
#include <ctnn/ctnn.hpp>
#include <ctnn/layers/int8_pass.hpp>
using net = ctnn::sequential<ctnn::input<4, 4, 2>, ctnn::quantization::int8_pass<ctnn::max_pool2d<2>>, ctnn::flatten,
                             ctnn::dense<3>>;
constexpr auto bytes = net::memory_plan(1).activations;
