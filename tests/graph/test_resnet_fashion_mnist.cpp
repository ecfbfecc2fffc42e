// A small ResNet (conv, batch_norm, two residual blocks, the second with a 1x1 stride-2
// projection, global average pooling) on a slice of Fashion-MNIST: a low bar, cheap
// (1200 training images, 2 epochs: about 0.6 held-out accuracy in release), skipped when the dataset is not installed.
#include <doctest/doctest.h>

#include "sanitized.hpp"

#include <ctnn/ctnn.hpp>
#include <ctnn/train/summary.hpp>

#include <filesystem>
#include <sstream>

using namespace ctnn;

namespace {
// momentum 0.9: the moving statistics must follow the batch's within the 60 steps of the test
using bn = batch_normalization<0.9>;
using resnet = sequential<input<28, 28>, conv2d<8, 3, 3, 2, padding::same>, bn, relu,  // 14x14x8
                          residual<conv2d<8, 3, 3, 1, padding::same>, bn, relu, conv2d<8, 3, 3, 1, padding::same>, bn>,
                          relu,
                          residual<conv2d<16, 3, 3, 2, padding::same>, bn, relu, conv2d<16, 3, 3, 1, padding::same>>,
                          relu, global_average_pool, dense<10>>;
static_assert(resnet::output_shape == shape<10>{});

// Under ASan/UBSan (16 s for the full run) a slice a sixth as large: it checks the path, not the accuracy.
using ctnn::test::sanitized;
}  // namespace

TEST_CASE("resnet: a small ResNet learns Fashion-MNIST from 1200 images, summary shows the blocks") {
  std::ostringstream out;
  summary<resnet>(out);
  CHECK(out.str().find("\nresidual ") != std::string::npos);
  CHECK(out.str().find("\n    batch_normalization<0.9") != std::string::npos);   // inside a block
  CHECK(out.str().find("\n  conv2d<16, 1, 1, 2, valid> ") != std::string::npos);  // the projection

  const auto dir = data::fashion_mnist::default_dir();
  if (!std::filesystem::exists(dir / "t10k-images-idx3-ubyte.gz")) {
    MESSAGE("CTNN_SKIP: " << dir << " is missing (apt-get install dataset-fashion-mnist)");
    return;
  }
  const auto all = data::fashion_mnist::test();
  auto m = make_model<resnet>(3);
  adam opt{0.01};
  const std::size_t n = sanitized ? 200 : 1200;
  const auto h = fit(m, sparse_categorical_crossentropy{.from_logits = true}, opt, all.take(n).batch(40).shuffle(1), epochs{2});
  const auto r = evaluate(m, sparse_categorical_crossentropy{.from_logits = true}, all.skip(9000).take(sanitized ? 200 : 1000).batch(200),
                          accuracy{});
  MESSAGE("resnet: training loss " << h["loss"].front() << " -> " << h["loss"].back() << ", held-out accuracy " << r["accuracy"]);
  CHECK(h["loss"].back() < h["loss"].front());
  if (!sanitized) CHECK(r["accuracy"] > 0.45);  // chance is 0.1
}
