// warmup<S> wraps only a schedule: the failed constraint is named.
// expect: Schedule
// expect: has_schedule_name
// first-error-gcc: requires  Schedule<S> struct ctnn::warmup
// first-error-clang: constraints not satisfied for class template 'warmup' [with S = not_a_schedule]
#include <ctnn/schedules/warmup.hpp>
struct not_a_schedule {
  double operator()(long) const { return 0.1; }
};
ctnn::warmup<not_a_schedule>* p = nullptr;
