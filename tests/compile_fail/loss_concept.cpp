// An object that is not a loss given to fit: the first error names the argument and its type.
// first-error: fit: the 2nd argument (my_loss) is not a loss of float outputs
// expect: static assertion failed
#include <ctnn/ctnn.hpp>
using net = ctnn::sequential<ctnn::input<4>, ctnn::dense<3>>;
struct my_loss {
  float operator()(const float*, const float*, int) const { return 0; }
};
void f(const ctnn::data::in_memory<ctnn::shape<4>, ctnn::sparse_labels>& d) {
  auto m = ctnn::make_model<net>(1);
  ctnn::adam opt;
  ctnn::fit(m, my_loss{}, opt, d, ctnn::epochs{1});
}
