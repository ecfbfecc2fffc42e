// ctnn/train/tensorboard.hpp — Keras' TensorBoard callback: event files TensorBoard reads.
//
// tensorboard{.log_dir = "logs", .update_freq = 0, .histogram_freq = 0}. At on_train_begin it
// starts log_dir/train/events.out.tfevents.<seconds>.<host>.<pid>.<n>.v2 (and, at the first
// epoch with val_* logs, the same under log_dir/validation): a new file per fit, so a run with
// the same log_dir adds a file beside the old ones, as TensorBoard's writers do. Per epoch (step
// = the 0-based epoch) every epoch log is a scalar "epoch_<key>" (loss, metrics, learning_rate,
// loss_scale, sparsity_layer_<i>, input_share, seconds, ...): the val_* keys, without "val_", in
// validation/, the others in train/ (Keras' _log_epoch_metrics). update_freq = N > 0 adds, every
// N-th batch of the run (step = the 1-based batch count, as Keras' _global_train_batch),
// "batch_<key>" for the running loss and metrics, "batch_learning_rate" and "batch_input_share"
// (the share of those N batches' time spent waiting for data, measured by this callback between
// its hooks). histogram_freq = K > 0 adds, every K-th epoch, a histogram of every parameter
// ("layer_<i>/<name>/histogram", 30 equal-width buckets). The file is TFRecord framing of Event
// protos (encoded here by hand, docs/training.md says why); each file is rewritten whole with
// io::write_file_atomically after every epoch (and at on_train_end), so it is never half-written.
// Under data-parallel training only rank 0 writes (train/process_role.hpp). A log_dir that
// cannot be made is a ctnn::io_error "tensorboard: <path>: <reason>".
#pragma once
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "../core/plan.hpp"
#include "../io/atomic_file.hpp"
#include "../io/directories.hpp"
#include "history.hpp"
#include "process_role.hpp"

namespace ctnn {

namespace detail::tfevents {

// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), as TFRecord frames use it.
constexpr std::array<std::uint32_t, 256> crc32c_table = [] {
  std::array<std::uint32_t, 256> t{};
  for (std::uint32_t i = 0; i < 256; ++i) {
    std::uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
    t[i] = c;
  }
  return t;
}();
inline std::uint32_t crc32c(std::string_view bytes) {
  std::uint32_t c = 0xFFFFFFFFu;
  for (unsigned char b : bytes) c = crc32c_table[(c ^ b) & 0xFF] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}
// TFRecord's masked CRC: rotated right by 15 bits plus a constant.
inline std::uint32_t masked_crc32c(std::string_view bytes) {
  const std::uint32_t c = crc32c(bytes);
  return ((c >> 15) | (c << 17)) + 0xA282EAD8u;
}

// Protocol-buffer wire format, the few shapes the Event messages need.
inline void varint(std::string& out, std::uint64_t v) {
  while (v >= 0x80) {
    out += char((v & 0x7F) | 0x80);
    v >>= 7;
  }
  out += char(v);
}
template <class U>
void little_endian(std::string& out, U v) {
  for (std::size_t i = 0; i < sizeof(U); ++i) out += char((v >> (8 * i)) & 0xFF);
}
inline void field_varint(std::string& out, unsigned field, std::uint64_t v) {
  varint(out, std::uint64_t(field) << 3 | 0);
  varint(out, v);
}
inline void field_double(std::string& out, unsigned field, double v) {
  varint(out, std::uint64_t(field) << 3 | 1);
  std::uint64_t u;
  std::memcpy(&u, &v, 8);
  little_endian(out, u);
}
inline void field_float(std::string& out, unsigned field, float v) {
  varint(out, std::uint64_t(field) << 3 | 5);
  std::uint32_t u;
  std::memcpy(&u, &v, 4);
  little_endian(out, u);
}
inline void field_bytes(std::string& out, unsigned field, std::string_view bytes) {
  varint(out, std::uint64_t(field) << 3 | 2);
  varint(out, bytes.size());
  out += bytes;
}
inline void field_packed_doubles(std::string& out, unsigned field, const std::vector<double>& v) {
  std::string body;
  for (double d : v) {
    std::uint64_t u;
    std::memcpy(&u, &d, 8);
    little_endian(body, u);
  }
  field_bytes(out, field, body);
}

// Summary.Value{tag = 1, simple_value = 2}.
inline std::string scalar_value(std::string_view tag, double v) {
  std::string s;
  field_bytes(s, 1, tag);
  field_float(s, 2, float(v));
  return s;
}
// Summary.Value{tag = 1, histo = 5: HistogramProto{min 1, max 2, num 3, sum 4, sum_squares 5,
// bucket_limit 6, bucket 7}}: `buckets` equal-width buckets from the least to the greatest value.
template <class T>
std::string histogram_value(std::string_view tag, const T* x, std::size_t n, std::size_t buckets = 30) {
  double lo = 0, hi = 0, sum = 0, sum2 = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const double v = double(x[i]);
    lo = i == 0 ? v : std::min(lo, v);
    hi = i == 0 ? v : std::max(hi, v);
    sum += v;
    sum2 += v * v;
  }
  std::vector<double> limit, count;
  if (n > 0 && hi > lo) {
    const double width = (hi - lo) / double(buckets);
    for (std::size_t b = 0; b < buckets; ++b) limit.push_back(b + 1 == buckets ? hi : lo + width * double(b + 1));
    count.assign(buckets, 0.0);
    for (std::size_t i = 0; i < n; ++i) {
      const double v = double(x[i]);
      auto b = std::size_t((v - lo) / width);
      count[std::min(b, buckets - 1)] += 1;
    }
  } else if (n > 0) {  // every value equal: one bucket
    limit.push_back(hi);
    count.push_back(double(n));
  }
  std::string h;
  field_double(h, 1, lo);
  field_double(h, 2, hi);
  field_double(h, 3, double(n));
  field_double(h, 4, sum);
  field_double(h, 5, sum2);
  if (!limit.empty()) {
    field_packed_doubles(h, 6, limit);
    field_packed_doubles(h, 7, count);
  }
  std::string s;
  field_bytes(s, 1, tag);
  field_bytes(s, 5, h);
  return s;
}
// Event{wall_time = 1, step = 2, file_version = 3 | summary = 5: Summary{repeated value = 1}}.
inline std::string event(double wall_time, std::int64_t step, const std::vector<std::string>& values) {
  std::string e;
  field_double(e, 1, wall_time);
  if (step != 0) field_varint(e, 2, std::uint64_t(step));
  std::string summary;
  for (auto& v : values) field_bytes(summary, 1, v);
  field_bytes(e, 5, summary);
  return e;
}
inline std::string version_event(double wall_time) {
  std::string e;
  field_double(e, 1, wall_time);
  field_bytes(e, 3, "brain.Event:2");
  return e;
}
// One TFRecord: u64 length, masked CRC-32C of the length, the data, masked CRC-32C of the data.
inline void append_record(std::string& file, std::string_view data) {
  std::string len;
  little_endian(len, std::uint64_t(data.size()));
  file += len;
  little_endian(file, masked_crc32c(len));
  file += data;
  little_endian(file, masked_crc32c(data));
}

inline double wall_time() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}
// "events.out.tfevents.<seconds, 10 digits>.<host>.<pid>.<n>.v2", n counting the files of this process.
inline std::string event_file_name(double now) {
  static std::atomic<unsigned> counter{0};
  char host[256] = "localhost";
  if (::gethostname(host, sizeof host - 1) != 0) std::strcpy(host, "localhost");
  host[sizeof host - 1] = 0;
  char buf[64];
  std::snprintf(buf, sizeof buf, "%010lld", static_cast<long long>(now));
  return std::string("events.out.tfevents.") + buf + "." + host + "." + std::to_string(::getpid()) + "." +
         std::to_string(counter++) + ".v2";
}

// One event file: its path and everything written to it so far.
struct event_file {
  std::filesystem::path path;
  std::string content;
  bool dirty = false;
  void open(const std::filesystem::path& dir) {
    io::create_directories(dir, "tensorboard");
    const double now = wall_time();
    path = dir / event_file_name(now);
    content.clear();
    append_record(content, version_event(now));
    dirty = true;
  }
  bool is_open() const noexcept { return !path.empty(); }
  void add(std::int64_t step, const std::vector<std::string>& values) {
    if (values.empty()) return;
    append_record(content, event(wall_time(), step, values));
    dirty = true;
  }
  template <class = void>  // of nothing: io::write_file_atomically is one (core/separate.hpp, CTNN_LAZY)
  void flush() {
    if (!is_open() || !dirty) return;
    io::write_file_atomically(path, content);
    dirty = false;
  }
};

}  // namespace detail::tfevents

struct tensorboard {
  std::filesystem::path log_dir = "logs";
  std::size_t update_freq = 0;     // 0: per epoch only (Keras' "epoch"); N: also every N-th batch
  std::size_t histogram_freq = 0;  // 0: no histograms; K: the parameters every K-th epoch

  // State, set by on_train_begin: the two files, the batch count and the time since the last
  // batch summary spent waiting for data (between on_batch_end and on_batch_begin) and computing.
  detail::tfevents::event_file train, validation;
  std::int64_t global_batch = 0;  // batches of this fit so far (Keras' _global_train_batch)
  std::chrono::steady_clock::time_point mark = std::chrono::steady_clock::now();
  double waiting = 0, computing = 0;

  template <class Ctx>
  void on_train_begin(Ctx& ctx) {
    if (!detail::writes_output(ctx)) return;  // rank 0 writes (docs/distributed.md)
    begin<>();
  }
  template <class Ctx>
  void on_epoch_begin(Ctx&) {
    mark = clock::now();
  }
  template <class Ctx>
  void on_batch_begin(Ctx&) {
    const auto now = clock::now();
    waiting += secs(now - mark);
    mark = now;
    ++global_batch;
  }
  template <class Ctx>
  void on_batch_end(Ctx& ctx) {
    const auto now = clock::now();
    computing += secs(now - mark);
    mark = now;
    if (update_freq == 0 || global_batch % std::int64_t(update_freq) != 0) return;
    if (detail::writes_output(ctx) && ctx.running_logs) write_batch<>(ctx.running_logs(), ctx.learning_rate());
    waiting = computing = 0;
    mark = clock::now();  // the writing is neither waiting nor computing
  }
  template <class Ctx>
  void on_epoch_end(Ctx& ctx) {
    if (!detail::writes_output(ctx)) return;
    write_epoch<>(ctx.epoch_logs, ctx.epoch);
    if (histogram_freq && ctx.epoch % histogram_freq == 0) {
      using V = typename std::remove_cvref_t<decltype(ctx.model)>::variable_type;
      std::vector<std::string> values;
      ctx.model.for_each_variable([&](const variable_ref& v) {
        if (v.kind != role::parameter || v.type != elem::variable || v.element_bytes != sizeof(V)) return;
        if constexpr (std::is_floating_point_v<V>)
          values.push_back(detail::tfevents::histogram_value(
              "layer_" + std::to_string(v.layer) + "/" + std::string(v.name) + "/histogram",
              reinterpret_cast<const V*>(v.data), v.extent));
      });
      train.add(std::int64_t(ctx.epoch), values);
    }
    train.flush();
    validation.flush();
  }
  template <class Ctx>
  void on_train_end(Ctx& ctx) {
    if (!detail::writes_output(ctx)) return;
    train.flush();
    validation.flush();
  }

 private:
  using clock = std::chrono::steady_clock;
  static double secs(clock::duration d) { return std::chrono::duration<double>(d).count(); }

  // The bodies: templates of nothing, not of Ctx, so that they are compiled only where a model
  // logs, and once however many models log (cold: once a run, an epoch or N batches).
  template <class = void>
  [[gnu::cold]] void begin() {
    if (log_dir.empty()) throw std::invalid_argument("tensorboard: log_dir is empty");
    global_batch = 0;
    waiting = computing = 0;
    train = {};
    validation = {};
    train.open(log_dir / "train");
    train.flush();
  }
  template <class = void>
  [[gnu::cold]] void write_batch(const logs& l, double learning_rate) {
    std::vector<std::string> values;
    for (auto& [k, v] : l.items) values.push_back(detail::tfevents::scalar_value("batch_" + k, v));
    values.push_back(detail::tfevents::scalar_value("batch_learning_rate", learning_rate));
    const double share = waiting + computing > 0 ? waiting / (waiting + computing) : 0.0;
    values.push_back(detail::tfevents::scalar_value("batch_input_share", share));
    train.add(global_batch, values);
  }
  template <class = void>
  [[gnu::cold]] void write_epoch(const logs& l, std::size_t epoch) {
    std::vector<std::string> t, v;
    for (auto& [k, x] : l.items) {
      if (k.rfind("val_", 0) == 0) v.push_back(detail::tfevents::scalar_value("epoch_" + k.substr(4), x));
      else t.push_back(detail::tfevents::scalar_value("epoch_" + k, x));
    }
    train.add(std::int64_t(epoch), t);
    if (!v.empty() && !validation.is_open()) validation.open(log_dir / "validation");
    validation.add(std::int64_t(epoch), v);
  }
};

}  // namespace ctnn
