// ctnn/metrics/classification_report.hpp — confusion matrix and per-class precision, recall, F1.
//
// classification_report is a metric (ctnn::Metric) that evaluate() and fit()
// take like any other: it counts a confusion matrix over the samples it sees
// (row = true class, column = predicted class = argmax of the output row;
// sparse labels, or one-hot/dense targets whose argmax is the class) and logs
// "macro_f1". Copies share one table, so the object the caller keeps holds
// the counts after evaluate(m, loss, ds, report) returns:
//   report.confusion(t, p), support(c), precision(c), recall(c), f1(c),
//   accuracy(), macro_f1(), weighted_f1(), str(class_names)
// Definitions are scikit-learn's: precision = tp / (tp + fp), recall =
// tp / (tp + fn), F1 = 2 p r / (p + r); a ratio whose denominator is 0 is 0
// (sklearn's zero_division=0). The number of classes is the output width;
// a label outside it throws std::out_of_range naming the sample, as the
// accuracy metrics do. An output of width 1 is not a classification: it is
// refused at compile time.
#pragma once
#include <algorithm>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <iterator>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "detail.hpp"

namespace ctnn {

// A class template of nothing (classification_report = basic_classification_report<>)
// so that its member functions are compiled only in programs that use it, not
// in every translation unit that includes ctnn/ctnn.hpp (docs/performance.md).
template <class = void>
class basic_classification_report {
 public:
  std::string name() const { return "macro_f1"; }
  void reset() {
    t_->classes = 0;
    t_->counts.clear();
  }
  double result() const { return macro_f1(); }

  template <std::size_t N, class T>
  void update(const T* y, const std::int32_t* labels, std::size_t batch) {
    static_assert(N >= 2, "classification_report: the output has width 1; it needs one output per class (>= 2)");
    for (std::size_t i = 0; i < batch; ++i) detail::check_label("classification_report", labels[i], i, N);
    resize(N);
    for (std::size_t i = 0; i < batch; ++i) ++at(std::size_t(labels[i]), detail::argmax(y + i * N, N));
  }
  template <std::size_t N, class T>
  void update(const T* y, const T* targets, std::size_t batch) {
    static_assert(N >= 2, "classification_report: the output has width 1; it needs one output per class (>= 2)");
    resize(N);
    for (std::size_t i = 0; i < batch; ++i) ++at(detail::argmax(targets + i * N, N), detail::argmax(y + i * N, N));
  }

  std::size_t classes() const noexcept { return t_->classes; }
  // Samples of true class t predicted as p.
  std::uint64_t confusion(std::size_t t, std::size_t p) const {
    check(t, "true class");
    check(p, "predicted class");
    return t_->counts[t * t_->classes + p];
  }
  std::uint64_t total() const {
    std::uint64_t s = 0;
    for (auto c : t_->counts) s += c;
    return s;
  }
  std::uint64_t support(std::size_t c) const {  // samples whose true class is c
    check(c, "class");
    std::uint64_t s = 0;
    for (std::size_t p = 0; p < t_->classes; ++p) s += t_->counts[c * t_->classes + p];
    return s;
  }
  std::uint64_t predicted(std::size_t c) const {  // samples predicted as c
    check(c, "class");
    std::uint64_t s = 0;
    for (std::size_t t = 0; t < t_->classes; ++t) s += t_->counts[t * t_->classes + c];
    return s;
  }
  double precision(std::size_t c) const { return ratio(confusion(c, c), predicted(c)); }
  double recall(std::size_t c) const { return ratio(confusion(c, c), support(c)); }
  double f1(std::size_t c) const {
    const double p = precision(c), r = recall(c);
    return p + r > 0 ? 2 * p * r / (p + r) : 0.0;
  }
  double accuracy() const {
    std::uint64_t d = 0;
    for (std::size_t c = 0; c < t_->classes; ++c) d += t_->counts[c * t_->classes + c];
    return ratio(d, total());
  }
  double macro_f1() const {
    if (t_->classes == 0) return 0.0;
    double s = 0;
    for (std::size_t c = 0; c < t_->classes; ++c) s += f1(c);
    return s / double(t_->classes);
  }
  double weighted_f1() const {
    double s = 0;
    for (std::size_t c = 0; c < t_->classes; ++c) s += f1(c) * double(support(c));
    return ratio_d(s, double(total()));
  }

  // A table like scikit-learn's classification_report, then the confusion
  // matrix; `names` (optional) labels the classes (fashion_mnist::class_names).
  // Any range of names works too: report.str(data::fashion_mnist::class_names).
  template <class R>
    requires requires(const R& r) {
      { *std::begin(r) } -> std::convertible_to<std::string_view>;
      std::end(r);
    }
  std::string str(const R& names) const {
    return str(std::vector<std::string_view>(std::begin(names), std::end(names)));
  }
  std::string str(const std::vector<std::string_view>& names = {}) const {
    if (!names.empty() && names.size() != t_->classes)
      throw std::invalid_argument("classification_report: " + std::to_string(names.size()) + " class names for " +
                                  std::to_string(t_->classes) + " classes");
    auto label = [&](std::size_t c) { return names.empty() ? std::to_string(c) : std::string(names[c]); };
    std::size_t w = 8;
    for (std::size_t c = 0; c < t_->classes; ++c) w = std::max(w, label(c).size());
    std::string s = pad("", w) + "  precision     recall         f1    support\n";
    char buf[96];
    for (std::size_t c = 0; c < t_->classes; ++c) {
      std::snprintf(buf, sizeof buf, "  %9.4f  %9.4f  %9.4f  %9llu\n", precision(c), recall(c), f1(c),
                    static_cast<unsigned long long>(support(c)));
      s += pad(label(c), w) + buf;
    }
    std::snprintf(buf, sizeof buf, "  %9s  %9s  %9.4f  %9llu\n", "", "", accuracy(),
                  static_cast<unsigned long long>(total()));
    s += pad("accuracy", w) + buf;
    std::snprintf(buf, sizeof buf, "  %9s  %9s  %9.4f\n", "", "", macro_f1());
    s += pad("macro f1", w) + buf;
    s += "confusion matrix (rows: true class, columns: predicted)\n";
    for (std::size_t t = 0; t < t_->classes; ++t) {
      s += pad(label(t), w);
      for (std::size_t p = 0; p < t_->classes; ++p) {
        std::snprintf(buf, sizeof buf, " %6llu", static_cast<unsigned long long>(t_->counts[t * t_->classes + p]));
        s += buf;
      }
      s += '\n';
    }
    return s;
  }

 private:
  struct table {
    std::size_t classes = 0;
    std::vector<std::uint64_t> counts;  // classes x classes, row = true class
  };
  std::shared_ptr<table> t_ = std::make_shared<table>();

  void resize(std::size_t n) {
    if (t_->classes == n) return;
    if (t_->classes != 0)
      throw std::invalid_argument("classification_report: counted " + std::to_string(t_->classes) +
                                  " classes, now given an output of width " + std::to_string(n) +
                                  "; reset() it between models");
    t_->classes = n;
    t_->counts.assign(n * n, 0);
  }
  std::uint64_t& at(std::size_t t, std::size_t p) { return t_->counts[t * t_->classes + p]; }
  void check(std::size_t c, const char* what) const {
    if (c >= t_->classes)
      throw std::out_of_range("classification_report: " + std::string(what) + " " + std::to_string(c) +
                              " is not one of the " + std::to_string(t_->classes) + " classes");
  }
  static double ratio(std::uint64_t a, std::uint64_t b) { return b ? double(a) / double(b) : 0.0; }
  static double ratio_d(double a, double b) { return b > 0 ? a / b : 0.0; }
  static std::string pad(std::string s, std::size_t w) {
    if (s.size() < w) s.insert(0, w - s.size(), ' ');
    return s;
  }
};

using classification_report = basic_classification_report<>;

}  // namespace ctnn
