// A full-integer layer writing int8 values (int8_io<..., true>) must be followed by one reading them
// (quantized_t sets both); here it is the last layer, whose output the model reads as float.
// first-error: sequential: a layer writing int8 values (quantization::int8_io) must be followed by one reading them
#include <ctnn/layers/quantized_dense.hpp>
#include <ctnn/ctnn.hpp>
using fi = ctnn::quantization::full_integer;
using net = ctnn::sequential<ctnn::input<8>, ctnn::quantized_dense<8, 4, ctnn::relu, fi>,
                             ctnn::quantized_dense<4, 2, ctnn::identity, fi, ctnn::quantization::int8_io<false, true>>>;
constexpr auto bytes = net::memory_plan(1).activations;
