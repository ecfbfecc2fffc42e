// Trains a small ResNet on Fashion-MNIST: a 3x3 conv stem (16 channels at 28x28), then
// residual blocks of two 3x3 convolutions with batch normalization, x + f(x) and relu
// (He et al.'s basic block): one of 32 channels at 14x14 and two of 64 at 7x7, the first
// of each stage halving the size (x through a 1x1 stride-2 projection), then global
// average pooling and dense<10>. Adam with a cosine decay of the learning rate, batch 128,
// light augmentation (a random horizontal flip and a shift of up to 2 pixels). Prints
// per-epoch loss, accuracy and time, and the final test accuracy. docs/graphs.md; its time
// per epoch against PyTorch's same network (bench/peers/resnet_torch.py) is in
// docs/performance.md.
//   fashion_mnist_resnet [epochs=15] [training images=60000] [test images=10000] [data_dir]
#include <ctnn/ctnn.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <iostream>

// momentum 0.9 (PyTorch's default, 0.1 there): the moving statistics follow the batches' within
// the ~50 steps of the short CTest run too (Keras' 0.99 needs hundreds)
using bn = ctnn::batch_normalization<0.9>;
template <std::size_t C, std::size_t Stride = 1>
using conv = ctnn::conv2d<C, 3, 3, Stride, ctnn::padding::same>;
// x + f(x) (relu follows); a stride-2 block gets x through residual's projection, conv2d<C, 1, 1, 2>.
template <std::size_t C, std::size_t Stride = 1>
using block = ctnn::residual<conv<C, Stride>, bn, ctnn::relu, conv<C>, bn>;

using net = ctnn::sequential<ctnn::input<28, 28>,
                             conv<16>, bn, ctnn::relu,                          // 28x28x16
                             block<32, 2>, ctnn::relu,                          // 14x14x32
                             block<64, 2>, ctnn::relu, block<64>, ctnn::relu,  // 7x7x64
                             ctnn::global_average_pool,                         // 64
                             ctnn::dense<10>>;                                  // logits

static_assert(net::output_shape == ctnn::shape<10>{});
// conv + bn of C channels over Cin: 9 Cin C + C weights and biases, 2 C gamma and beta
constexpr std::size_t conv_bn(std::size_t cin, std::size_t c) { return 9 * cin * c + c + 2 * c; }
static_assert(net::parameter_count == conv_bn(1, 16) +                                              // stem
                                          conv_bn(16, 32) + conv_bn(32, 32) + (16 * 32 + 32) +      // stage 1, projection
                                          conv_bn(32, 64) + 3 * conv_bn(64, 64) + (32 * 64 + 64) +  // stage 2, projection
                                          64 * 10 + 10);

namespace data = ctnn::data;
using sample = data::sample<ctnn::shape<28, 28>>;

// A random horizontal flip and a shift of up to 2 pixels each way (zeros come in).
sample augment(sample s, ctnn::rng& g) {
  const bool flip = g.below(2) == 1;
  const int dy = int(g.below(5)) - 2, dx = int(g.below(5)) - 2;
  sample out = s;
  for (int i = 0; i < 28; ++i)
    for (int j = 0; j < 28; ++j) {
      const int si = i - dy, sj0 = j - dx, sj = flip ? 27 - sj0 : sj0;
      out.x[std::size_t(i * 28 + j)] = (si >= 0 && si < 28 && sj0 >= 0 && sj0 < 28) ? s.x[std::size_t(si * 28 + sj)] : 0.0f;
    }
  return out;
}

int main(int argc, char** argv) try {
  const std::size_t n_epochs = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 15;
  const std::size_t n_train = argc > 2 ? std::strtoul(argv[2], nullptr, 10) : 60000;
  const std::size_t n_test = argc > 3 ? std::strtoul(argv[3], nullptr, 10) : 10000;
  const auto dir = argc > 4 ? std::filesystem::path(argv[4]) : data::fashion_mnist::default_dir();
  if (n_epochs == 0) throw std::invalid_argument("the number of epochs must be >= 1");

  const std::size_t batch = 128;
  const auto images = data::fashion_mnist::train(dir).take(n_train);
  const auto train = data::from(images).shuffle(images.size(), /*seed=*/1).map(augment, data::random_seed{7}).batch(batch);
  const auto test = data::fashion_mnist::test(dir).take(n_test).batch(1000);
  std::cout << "Fashion-MNIST: " << images.size() << " training and " << test.size() << " test images\n";
  ctnn::summary<net>();

  auto model = ctnn::make_model<net>(/*seed=*/42);
  const auto steps = std::int64_t(n_epochs * ((images.size() + batch - 1) / batch));
  ctnn::adam opt{ctnn::cosine_decay{2e-3, std::max<std::int64_t>(steps, 1)}};
  const ctnn::sparse_categorical_crossentropy loss{.from_logits = true};

  const auto t0 = std::chrono::steady_clock::now();
  ctnn::fit(model, loss, opt, train, ctnn::epochs{n_epochs}, ctnn::sparse_categorical_accuracy{},
            ctnn::validation_data(test), ctnn::epoch_logger{});
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  const auto result = ctnn::evaluate(model, loss, test, ctnn::sparse_categorical_accuracy{});
  std::printf("trained %zu epochs in %.1f s (%.1f s per epoch, validation included)\n", n_epochs, secs,
              secs / double(n_epochs));
  std::printf("test loss: %.4f  test accuracy: %.4f\n", result["loss"], result["sparse_categorical_accuracy"]);
  return 0;
} catch (const std::exception& e) {
  std::cerr << "fashion_mnist_resnet: " << e.what() << "\n";
  return 1;
}
