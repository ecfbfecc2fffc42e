#include <ctnn/ctnn.hpp>

using net = ctnn::sequential<
    ctnn::input<28, 28>,                          // one sample's shape
    ctnn::flatten,
    ctnn::dense<256, ctnn::relu, ctnn::l2<0.001f>>,
    ctnn::dense<10>>;                             // logits

static_assert(net::output_shape == ctnn::shape<10>{});
static_assert(net::parameter_count == 784 * 256 + 256 + 256 * 10 + 10);
static_assert(net::memory_plan(64, ctnn::adam<>::max_slots_per_parameter).total < 5'000'000);  // 4,540,224 bytes

int main() {
  auto model = ctnn::make_model<net>(/*seed=*/42);   // one allocation, laid out by net::plan<>
  ctnn::adam opt{ctnn::exponential_decay{1e-3, 10'000, 0.96, /*staircase=*/true}};
  auto train = ctnn::data::fashion_mnist::train().shuffle(/*seed=*/1).batch(64);
  auto test  = ctnn::data::fashion_mnist::test().batch(1000);
  auto hist  = ctnn::fit(model, ctnn::sparse_categorical_crossentropy{.from_logits = true}, opt, train,
                         ctnn::epochs{3}, ctnn::sparse_categorical_accuracy{},
                         ctnn::validation_data(test), ctnn::epoch_logger{});
  ctnn::io::save_weights(model, "mlp.ctnn");
}
