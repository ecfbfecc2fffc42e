// ctnn/train/history.hpp — per-epoch logs and the history fit returns.
//
// logs: ordered (name, value) pairs, as Keras' logs dict ("loss",
// "accuracy", "val_loss", ...). history: for every key, one value per epoch;
// history["loss"] throws std::out_of_range naming the key and the keys there
// are. input_verdict(epoch) says whether that epoch was input-bound;
// autotune[epoch] holds the autotuner's decisions printed during it.
#pragma once
#include <cstddef>
#include <map>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "input_analysis.hpp"
#include "../core/separate.hpp"

namespace ctnn {

struct logs {
  std::vector<std::pair<std::string, double>> items;

  // Compiled once in the compiled part (core/separate.hpp), not in every program that fits;
  // header-only, member templates of nothing (CTNN_LAZY: compiled only where a program calls them).
  CTNN_LAZY void set(const std::string& k, double v);
  CTNN_LAZY void set(const std::string& prefix, const std::string& k, double v);  // set(prefix + k, v): "val_" + "loss"
  CTNN_LAZY bool contains(const std::string& k) const;
  CTNN_LAZY double operator[](const std::string& k) const;
};

struct history {
  std::vector<std::string> keys;  // in first-seen order
  std::map<std::string, std::vector<double>> values;
  // Per epoch (from 0), every decision the input-pipeline autotuner printed during it, in order
  // (data/autotune.hpp: the text after "ctnn autotune (epoch e+1, step s): "); empty when it
  // printed none (or the training dataset has no tuner). The latest decision, whenever it was
  // printed, is dataset.autotuner().explanation().
  std::vector<std::vector<std::string>> autotune;

  history() = default;
  history(const history&) = default;
  history(history&&) = default;
  history& operator=(const history&) = default;
  history& operator=(history&&) = default;
  ~history();  // out of line: the maps' and vectors' destruction compiled once (core/separate.hpp)

  CTNN_LAZY void append(const logs& l);
  // fit's end of an epoch: append(l), then a new entry of autotune holding said[from...] (said may be null).
  CTNN_LAZY void append_epoch(const logs& l, const std::vector<std::string>* said, std::size_t from);
  CTNN_LAZY std::size_t epochs() const;
  CTNN_LAZY bool contains(const std::string& k) const;
  CTNN_LAZY const std::vector<double>& operator[](const std::string& k) const;
  // "moderately input-bound: 7.3% of step time is spent waiting for data" (0-based epoch).
  CTNN_LAZY std::string input_verdict(std::size_t epoch) const;
};

#if CTNN_DEFINITIONS
CTNN_LAZY_DEFINITION CTNN_DECL void logs::set(const std::string& k, double v) {
  for (auto& [name, value] : items)
    if (name == k) {
      value = v;
      return;
    }
  items.emplace_back(k, v);
}
CTNN_LAZY_DEFINITION CTNN_DECL void logs::set(const std::string& prefix, const std::string& k, double v) { set(prefix + k, v); }
CTNN_LAZY_DEFINITION CTNN_DECL bool logs::contains(const std::string& k) const {
  for (auto& [name, value] : items)
    if (name == k) return true;
  return false;
}
CTNN_LAZY_DEFINITION CTNN_DECL double logs::operator[](const std::string& k) const {
  for (auto& [name, value] : items)
    if (name == k) return value;
  throw std::out_of_range("logs: no entry '" + k + "'");
}

CTNN_DECL history::~history() = default;
CTNN_LAZY_DEFINITION CTNN_DECL std::size_t history::epochs() const { return values.empty() ? 0 : values.begin()->second.size(); }
CTNN_LAZY_DEFINITION CTNN_DECL bool history::contains(const std::string& k) const { return values.count(k) != 0; }
CTNN_LAZY_DEFINITION CTNN_DECL void history::append(const logs& l) {
  for (auto& [k, v] : l.items) {
    if (!values.count(k)) keys.push_back(k);
    values[k].push_back(v);
  }
}
CTNN_LAZY_DEFINITION CTNN_DECL void history::append_epoch(const logs& l, const std::vector<std::string>* said, std::size_t from) {
  append(l);
  autotune.emplace_back();  // the decisions printed during this epoch, the first epoch's too
  if (said)
    for (std::size_t i = from; i < said->size(); ++i) autotune.back().push_back((*said)[i]);
}
CTNN_LAZY_DEFINITION CTNN_DECL const std::vector<double>& history::operator[](const std::string& k) const {
  auto it = values.find(k);
  if (it == values.end()) {
    std::string have;
    for (auto& key : keys) have += (have.empty() ? "" : ", ") + key;
    throw std::out_of_range("history: no key '" + k + "' (it has: " + have + ")");
  }
  return it->second;
}
CTNN_LAZY_DEFINITION CTNN_DECL std::string history::input_verdict(std::size_t epoch) const {
  const auto& v = (*this)["input_share"];
  if (epoch >= v.size())
    throw std::out_of_range("history: no epoch " + std::to_string(epoch) + " (it has " + std::to_string(v.size()) + ")");
  return ctnn::input_verdict(v[epoch]);
}
#endif

}  // namespace ctnn
