// A program that trains a network (fused: its widest layer 64) with a metric and evaluates it, runs a
// training step of a small CNN (a direct first convolution, max pooling, batch normalization, a Winograd
// convolution, dropout at a constant and at a run-time rate), prints both networks' summaries (dropout's
// name), reads a batch of the Fashion-MNIST dataset type, reads an IDX file and a weights file
// (compiled_kernels_tu.cmake reads its object's symbols; it is compiled, not run).
#include <ctnn/ctnn.hpp>

#include <cstdint>
#include <vector>

using net = ctnn::sequential<ctnn::input<64>, ctnn::dense<64, ctnn::relu>, ctnn::dense<10>>;
using cnn = ctnn::sequential<ctnn::input<18, 18>,
                             ctnn::conv2d<16, 3, 3, 1, ctnn::padding::valid, ctnn::relu>,  // direct: 16x16x16
                             ctnn::max_pool2d<2>, ctnn::batch_norm,                        // 8x8x16
                             ctnn::conv2d<16, 3, 3, 1, ctnn::padding::valid, ctnn::relu>,  // Winograd y, dx, dW: 6x6x16
                             ctnn::flatten, ctnn::dropout<0.25f>, ctnn::dynamic_dropout, ctnn::dense<10>>;

int main(int argc, char** argv) {
  // sizes the compiler cannot know (from argc): with constant ones g++ -O3 may prove in_memory's size
  // check true and drop the reference to its cold throw that the check below looks for
  const std::size_t n = argc > 7 ? 128 : 256;
  std::vector<float> x(n * 64, 0.5f);
  std::vector<std::int32_t> y(n, 1);
  const ctnn::data::in_memory<ctnn::shape<64>, ctnn::sparse_labels> data{x, y};
  auto m = ctnn::make_model<net>(1);
  ctnn::adam opt{1e-3};
  ctnn::fit(m, ctnn::sparse_categorical_crossentropy{.from_logits = true}, opt, data.batch(32), ctnn::epochs{1},
            ctnn::sparse_categorical_accuracy{});
  // evaluate's loop over the batches (evaluate_batches, compiled part)
  if (!(ctnn::evaluate(m, ctnn::sparse_categorical_crossentropy{.from_logits = true}, data.batch(64))["loss"] > 0)) return 4;
  // the CNN through one training step (a second fit instance would cost this check about 1.5 s of compile)
  const std::vector<float> xc(32 * 324, 0.5f);
  auto mc = ctnn::make_model<cnn>(2);
  ctnn::adam opt_c{1e-3};
  ctnn::train_step step_c(mc, ctnn::sparse_categorical_crossentropy{.from_logits = true}, opt_c);
  if (!(step_c.run(xc.data(), y.data(), 32, 0, 0).loss_sum > 0)) return 3;
  // the Fashion-MNIST dataset type (data/fashion_mnist.hpp: an instance of the compiled part): its batches
  const ctnn::data::fashion_mnist::dataset images{std::vector<float>(n * 784, 0.5f), y};
  ctnn::data::batch_for<ctnn::data::fashion_mnist::dataset> b;
  auto cursor = images.batch(16).open(0);
  if (!cursor.next(b)) return 2;
  ctnn::summary<net>();
  ctnn::summary<cnn>();  // dropout<0.25>'s row: its name from the compiled part
  // a weights file read without the network type, a history's query (compiled part: io/weights.hpp, train/history.hpp)
  if (argc > 2) return int(ctnn::io::read_weights_file(argv[2]).tensors.size() + ctnn::history{}.epochs());
  if (argc > 1) return int(ctnn::data::read_idx(argv[1]).count());
  return m.predict(x.data(), 1).size() == 10 ? 0 : 1;
}
