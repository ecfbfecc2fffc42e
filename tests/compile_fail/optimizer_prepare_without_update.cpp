// A type derived from adam that replaces prepare but not update: adam's update calls adam's own
// prepare, so the replacement would be ignored by every update; the step refuses it, naming the type
// (a type that replaces update only is run through its update: tests/train/test_step.cpp).
// first-error: optimizer:
// first-error: replaces prepare but not update, so update ignores it (it calls the prepare of its own class); replace update too
#include <ctnn/ctnn.hpp>
using net = ctnn::sequential<ctnn::input<4>, ctnn::dense<3>>;
struct warm_adam : ctnn::adam<> {
  using adam::adam;
  template <class T>
  prepared<T> prepare(std::int64_t iteration, double learning_rate) const {
    return adam::prepare<T>(iteration, learning_rate / 2);
  }
};
void f(const ctnn::data::in_memory<ctnn::shape<4>, ctnn::sparse_labels>& d) {
  auto m = ctnn::make_model<net>(1);
  warm_adam opt{0.001};
  ctnn::fit(m, ctnn::sparse_categorical_crossentropy{.from_logits = true}, opt, d, ctnn::epochs{1});
}
