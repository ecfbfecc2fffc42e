// docs/mixed-precision.md: a model under mixed_float16 with dynamic loss
// scaling, its memory at compile time, and a float16 inference copy.
#include <ctnn/mixed_precision.hpp>

#include <cstdio>

using net = ctnn::sequential<ctnn::input<28, 28>, ctnn::flatten, ctnn::dense<256, ctnn::relu>,
                             ctnn::dense<128, ctnn::relu>, ctnn::dense<10>>;

// What mixed_float16 saves at batch 256 with Adam (2 slots per parameter): the
// activations and deltas; parameters, gradients and slots stay float32.
static_assert(ctnn::memory_saved<net, ctnn::precision::mixed_float16>(256, 2).activations == 592896);
static_assert(ctnn::memory_saved<net, ctnn::precision::mixed_float16>(256, 2).parameters == 0);

int main() {
  const auto train = ctnn::data::fashion_mnist::train().shuffle(/*seed=*/1).batch(64);
  const auto test = ctnn::data::fashion_mnist::test().batch(1000);

  auto model = ctnn::make_model<net, ctnn::precision::mixed_float16>(/*seed=*/42);
  ctnn::adam opt{1e-3};
  ctnn::loss_scale scale;  // dynamic: 2^15, x2 after 2000 finite steps, /2 and skip on overflow
  const ctnn::sparse_categorical_crossentropy loss{.from_logits = true};
  auto hist = ctnn::fit(model, loss, opt, train, ctnn::epochs{1}, scale, ctnn::sparse_categorical_accuracy{});
  std::printf("loss scale %g, skipped steps %g\n", hist.values["loss_scale"].back(), hist.values["skipped_steps"].back());

  // Deploy in float16: the same network type, weights stored in half.
  ctnn::io::save_weights(model, "mlp.ctnn");  // float32 variables
  auto deployed = ctnn::make_model<net, ctnn::precision::float16>();
  ctnn::io::load_weights(deployed, "mlp.ctnn");  // rounded to float16 on load
  const auto r = ctnn::evaluate(deployed, loss, test, ctnn::sparse_categorical_accuracy{});
  std::printf("float16 test accuracy %.4f, %zu parameter bytes instead of %zu\n", r["sparse_categorical_accuracy"],
              deployed.layout().bytes(ctnn::role::parameter), model.layout().bytes(ctnn::role::parameter));
}
