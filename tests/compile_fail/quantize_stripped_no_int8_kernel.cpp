// A layer stripped to a layout without an int8 kernel (here bitmap, never decoded:
// layout::undecoded<layout::bitmap>) is refused by quantize_full_integer, naming the layer, its
// layout and its size (only block<R, C> layers, decoded or not, become quantized_dense_block).
// first-error: layer 1 (undecoded<sparse_dense>, 784 x 32): quantize: this stripped layout has no int8 kernel
#include <ctnn/ctnn.hpp>
#include <ctnn/quantization/convert.hpp>

#include <vector>
using net = ctnn::sequential<ctnn::input<784>, ctnn::undecoded<ctnn::sparse_dense<784, 32, 5000, ctnn::relu>>,
                             ctnn::dense<10>>;
int main() {
  auto m = ctnn::make_model<net>(1);
  std::vector<float> x(784);
  auto q = ctnn::quantize_full_integer(m, x.data(), 1);
}
