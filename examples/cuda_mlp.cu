// examples/cuda_mlp.cu — the Fashion-MNIST MLP trained on a CUDA device.
//
// The network type is the CPU demo's; only make_model's backend changes: the
// model, fit and evaluate are the generic ones.
// Built by nvcc when CMake finds it (CTNN_CUDA); without a device it says so
// and exits 0. docs/cuda.md includes this file.
#include <ctnn/backends/cuda/cuda.cuh>

#include <cstdio>
#include <cstdlib>
#include <exception>

using net = ctnn::sequential<ctnn::input<28, 28>,
                             ctnn::flatten,
                             ctnn::dense<256, ctnn::relu>,   // cuBLASLt, bias + relu fused into the GEMM
                             ctnn::dense<128, ctnn::relu>,
                             ctnn::dense<10>>;               // logits

int main(int argc, char** argv) try {
  if (ctnn::device_count() == 0) {
    std::printf("CTNN_SKIP: %s\n", ctnn::device_status().c_str());
    return 0;
  }
  const std::size_t n_epochs = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 10;
  const auto train = ctnn::data::fashion_mnist::train().shuffle(/*seed=*/1).batch(64);
  const auto test = ctnn::data::fashion_mnist::test().batch(1000);

  // One device allocation laid out by net::plan; parameters drawn on the host as on the CPU.
  auto model = ctnn::make_model<net, ctnn::precision::float32, ctnn::cuda<90>>(/*seed=*/42);
  ctnn::adam opt{ctnn::exponential_decay{1e-3, 5000, 0.7, /*staircase=*/false}};
  const ctnn::sparse_categorical_crossentropy loss{.from_logits = true};

  // Batches are staged in pinned memory and copied on a second stream (cuda<90>'s feeder).
  const auto hist = ctnn::fit(model, loss, opt, train, ctnn::epochs{n_epochs}, ctnn::sparse_categorical_accuracy{});
  for (std::size_t e = 0; e < n_epochs; ++e)
    std::printf("epoch %zu: loss %.4f accuracy %.4f, %.2f s (device compute %.2f s, waiting for data %.3f s)\n",
                e + 1, hist.values.at("loss")[e], hist.values.at("sparse_categorical_accuracy")[e],
                hist.values.at("seconds")[e], hist.values.at("device_compute_seconds")[e],
                hist.values.at("device_wait_seconds")[e]);

  const auto result = ctnn::evaluate(model, loss, test, ctnn::sparse_categorical_accuracy{});
  std::printf("test loss: %.4f  test accuracy: %.4f\n", result["loss"], result["sparse_categorical_accuracy"]);
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "cuda_mlp: %s\n", e.what());
  return 1;
}
