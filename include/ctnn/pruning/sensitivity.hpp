// ctnn/pruning/sensitivity.hpp — which layers tolerate how much pruning, without retraining.
//
// sensitivity_analysis(model, loss, validation, metric, {0.5, 0.8, 0.9})
// copies the trained model once per (layer, sparsity), prunes that one
// layer's kernel to the sparsity by magnitude (every dense and conv2d layer,
// and the kernel and recurrent_kernel of every simple_rnn, lstm and gru, each
// on its own; pruned wrappers included; the others untouched), evaluates the copy on the
// validation dataset (evaluate in train/fit.hpp) and returns the table
// layer x sparsity -> metric, with the unpruned baseline. suggest(max_drop)
// gives, per layer, the largest sparsity whose metric stays within max_drop
// of the baseline (0 when none does): the per-layer sparsities to start a
// pruned network type from. str() prints the table. The model is not changed.
#pragma once
#include <cstddef>
#include <initializer_list>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "../train/fit.hpp"
#include "masks.hpp"

namespace ctnn {

struct sensitivity_table {
  std::string metric;                      // the metric's name
  double baseline = 0;                     // the unpruned model's metric
  std::vector<double> sparsities;          // columns
  std::vector<std::size_t> layers;         // rows: positions (1 = first layer after input)
  std::vector<std::string> layer_names;
  std::vector<std::vector<double>> value;  // value[row][column]

  std::vector<double> suggest(double max_drop) const {
    std::vector<double> r(layers.size(), 0.0);
    for (std::size_t i = 0; i < layers.size(); ++i)
      for (std::size_t j = 0; j < sparsities.size(); ++j)
        if (value[i][j] >= baseline - max_drop && sparsities[j] > r[i]) r[i] = sparsities[j];
    return r;
  }
  std::string str() const {
    std::string s = "layer";
    char buf[64];
    for (double sp : sparsities) {
      std::snprintf(buf, sizeof buf, "  %6.0f%%", 100 * sp);
      s += buf;
    }
    std::snprintf(buf, sizeof buf, "   (%s, unpruned %.4f)\n", metric.c_str(), baseline);
    s += buf;
    for (std::size_t i = 0; i < layers.size(); ++i) {
      std::snprintf(buf, sizeof buf, "%5zu", layers[i]);
      s += buf;
      for (double v : value[i]) {
        std::snprintf(buf, sizeof buf, "  %7.4f", v);
        s += buf;
      }
      s += "   " + layer_names[i] + "\n";
    }
    return s;
  }
};

template <Model M, class L, data::Dataset D, class Metric>
sensitivity_table sensitivity_analysis(const M& m, const L& loss, const D& validation, Metric metric,
                                       const std::vector<double>& sparsities) {
  using MT = std::remove_cvref_t<M>;
  for (double s : sparsities)
    if (!(s >= 0 && s < 1))
      throw std::invalid_argument("sensitivity_analysis: every sparsity must be >= 0 and < 1, got " +
                                  detail::format_number(s));
  sensitivity_table t;
  t.metric = metric.name();
  t.sparsities = sparsities;
  MT copy = m;
  t.baseline = evaluate(copy, loss, validation, metric)[t.metric];
  using layers = typename MT::layers;
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    (void)std::initializer_list<int>{(
        [&] {
          using Ly = ctnn::detail::type_at_t<I, layers>;
          if constexpr (ctnn::detail::prunable_layer<Ly>) {
            t.layers.push_back(I + 1);
            t.layer_names.push_back(Ly::name());
            std::vector<double> row;
            std::vector<std::uint8_t> mask;
            for (double s : sparsities) {
              MT c = m;
              // the kernels through a host view of the parameters (the model's memory on a host backend);
              // a recurrent layer's kernel and recurrent_kernel each on its own, as prune_low_magnitude
              using W = typename MT::variable_type;
              const std::size_t at = std::size_t(c.template layer_parameters<I>().data() - c.parameters().data());
              auto v = c.host_region(role::parameter);
              W* w = reinterpret_cast<W*>(v.data()) + at;
              for (const auto& p : ctnn::detail::pruned_weights_of<Ly>()) {
                mask.resize(p.rows * p.cols);
                pruning::compute_mask<unstructured>(w + p.at, p.rows, p.cols, s, mask.data());
                for (std::size_t i = 0; i < mask.size(); ++i)
                  if (!mask[i]) w[p.at + i] = 0;
              }
              v.commit();
              row.push_back(evaluate(c, loss, validation, metric)[t.metric]);
            }
            t.value.push_back(std::move(row));
          }
        }(),
        0)...};  // a list, not a fold: clang nests a fold of N terms N deep (limit 256)
  }(std::make_index_sequence<std::tuple_size_v<layers>>{});
  return t;
}

}  // namespace ctnn
