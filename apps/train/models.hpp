#pragma once
/// The models actorflow-train trains, shared with the benchmarks so both measure the same graph.
///   graph g;  g.seed = 1;
///   auto opt = make_optimizer("sgd", 0.1);
///   auto m = build_mlp(g, *opt);     // feed m.images [b,784] and m.labels [b,10]; run m.train

#include "graph/graph.hpp"
#include "graph/optimizers.hpp"
#include "graph/status.hpp"

#include <memory>
#include <string>
#include <vector>

namespace actorflow::train {

/// "sgd", "momentum" (0.9) or "adam".
std::unique_ptr<optimizer> make_optimizer(const std::string& name, double learning_rate);

/// The Fashion-MNIST classifiers: build_mlp's, build_cnn's and the recurrent one's.
enum class classifier { mlp, cnn, rnn };

/// "mlp", "cnn" or "rnn"; an error naming the choices otherwise.
result<classifier> classifier_named(const std::string& name);

/// A Fashion-MNIST classifier (the MLP or the CNN): fed images [b,784] and one-hot labels [b,10].
struct classifier_model {
  output images, labels, logits, loss, correct, train;
  std::vector<variable> weights;
};

/// 784-256-128-10 ReLU network, Glorot-uniform weights (seeded by the graph seed), zero biases,
/// mean softmax cross-entropy; `correct` counts the batch's right answers.
classifier_model build_mlp(graph& g, optimizer& opt);

/// A LeNet-style CNN on the same inputs, reshaped to [b,28,28,1] (NHWC): 5x5 convolutions of 16
/// and 32 filters (VALID), each with bias, ReLU and 2x2 max pooling, then dense 512-128-10.
/// Glorot-uniform weights (seeded by the graph seed), zero biases, mean softmax cross-entropy.
classifier_model build_cnn(graph& g, optimizer& opt);

/// build_mlp, build_cnn, or for classifier::rnn a recurrent classifier reading each image as
/// 28 steps of 28 pixels (its rows): a tanh cell of 128 units, h' = tanh(x_t W + h U + b) from
/// h = 0, run by a while_loop (graph/control_flow.hpp), then dense 128-10 on the last h.
/// Glorot-uniform weights (seeded by the graph seed), zero biases, mean softmax cross-entropy.
classifier_model build_classifier(graph& g, optimizer& opt, classifier kind);

/// Where the data-parallel MLP runs: its variables on the ps tasks (round robin, by
/// replica_device_setter), one tower per worker task.
struct replica_layout {
  std::string ps_job = "ps";
  int ps_tasks = 1;
  std::string worker_job = "worker";
  int worker_tasks = 2;
  /// Towers on these devices of one process instead of on worker tasks (SPEC's several GPUs:
  /// "/gpu:0", "/gpu:1"), with the variables, the averaging and the update on
  /// `variable_device`; empty: the jobs above.
  std::vector<std::string> tower_devices;
  std::string variable_device = "/cpu:0";
  /// With tower_devices: MirroredStrategy's layout instead: a copy of every variable on each
  /// tower's device, all starting from the first copy's initial values, and each tower applying
  /// the AllReduce mean of the towers' gradients to its own copy, so the copies stay equal.
  bool mirrored = false;
};

/// One worker's copy of the model, fed its share of each batch.
struct mlp_tower {
  output images, labels, loss, correct;
};

struct data_parallel_mlp {
  std::vector<mlp_tower> towers;
  /// The mean of the towers' losses, and the sum of their right answers.
  output loss, correct;
  /// Applies the towers' averaged gradients on the parameter servers.
  output train;
  std::vector<variable> weights;
};

/// The MLP of build_mlp (or the CNN: `kind`) trained in-graph data parallel (TensorFlow's in-graph replication):
/// each tower computes gradients on its worker for its share of the batch; each gradient is
/// averaged next to its variable on the ps, where the optimizer applies it. With equal shares
/// the update equals build_mlp's on the whole batch. Errors: a layout the setter refuses.
result<data_parallel_mlp> build_data_parallel_mlp(graph& g, optimizer& opt,
                                                  const replica_layout& layout,
                                                  classifier kind = classifier::mlp);


/// SPEC's classic linear regression: x = 100 uniform floats (seeded), y = 0.1 x + 0.3,
/// Weights uniform in [-1, 1), biases zero, loss = mean((W x + b - y)^2), trained by `opt`.
/// Each field of `devices` pins one part ("" leaves it unpinned); the in-graph example uses
/// /job:canshu/task:0, /job:canshu/task:1, /job:gongzuo/task:0 and /job:gongzuo/task:1.
struct linreg_devices {
  std::string weights, biases, model, optimizer;
};

struct linreg_model {
  variable weights, biases;
  output prediction, loss, train;
};

linreg_model build_linreg(graph& g, optimizer& opt, std::uint64_t seed = 1,
                          const linreg_devices& devices = {},
                          const gradient_options& gradients = {});

/// The SPEC example's pins: jobs "canshu" (variables) and "gongzuo" (model, optimizer).
linreg_devices classic_in_graph_devices();

} // namespace actorflow::train
