// ctnn/train/csv_logger.hpp — Keras' CSVLogger, written atomically.
//
// csv_logger{.filename = "log.csv", .separator = ',', .append = false}.
// Columns: "epoch" (0-based, as Keras) then the first epoch's log keys sorted
// by name; a key missing later is written "NA"; values in shortest
// round-trip form; lines end with '\n'. After every epoch the whole file is
// rewritten with io::write_file_atomically, so it is never half-written.
// append = false starts a new file at on_train_begin; append = true keeps
// what the file held and adds a header only when it was missing or empty
// (Keras' append semantics); a file there that cannot be read (a directory,
// no permission, a name too long) is a ctnn::io_error "csv_logger: <path>: <reason>".
#pragma once
#include <filesystem>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

#include "../core/format.hpp"
#include "../io/atomic_file.hpp"
#include "../io/read_file.hpp"
#include "history.hpp"
#include "process_role.hpp"
#include "../core/separate.hpp"

namespace ctnn {

struct csv_logger {
  std::string filename;
  char separator = ',';
  bool append = false;

  // State, set by on_train_begin.
  std::string content{};  // what the file holds
  std::vector<std::string> keys{};
  bool header_needed = true;

  template <class Ctx>
  void on_train_begin(Ctx&) {
    begin<>();
  }
  template <class Ctx>
  void on_epoch_end(Ctx& ctx) {
    if (!detail::writes_output(ctx)) return;  // rank 0 writes (docs/distributed.md)
    write<>(ctx.epoch_logs, ctx.epoch);
  }

 private:
  // The hooks' bodies are templates of nothing, not of Ctx, so that they are
  // compiled only where a model logs, and once however many models log
  // (cold: once a run or an epoch, optimized for size). With CTNN_COMPILED_KERNELS
  // only declared: the compiled part holds them (core/separate.hpp).
  template <class = void>
  [[gnu::cold]] void begin()
#if CTNN_DEFINITIONS
  {
    if (filename.empty()) throw std::invalid_argument("csv_logger: filename is empty");
    content.clear();
    keys.clear();
    std::error_code ec;  // status, not exists: exists throws filesystem_error (e.g. a name too long); read_file reports it
    if (append && std::filesystem::status(filename, ec).type() != std::filesystem::file_type::not_found) {
      content = io::read_file(filename, "csv_logger");
      if (!content.empty() && content.back() != '\n') content += '\n';
    }
    header_needed = content.empty() || content.front() == '\n';
  }
#else
  ;
#endif

  template <class = void>
  [[gnu::cold]] void write(const logs& l, std::size_t epoch)
#if CTNN_DEFINITIONS
  {
    if (keys.empty()) {
      for (auto& [k, v] : l.items) {  // sorted by insertion: a handful of keys
        auto at = keys.begin();
        while (at != keys.end() && *at < k) ++at;
        keys.insert(at, k);
      }
      if (header_needed) {
        content += "epoch";
        for (auto& k : keys) content += separator + k;
        content += '\n';
        header_needed = false;
      }
    }
    content += std::to_string(epoch);
    for (auto& k : keys) content += separator + (l.contains(k) ? detail::format_number(l[k]) : std::string("NA"));
    content += '\n';
    io::write_file_atomically(filename, content);
  }
#else
  ;
#endif
};
CTNN_INSTANCE(template void csv_logger::begin<void>();)
CTNN_INSTANCE(template void csv_logger::write<void>(const logs&, std::size_t);)

}  // namespace ctnn
