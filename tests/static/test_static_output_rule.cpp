// What output each loss and metric accepts (core/output_rule.hpp,
// train/output_check.hpp): the accepted cases, as static_asserts. The rejected
// ones are must-not-compile cases in tests/compile_fail (loss_output_*,
// metric_output_*).
#include <doctest/doctest.h>

#include <ctnn/ctnn.hpp>

using namespace ctnn;
using detail::check_output;

// class scores: rank 1, >= 2 with sparse labels, the target width with dense targets
static_assert(check_output<sparse_categorical_crossentropy, shape<10>, sparse_labels>());
static_assert(check_output<sparse_categorical_accuracy, shape<2>, sparse_labels>());
static_assert(check_output<categorical_crossentropy, shape<10>, dense_targets<shape<10>>>());
static_assert(check_output<accuracy, shape<10>, sparse_labels>());
static_assert(check_output<accuracy, shape<1>, dense_targets<shape<1>>>());  // a binary score
// any shape: as many values per sample as the targets
static_assert(check_output<mean_squared_error, shape<4, 4>, dense_targets<shape<16>>>());
static_assert(check_output<mean_absolute_error, shape<2, 3>, dense_targets<shape<6>>>());
// the rules as declared
static_assert(sparse_categorical_crossentropy::accepts.rule == output_rule::class_scores);
static_assert(sparse_categorical_crossentropy::accepts.targets == target_rule::sparse);
static_assert(mean_squared_error::accepts.rule == output_rule::any_shape);
static_assert(accuracy::accepts.targets == target_rule::either);

// a loss without `accepts` is not checked
struct plain_loss {};
static_assert(check_output<plain_loss, shape<3, 3>, sparse_labels>());

TEST_CASE("output rules of losses and metrics: accepted cases are static_asserts") {
  CHECK(std::string(sparse_categorical_crossentropy{}.name()) == "sparse_categorical_crossentropy");
  CHECK(std::string(mean_absolute_error{}.name()) == "mean_absolute_error");
}
