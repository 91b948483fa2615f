#pragma once
/// FTRL-Proximal's update (McMahan et al. 2013, as TensorFlow's training_ops compute it for
/// ApplyFtrl, ApplyFtrlV2, SparseApplyFtrl and SparseApplyFtrlV2), element by element, shared by
/// the dense and sparse CPU kernels and the hash embedding tables so that they cannot disagree:
///   ftrl_parameters<float> p{lr, l1, l2, l2_shrinkage, lr_power};
///   AF_RETURN_IF_ERROR(check_ftrl_parameters(p, "node 'update_w/ApplyFtrl'"));
///   ftrl_update(var, accum, linear, grad, n, p);        // in place, n elements
/// Plain C++ (no Eigen), so any device folder may include it.

#include "graph/status.hpp"

#include <cmath>
#include <cstdint>
#include <string>

namespace actorflow {

/// FTRL's hyperparameters for one update. l2_shrinkage 0 is ApplyFtrl (V1); otherwise the
/// gradient that enters `linear` is shrunk towards zero: grad + 2 l2_shrinkage var (ApplyFtrlV2;
/// the accumulator still sums the plain gradient's squares).
template <class T>
struct ftrl_parameters {
  T learning_rate;
  T l1;
  T l2;
  T l2_shrinkage;
  T learning_rate_power;
};

/// TF's kernel checks: lr > 0, l1, l2, l2_shrinkage >= 0, lr_power <= 0; the error names `what`.
template <class T>
status check_ftrl_parameters(const ftrl_parameters<T>& p, const std::string& what) {
  auto bad = [&](const char* name, T value, const char* rule) {
    return make_error(errc::invalid_argument, what + ": FTRL's " + name + " must be " + rule +
                                                ", got " + std::to_string(static_cast<double>(value)));
  };
  if (!(p.learning_rate > T(0)))
    return bad("learning_rate", p.learning_rate, "positive");
  if (!(p.l1 >= T(0)))
    return bad("l1", p.l1, "non-negative");
  if (!(p.l2 >= T(0)))
    return bad("l2", p.l2, "non-negative");
  if (!(p.l2_shrinkage >= T(0)))
    return bad("l2_shrinkage", p.l2_shrinkage, "non-negative");
  if (!(p.learning_rate_power <= T(0)))
    return bad("learning_rate_power", p.learning_rate_power, "zero or negative");
  return {};
}

/// For each of the `n` elements (arrays may not overlap each other, each is read before written):
///   accum_new = accum + grad^2
///   linear += (grad + 2 l2_shrinkage var) - (accum_new^-p - accum^-p) / lr * var
///   quadratic = accum_new^-p / lr + 2 l2
///   var = |linear| > l1 ? (sign(linear) l1 - linear) / quadratic : 0
///   accum = accum_new
/// with p = learning_rate_power; p = -0.5 takes square roots, as TF's kernels do.
template <class T>
void ftrl_update(T* var, T* accum, T* linear, const T* grad, std::int64_t n,
                 const ftrl_parameters<T>& p) {
  const bool root = p.learning_rate_power == T(-0.5);
  auto power = [&](T x) { return root ? std::sqrt(x) : std::pow(x, -p.learning_rate_power); };
  for (std::int64_t i = 0; i < n; ++i) {
    const T g = grad[i];
    const T v = var[i];
    const T a = accum[i];
    const T a_new = a + g * g;
    const T shrunk = g + T(2) * p.l2_shrinkage * v;
    const T l = linear[i] + shrunk - (power(a_new) - power(a)) / p.learning_rate * v;
    const T quadratic = power(a_new) / p.learning_rate + T(2) * p.l2;
    var[i] = std::abs(l) > p.l1 ? ((l > T(0) ? p.l1 : -p.l1) - l) / quadratic : T(0);
    linear[i] = l;
    accum[i] = a_new;
  }
}

} // namespace actorflow
