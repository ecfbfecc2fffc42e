// A model on a backend whose ops<B> lacks what the optimizers' updates call
// (map with an update rule): the model's static_assert fails and the compiler
// names the missing sub-concept.
// first-error: model: ops<Backend> must provide the whole op set
// expect: has_optimizer_update_ops
#include <ctnn/ctnn.hpp>

#include <string>

struct no_updates_backend {
  using memory = ctnn::host_memory;
  static std::string name() { return "no_updates"; }
};
// Everything of the CPU's ops but map, through which every optimizer's update runs
// (the CPU's named element-wise ops keep calling their own).
template <>
struct ctnn::ops<no_updates_backend> : ctnn::ops<ctnn::cpu<>> {
  static void map() = delete;
};

using net = ctnn::sequential<ctnn::input<4>, ctnn::dense<3>>;
ctnn::model<net, float, no_updates_backend> m(1);
