// adam{lambda}: a callable of the step without name() is a rate but not a Schedule (Keras 3 names a
// callable learning rate by its function's name in get_config; a lambda has none): refused, naming
// the requirement and named_schedule, which names one (tests/schedules/test_schedules.cpp).
// first-error: optimizer: the learning-rate schedule
// first-error: has no name() (a Schedule is double operator()(std::int64_t) const and std::string name() const; name a lambda with named_schedule{name, f})
#include <ctnn/ctnn.hpp>
using net = ctnn::sequential<ctnn::input<4>, ctnn::dense<3>>;
void f(const ctnn::data::in_memory<ctnn::shape<4>, ctnn::sparse_labels>& d) {
  auto m = ctnn::make_model<net>(1);
  ctnn::adam opt{[](std::int64_t step) { return 1e-3 / double(1 + step); }};
  ctnn::fit(m, ctnn::sparse_categorical_crossentropy{.from_logits = true}, opt, d, ctnn::epochs{1});
}
