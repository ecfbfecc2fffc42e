// ctnn/distributed/mpi.hpp — distributed::mpi: the Communicator on MPI (Open MPI, MPICH).
//
// The one ctnn header that includes <mpi.h>; link ctnn::mpi (CMake: find_package(MPI)).
// mpi_session (as Horovod's hvd.init()): MPI_Init_thread (MPI_THREAD_FUNNELED: only the thread
// that trains calls MPI) in its constructor unless MPI is already initialized, MPI_Finalize in
// its destructor when it initialized MPI; one per process, alive while any communicator is used.
// mpi{} is MPI_COMM_WORLD, mpi{comm} any intra-communicator (a non-owning handle; copies share
// it). It sets the communicator's error handler to MPI_ERRORS_RETURN, so a failing call throws
// ctnn::distributed_error "MPI_<Call>: <MPI's text>". broadcast sends bytes (any trivially
// copyable T); all_reduce_average sums float/double in place (MPI_IN_PLACE, MPI_SUM) and divides
// by size(). Spans over INT_MAX elements go in pieces. send_message / receive_message carry
// byte messages between two ranks (the tuner's dynamic trial assignment). docs/distributed.md.
#pragma once
#include <mpi.h>

#include <algorithm>
#include <climits>
#include <cstddef>
#include <optional>
#include <span>
#include <vector>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "communicator.hpp"

namespace ctnn::distributed {

namespace detail {
inline void check_mpi(int rc, const char* call) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS) len = 0;
  throw distributed_error(std::string(call) + ": " +
                          (len > 0 ? std::string(text, std::size_t(len)) : "MPI error code " + std::to_string(rc)));
}
inline bool mpi_initialized() {
  int init = 0, fin = 0;
  MPI_Initialized(&init);
  MPI_Finalized(&fin);
  return init && !fin;
}
template <class T>
MPI_Datatype mpi_float_type() {
  if constexpr (std::is_same_v<T, float>) return MPI_FLOAT;
  else return MPI_DOUBLE;
}
}  // namespace detail

class mpi_session {
 public:
  mpi_session() { init(nullptr, nullptr); }
  mpi_session(int& argc, char**& argv) { init(&argc, &argv); }
  mpi_session(const mpi_session&) = delete;
  mpi_session& operator=(const mpi_session&) = delete;
  ~mpi_session() {
    int fin = 0;
    MPI_Finalized(&fin);
    if (owner_ && !fin) MPI_Finalize();
  }
  // The thread support MPI gave (MPI_THREAD_FUNNELED or more when this session initialized MPI).
  int thread_support() const noexcept { return provided_; }
  bool owns_mpi() const noexcept { return owner_; }

 private:
  void init(int* argc, char*** argv) {
    int fin = 0;
    MPI_Finalized(&fin);
    if (fin) throw distributed_error("mpi_session: MPI was finalized already and cannot start again in this process");
    int init = 0;
    MPI_Initialized(&init);
    if (init) {
      MPI_Query_thread(&provided_);
    } else {
      detail::check_mpi(MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided_), "MPI_Init_thread");
      owner_ = true;
    }
    detail::check_mpi(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
  }
  bool owner_ = false;
  int provided_ = 0;
};

class mpi {
 public:
  mpi() : mpi(MPI_COMM_WORLD) {}
  explicit mpi(MPI_Comm comm) : comm_(comm) {
    if (!detail::mpi_initialized())
      throw distributed_error("distributed::mpi: MPI is not initialized (create a distributed::mpi_session first)");
    detail::check_mpi(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
    detail::check_mpi(MPI_Comm_rank(comm_, &rank_), "MPI_Comm_rank");
    detail::check_mpi(MPI_Comm_size(comm_, &size_), "MPI_Comm_size");
  }

  int rank() const noexcept { return rank_; }
  int size() const noexcept { return size_; }
  MPI_Comm handle() const noexcept { return comm_; }

  template <class T>
    requires std::is_trivially_copyable_v<T>
  void broadcast(std::span<T> s, int root = 0) const {
    if (root < 0 || root >= size_)
      throw std::invalid_argument("broadcast: root " + std::to_string(root) + " is not a rank of this communicator (size " +
                                  std::to_string(size_) + ")");
    auto* p = reinterpret_cast<unsigned char*>(s.data());
    for (std::size_t left = s.size_bytes(); left > 0;) {
      const int n = int(std::min<std::size_t>(left, INT_MAX));
      detail::check_mpi(MPI_Bcast(p, n, MPI_BYTE, root, comm_), "MPI_Bcast");
      p += n;
      left -= std::size_t(n);
    }
  }
  template <class T>
    requires std::is_same_v<T, float> || std::is_same_v<T, double>
  void all_reduce_average(std::span<T> s) const {
    T* p = s.data();
    for (std::size_t left = s.size(); left > 0;) {
      const int n = int(std::min<std::size_t>(left, INT_MAX));
      detail::check_mpi(MPI_Allreduce(MPI_IN_PLACE, p, n, detail::mpi_float_type<T>(), MPI_SUM, comm_), "MPI_Allreduce");
      p += n;
      left -= std::size_t(n);
    }
    const T ranks = T(size_);
    for (T& v : s) v /= ranks;
  }
  void barrier() const { detail::check_mpi(MPI_Barrier(comm_), "MPI_Barrier"); }

  // Non-blocking, in place: the element-wise sum over the ranks (MPI_Iallreduce), its requests
  // appended to `pending`; progress() lets MPI advance them (Open MPI moves a non-blocking
  // collective on inside MPI calls), wait_all() finishes them all.
  using request = MPI_Request;
  void all_reduce_sum_start(std::span<float> s, std::vector<MPI_Request>& pending) const {
    float* p = s.data();
    for (std::size_t left = s.size(); left > 0;) {
      const int n = int(std::min<std::size_t>(left, INT_MAX));
      pending.push_back(MPI_REQUEST_NULL);
      detail::check_mpi(MPI_Iallreduce(MPI_IN_PLACE, p, n, MPI_FLOAT, MPI_SUM, comm_, &pending.back()), "MPI_Iallreduce");
      p += n;
      left -= std::size_t(n);
    }
  }
  void progress(std::vector<MPI_Request>& pending) const {
    if (pending.empty()) return;
    int done = 0;
    detail::check_mpi(MPI_Testall(int(pending.size()), pending.data(), &done, MPI_STATUSES_IGNORE), "MPI_Testall");
  }
  void wait_all(std::vector<MPI_Request>& pending) const {
    if (!pending.empty())
      detail::check_mpi(MPI_Waitall(int(pending.size()), pending.data(), MPI_STATUSES_IGNORE), "MPI_Waitall");
    pending.clear();
  }

  // Point-to-point: `bytes` to rank `to` under `tag` (MPI_Send; at most INT_MAX bytes).
  void send_message(std::span<const unsigned char> bytes, int to, int tag) const {
    if (to < 0 || to >= size_)
      throw std::invalid_argument("send_message: rank " + std::to_string(to) + " is not a rank of this communicator (size " +
                                  std::to_string(size_) + ")");
    if (bytes.size() > std::size_t(INT_MAX)) throw std::invalid_argument("send_message: a message over INT_MAX bytes");
    detail::check_mpi(MPI_Send(bytes.data(), int(bytes.size()), MPI_BYTE, to, tag, comm_), "MPI_Send");
  }
  // The next message under `tag` from any rank: waits for one when `wait`, else nullopt when
  // none has arrived (MPI_Iprobe).
  std::optional<message> receive_message(int tag, bool wait) const {
    MPI_Status st;
    if (wait) {
      detail::check_mpi(MPI_Probe(MPI_ANY_SOURCE, tag, comm_, &st), "MPI_Probe");
    } else {
      // Open MPI's MPI_Iprobe moves arrived messages on after it has looked and missed: a second
      // look finds what had arrived before the first.
      int flag = 0;
      for (int look = 0; look < 2 && !flag; ++look)
        detail::check_mpi(MPI_Iprobe(MPI_ANY_SOURCE, tag, comm_, &flag, &st), "MPI_Iprobe");
      if (!flag) return std::nullopt;
    }
    int n = 0;
    detail::check_mpi(MPI_Get_count(&st, MPI_BYTE, &n), "MPI_Get_count");
    message m{st.MPI_SOURCE, std::vector<unsigned char>(std::size_t(n))};
    detail::check_mpi(MPI_Recv(m.bytes.data(), n, MPI_BYTE, st.MPI_SOURCE, tag, comm_, MPI_STATUS_IGNORE), "MPI_Recv");
    return m;
  }

 private:
  MPI_Comm comm_;
  int rank_ = 0, size_ = 1;
};
static_assert(Communicator<mpi>);
static_assert(has_messages<mpi>);

}  // namespace ctnn::distributed
