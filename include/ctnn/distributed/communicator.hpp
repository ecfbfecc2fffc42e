// ctnn/distributed/communicator.hpp — what data-parallel training asks of a communicator.
//
// A Communicator (Horovod's / DDP's process group) has rank() in [0, size()), size() >= 1,
// broadcast(span<T>, root) (T trivially copyable: root's values into every rank's span),
// all_reduce_average(span<float|double>) (every rank's span becomes the element-wise sum over
// the ranks divided by size()) and barrier(). Every rank calls the collectives in the same
// order with spans of the same size. distributed::none (the default: one process) is all of
// this with nothing to do; distributed::mpi (ctnn/distributed/mpi.hpp, the only header that
// includes <mpi.h>) runs them on MPI. distributed_error names the failed call. docs/distributed.md.
#pragma once
#include <concepts>
#include <cstddef>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace ctnn {

// A collective failed; what() names the call ("MPI_Allreduce: ...").
class distributed_error : public std::runtime_error {
 public:
  [[gnu::cold]] explicit distributed_error(const std::string& what) : std::runtime_error(what) {}
};

namespace distributed {

template <class C>
concept has_rank_and_size = requires(const C& c) {
  { c.rank() } -> std::convertible_to<int>;
  { c.size() } -> std::convertible_to<int>;
};
template <class C>
concept has_broadcast = requires(C& c, std::span<float> f, std::span<unsigned char> b) {
  c.broadcast(f, 0);
  c.broadcast(b, 0);
};
template <class C>
concept has_all_reduce_average = requires(C& c, std::span<float> f, std::span<double> d) {
  c.all_reduce_average(f);
  c.all_reduce_average(d);
};
template <class C>
concept has_barrier = requires(C& c) { c.barrier(); };
template <class C>
concept Communicator = has_rank_and_size<C> && has_broadcast<C> && has_all_reduce_average<C> && has_barrier<C>;
// Optional: a non-blocking all-reduce (sum, in place) into a list of C::request, progress(list) and
// wait_all(list) (distributed::mpi has it): data_parallel then reduces the gradients in buckets
// while backward still runs (overlap); without it, one all-reduce after backward.
// Whether C's collectives take device memory (a cuda<SM> model's regions): distributed::nccl.
template <class C>
inline constexpr bool handles_device_memory = requires { requires bool(C::device_memory); };

template <class C>
concept has_async_all_reduce = requires(C& c, std::span<float> f, std::vector<typename C::request>& r) {
  c.all_reduce_sum_start(f, r);
  c.progress(r);
  c.wait_all(r);
};

// Optional: point-to-point byte messages, send_message(bytes, to, tag) and receive_message(tag,
// wait) -> optional<message> (from any rank; nullopt when !wait and none has arrived). The
// tuner hands out trials through them as processes become free; without them, in rounds.
struct message {
  int source = 0;
  std::vector<unsigned char> bytes;
};
template <class C>
concept has_messages = requires(const C& c, std::span<const unsigned char> b) {
  c.send_message(b, 0, 0);
  { c.receive_message(0, true) } -> std::same_as<std::optional<message>>;
};

// One process: rank 0 of 1; every collective leaves the data as it is.
struct none {
  static constexpr int rank() noexcept { return 0; }
  static constexpr int size() noexcept { return 1; }
  template <class T>
  void broadcast(std::span<T>, int root = 0) const {
    if (root != 0) throw std::invalid_argument("broadcast: root " + std::to_string(root) + " is not a rank of distributed::none (size 1)");
  }
  template <class T>
  void all_reduce_average(std::span<T>) const noexcept {}
  void barrier() const noexcept {}
};
static_assert(Communicator<none>);

}  // namespace distributed
}  // namespace ctnn
