// ctnn/train/history.hpp — per-epoch logs and the history fit returns.
//
// logs: ordered (name, value) pairs, as Keras' logs dict ("loss",
// "accuracy", "val_loss", ...). history: for every key, one value per epoch;
// history["loss"] throws std::out_of_range naming the key and the keys there
// are.
#pragma once
#include <cstddef>
#include <map>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace ctnn {

struct logs {
  std::vector<std::pair<std::string, double>> items;

  void set(const std::string& k, double v) {
    for (auto& [name, value] : items)
      if (name == k) {
        value = v;
        return;
      }
    items.emplace_back(k, v);
  }
  bool contains(const std::string& k) const {
    for (auto& [name, value] : items)
      if (name == k) return true;
    return false;
  }
  double operator[](const std::string& k) const {
    for (auto& [name, value] : items)
      if (name == k) return value;
    throw std::out_of_range("logs: no entry '" + k + "'");
  }
};

struct history {
  std::vector<std::string> keys;  // in first-seen order
  std::map<std::string, std::vector<double>> values;

  void append(const logs& l) {
    for (auto& [k, v] : l.items) {
      if (!values.count(k)) keys.push_back(k);
      values[k].push_back(v);
    }
  }
  std::size_t epochs() const { return values.empty() ? 0 : values.begin()->second.size(); }
  bool contains(const std::string& k) const { return values.count(k) != 0; }
  const std::vector<double>& operator[](const std::string& k) const {
    auto it = values.find(k);
    if (it == values.end()) {
      std::string have;
      for (auto& key : keys) have += (have.empty() ? "" : ", ") + key;
      throw std::out_of_range("history: no key '" + k + "' (it has: " + have + ")");
    }
    return it->second;
  }
};

}  // namespace ctnn
