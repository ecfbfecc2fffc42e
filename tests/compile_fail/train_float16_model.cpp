// A model whose variables are float16 (the inference policy) cannot be trained.
// expect: train_step: this model's variables are 16-bit
// first-error: train_step: this model's variables are 16-bit (precision::float16 is for inference); train under precision::mixed_float16 or mixed_bfloat16
#include <ctnn/mixed_precision.hpp>
using net = ctnn::sequential<ctnn::input<4>, ctnn::dense<2>>;
void train(const ctnn::data::in_memory<ctnn::shape<4>, ctnn::sparse_labels>& ds) {
  auto m = ctnn::make_model<net, ctnn::precision::float16>(0);
  ctnn::sgd opt{0.1f};
  ctnn::fit(m, ctnn::sparse_categorical_crossentropy{.from_logits = true}, opt, ds, ctnn::epochs{1});
}
