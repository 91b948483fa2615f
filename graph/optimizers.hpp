#pragma once
/// Optimizers as graph ops (TensorFlow 1.x's tf.train.*Optimizer).
///   gradient_descent_optimizer sgd{0.5};
///   auto train = sgd.minimize(loss);                  // run it as a target every step
///   adam_optimizer adam{0.001};
///   auto pairs = adam.compute_gradients(loss);         // (gradient, variable)
///   auto step = adam.apply_gradients(pairs);
/// Gradients are placed as gradients() places them: by default in the device scope active where
/// minimize / compute_gradients is called (TensorFlow 1.x's default), beside each forward op
/// with gradient_options::colocate_gradients_with_ops.
///   { auto dev = g.device("/job:worker/task:1"); train = sgd.minimize(loss); }  // grads there
/// Update ops ("ApplyGradientDescent", "ApplyMomentum", "ApplyAdam") are colocated with their
/// variable whatever the scope, so when a variable lives on a parameter server its update runs
/// there. Slot variables (momentum accumulators, Adam's m and v) are created next to their
/// variable and are not trainable.

#include "graph/gradients.hpp"
#include "graph/graph.hpp"

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace actorflow {

using gradient_and_variable = std::pair<output, variable>;

class optimizer {
public:
  virtual ~optimizer() = default;

  /// Gradients of `loss` for `vars` (default: the graph's trainable variables), built by
  /// gradients() with `options` (default: in the caller's device scope). Pairs whose gradient
  /// is invalid (the loss does not depend on the variable) are left out.
  std::vector<gradient_and_variable> compute_gradients(output loss, std::vector<variable> vars = {},
                                                       const gradient_options& options = {});
  /// One op that applies every pair once; `name` is its node name.
  virtual output apply_gradients(const std::vector<gradient_and_variable>& pairs,
                                 const std::string& name = "") = 0;
  /// compute_gradients (with `options`) then apply_gradients.
  output minimize(output loss, std::vector<variable> vars = {},
                  const gradient_options& options = {});

  /// Makes the learning rate this scalar tensor (fed, or computed each step as a decay schedule
  /// is) instead of the number given at construction, for the updates built afterwards; it is
  /// cast to each variable's dtype. TF's optimizers take either.
  void set_learning_rate(output rate) { learning_rate_tensor_ = rate; }
  bool has_learning_rate_tensor() const { return learning_rate_tensor_.valid(); }

protected:
  /// The learning rate for a variable of `type`: set_learning_rate's tensor, cast where its
  /// dtype differs, or `value` as a constant.
  output learning_rate_for(graph& g, dtype type, double value) const;

  /// A non-trainable slot variable colocated with `var` ("<var>/<slot>"), every element
  /// `initial` (zeros by default).
  variable make_slot(const variable& var, const std::string& slot, double initial = 0);

private:
  output learning_rate_tensor_;
};

class gradient_descent_optimizer : public optimizer {
public:
  explicit gradient_descent_optimizer(double learning_rate) : learning_rate_(learning_rate) {}
  output apply_gradients(const std::vector<gradient_and_variable>& pairs,
                         const std::string& name = "") override;
  double learning_rate() const { return learning_rate_; }

private:
  double learning_rate_;
};

class momentum_optimizer : public optimizer {
public:
  momentum_optimizer(double learning_rate, double momentum, bool use_nesterov = false)
    : learning_rate_(learning_rate), momentum_(momentum), use_nesterov_(use_nesterov) {}
  output apply_gradients(const std::vector<gradient_and_variable>& pairs,
                         const std::string& name = "") override;

private:
  double learning_rate_;
  double momentum_;
  bool use_nesterov_;
};

/// TF's AdagradOptimizer: accum += grad^2, var -= lr * grad / sqrt(accum), the accumulator
/// ("<var>/Adagrad") starting at initial_accumulator_value.
class adagrad_optimizer : public optimizer {
public:
  explicit adagrad_optimizer(double learning_rate, double initial_accumulator_value = 0.1)
    : learning_rate_(learning_rate), initial_accumulator_value_(initial_accumulator_value) {}
  output apply_gradients(const std::vector<gradient_and_variable>& pairs,
                         const std::string& name = "") override;

private:
  double learning_rate_;
  double initial_accumulator_value_;
};

/// TF1's AdamOptimizer; a sparse gradient (an embedding's) is applied densely as TF1 does (every
/// row's moments decay), or with `lazy` (TF's LazyAdamOptimizer) to its rows only, moments and
/// all (SparseApplyAdam).
class adam_optimizer : public optimizer {
public:
  explicit adam_optimizer(double learning_rate = 0.001, double beta1 = 0.9, double beta2 = 0.999,
                          double epsilon = 1e-8, bool lazy = false)
    : learning_rate_(learning_rate), beta1_(beta1), beta2_(beta2), epsilon_(epsilon), lazy_(lazy) {}
  output apply_gradients(const std::vector<gradient_and_variable>& pairs,
                         const std::string& name = "") override;

private:
  double learning_rate_, beta1_, beta2_, epsilon_;
  bool lazy_;
};

/// TF1's FtrlOptimizer (FTRL-Proximal, McMahan et al. 2013; devices/ftrl.hpp has the update):
/// slots "<var>/Ftrl" (the accumulator, starting at initial_accumulator_value) and "<var>/Ftrl_1"
/// (linear, zeros). ApplyFtrl, or ApplyFtrlV2 when l2_shrinkage is not 0; a sparse gradient (an
/// embedding's) goes to SparseApplyFtrl(V2), deduplicated, applied to its rows only. Invalid
/// hyperparameters (learning_rate <= 0, learning_rate_power > 0, a negative initial accumulator or
/// regularisation strength) are recorded as the graph's error when the update is built.
class ftrl_optimizer : public optimizer {
public:
  explicit ftrl_optimizer(double learning_rate, double learning_rate_power = -0.5,
                          double initial_accumulator_value = 0.1, double l1 = 0, double l2 = 0,
                          double l2_shrinkage = 0)
    : learning_rate_(learning_rate), learning_rate_power_(learning_rate_power),
      initial_accumulator_value_(initial_accumulator_value), l1_(l1), l2_(l2),
      l2_shrinkage_(l2_shrinkage) {}
  output apply_gradients(const std::vector<gradient_and_variable>& pairs,
                         const std::string& name = "") override;

private:
  double learning_rate_, learning_rate_power_, initial_accumulator_value_, l1_, l2_, l2_shrinkage_;
};

} // namespace actorflow
