#pragma once
/// The models actorflow-train trains, shared with the benchmarks so both measure the same graph.
///   graph g;  g.seed = 1;
///   auto opt = make_optimizer("sgd", 0.1);
///   auto m = build_mlp(g, *opt);     // feed m.images [b,784] and m.labels [b,10]; run m.train

#include "graph/graph.hpp"
#include "graph/optimizers.hpp"

#include <memory>
#include <string>
#include <vector>

namespace actorflow::train {

/// "sgd", "momentum" (0.9) or "adam".
std::unique_ptr<optimizer> make_optimizer(const std::string& name, double learning_rate);

struct mlp_model {
  output images, labels, logits, loss, correct, train;
  std::vector<variable> weights;
};

/// 784-256-128-10 ReLU network, Glorot-uniform weights (seeded by the graph seed), zero biases,
/// mean softmax cross-entropy; `correct` counts the batch's right answers.
mlp_model build_mlp(graph& g, optimizer& opt);

} // namespace actorflow::train
