// validation_data(ds) whose samples have 5 values, for a network whose input has 4: refused at compile
// time as fit's training data is (it compiled, then read past the batch buffer or printed a meaningless val_loss).
// expect: static assertion failed: fit: the dataset's samples have a different element count than the network's input
// expect: dataset_input_mismatch<ctnn::diag::dataset_elements<5>, ctnn::diag::network_elements<4>, false>
// first-error: fit: the samples of validation_data are 5 (5 values); the network takes input<4> (4 values)
#include <ctnn/ctnn.hpp>
using net = ctnn::sequential<ctnn::input<4>, ctnn::dense<3>>;
void f(const ctnn::data::in_memory<ctnn::shape<4>, ctnn::sparse_labels>& train,
       const ctnn::data::in_memory<ctnn::shape<5>, ctnn::sparse_labels>& val) {
  auto m = ctnn::make_model<net>(1);
  ctnn::adam opt;
  ctnn::fit(m, ctnn::sparse_categorical_crossentropy{.from_logits = true}, opt, train, ctnn::epochs{1},
            ctnn::validation_data(val));
}
