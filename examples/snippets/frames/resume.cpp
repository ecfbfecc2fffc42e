// Frame for documentation blocks that stop and resume a training run: a trained
// model `m` with its optimizer `opt`, a second model `m2` and optimizer `opt2` of
// the same types, `loss` and `data` (a small synthetic set); run in a scratch
// directory, so the files the block writes stay there.
#include <ctnn/ctnn.hpp>
#include <ctnn/train/optimizer_state_file.hpp>

#include <cstdint>
#include <vector>

using net = ctnn::sequential<ctnn::input<4>, ctnn::dense<8, ctnn::relu>, ctnn::dense<2>>;

int main() {
  const std::vector<float> x(64 * 4, 0.25f);
  const std::vector<std::int32_t> y(64, 1);
  const auto data = ctnn::data::in_memory<ctnn::shape<4>, ctnn::sparse_labels>(x, y).batch(16);
  const ctnn::sparse_categorical_crossentropy loss{.from_logits = true};
  auto m = ctnn::make_model<net>(1);
  ctnn::adam opt{0.01};
  ctnn::fit(m, loss, opt, data, ctnn::epochs{1});
  auto m2 = ctnn::make_model<net>(2);
  ctnn::adam opt2{0.01};
// @snippet@
}
