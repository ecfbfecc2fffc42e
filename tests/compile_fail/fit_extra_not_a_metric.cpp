// A loss passed to fit where a metric goes (Keras takes "mse" there; ctnn's metrics are types of ctnn/metrics/):
// the first error names the argument's position and type.
// first-error: fit: argument 6 (ctnn::mean_squared_error) is neither a metric, a callback, a step hook, validation_data(...) nor ieee_denormals{}
// expect: fit: every extra argument must be a metric, a callback, a step hook, validation_data(...) or ieee_denormals{}
#include <ctnn/ctnn.hpp>
using net = ctnn::sequential<ctnn::input<4>, ctnn::dense<8, ctnn::relu>, ctnn::dense<3>>;
void f(const ctnn::data::in_memory<ctnn::shape<4>, ctnn::sparse_labels>& d) {
  auto m = ctnn::make_model<net>(1);
  ctnn::adam opt;
  ctnn::fit(m, ctnn::sparse_categorical_crossentropy{.from_logits = true}, opt, d, ctnn::epochs{1},
            ctnn::mean_squared_error{});
}
