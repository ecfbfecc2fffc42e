// ctnn/train/monitor.hpp — what the monitoring callbacks share.
//
// monitor_mode: automatic, min or max. automatic follows Keras'
// ReduceLROnPlateau/ModelCheckpoint rule: maximize when the monitored name
// contains "acc", minimize otherwise (loss, mean_absolute_error, ...); and, as
// Keras 3's EarlyStopping reads those metrics' direction "up", maximize
// auc, precision and recall (with or without "val_").
// monitored(logs, name, who) returns logs[name] or throws
// std::invalid_argument naming the callback, the key and the keys there are
// (Keras only warns; ctnn stops before a misconfigured run goes on silently).
#pragma once
#include <stdexcept>
#include <string>
#include <string_view>

#include "history.hpp"

namespace ctnn {

enum class monitor_mode { automatic, min, max };

namespace detail {

inline bool maximizes(std::string_view monitor, monitor_mode m) {
  if (m == monitor_mode::automatic) {
    const std::string_view base = monitor.starts_with("val_") ? monitor.substr(4) : monitor;
    return monitor.find("acc") != std::string_view::npos || base == "auc" || base == "precision" || base == "recall";
  }
  return m == monitor_mode::max;
}

// (CTNN_LAZY, core/separate.hpp: header-only a template of nothing, as a plain inline function
// calling logs' members would compile them in every program; in the compiled part otherwise)
CTNN_LAZY CTNN_DECL double monitored(const logs& l, const std::string& monitor, const char* who)
#if CTNN_DEFINITIONS
{
  if (!l.contains(monitor)) {
    std::string have;
    for (auto& [k, v] : l.items) have += (have.empty() ? "" : ", ") + k;
    throw std::invalid_argument(std::string(who) + ": the monitored value '" + monitor +
                                "' is not in the epoch logs (they have: " + have + ")");
  }
  return l[monitor];
}
#else
;
#endif

}  // namespace detail
}  // namespace ctnn
