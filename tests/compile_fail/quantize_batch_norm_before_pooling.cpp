// A batch_norm before a max pooling (no dense or conv2d layer next to fold it into: a negative gamma
// does not commute with the max) is refused by quantize_model, naming the batch_norm's position.
// first-error: layer 2 (batch_norm): cannot be folded for int8
#include <ctnn/ctnn.hpp>
#include <ctnn/quantization/qat.hpp>
using net = ctnn::sequential<ctnn::input<8, 8, 1>, ctnn::conv2d<4, 3, 3, 1, ctnn::padding::valid, ctnn::relu>,
                             ctnn::batch_norm, ctnn::max_pool2d<2>, ctnn::flatten, ctnn::dense<2>>;
int main() {
  auto m = ctnn::make_model<net>(1);
  auto q = ctnn::quantize_model(m);
}
