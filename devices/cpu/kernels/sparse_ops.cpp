// The sparse ops' kernels (graph/sparse_ops.cpp defines the ops): IndexedSlices and
// UnsortedSegmentSumLike (rows summed into a dense tensor), Unique, UnsortedSegmentSum,
// _DeduplicateSlices, the scatter updates and the sparse optimizer updates. Row indices are
// int32 or int64; one out of range is an error naming it and the range. The updates touch the
// rows they name only, under the variable's lock (devices/variable_update.hpp); where a reader
// shares the stored buffer, the new value is a copy of the old with those rows changed.
#include "devices/cpu/kernels/kernel_util.hpp"
#include "devices/device.hpp"
#include "devices/ftrl.hpp"
#include "devices/variable_update.hpp"

#include <cmath>
#include <cstring>
#include <unordered_map>

namespace actorflow {

namespace {

using namespace cpu;

const update_rules cpu_update_rules{&check_as_status<&check_input>, false};

std::int64_t index_at(const tensor& indices, std::int64_t k) {
  return indices.type() == dtype::int32 ? indices.data<std::int32_t>()[k]
                                        : indices.data<std::int64_t>()[k];
}

bool check_index_input(kernel_context& ctx, int i) {
  if (i >= ctx.num_inputs())
    return check_input(ctx, i, dtype::int64);
  auto type = ctx.input(i).is_initialized() ? ctx.input(i).type() : dtype::int64;
  return check_input(ctx, i, type == dtype::int32 ? dtype::int32 : dtype::int64);
}

/// Elements per row of a tensor of `rows` rows.
std::int64_t row_size(const tensor& t) {
  auto& s = t.shape();
  std::int64_t n = 1;
  for (int i = 1; i < s.rank(); ++i)
    n *= s.dim(i);
  return n;
}

status out_of_range(const op_kernel& k, std::int64_t index, std::int64_t rows) {
  return make_error(errc::invalid_argument, k.op() + " node '" + k.name() + "': index " +
                                              std::to_string(index) + " is out of range [0, " +
                                              std::to_string(rows) + ")");
}

/// out (zeros of `shape`) += values' rows at indices: the dense form of an IndexedSlices.
template <class T>
void scatter_rows_into_zeros(kernel_context& ctx, const op_kernel& k, const tensor_shape& shape) {
  if (!check_input(ctx, 0, dtype_of<T>()) || !check_index_input(ctx, 1))
    return;
  auto& values = ctx.input(0);
  auto& indices = ctx.input(1);
  auto out = ctx.allocate_output(0, dtype_of<T>(), shape);
  auto* dst = out.template data<T>();
  std::fill(dst, dst + out.num_elements(), T(0));
  auto rows = shape.rank() > 0 ? shape.dim(0) : 1;
  auto width = out.num_elements() / std::max<std::int64_t>(rows, 1);
  if (values.num_elements() != indices.num_elements() * width)
    return ctx.fail(make_error(errc::invalid_argument,
                               k.op() + " node '" + k.name() + "': values of shape " +
                                 values.shape().to_string() + " are not " +
                                 std::to_string(indices.num_elements()) + " rows of " +
                                 shape.to_string()));
  const T* src = values.template data<T>();
  for (std::int64_t r = 0; r < indices.num_elements(); ++r) {
    auto at = index_at(indices, r);
    if (at < 0 || at >= rows)
      return ctx.fail(out_of_range(k, at, rows));
    view(dst + at * width, width) += view(src + r * width, width);
  }
}

template <class T>
class indexed_slices_kernel : public op_kernel {
public:
  explicit indexed_slices_kernel(const node& n)
    : op_kernel(n), shape_(n.attr_or<std::vector<std::int64_t>>("dense_shape", {})) {}
  void compute(kernel_context& ctx) override { scatter_rows_into_zeros<T>(ctx, *this, shape_); }

private:
  tensor_shape shape_;
};

/// Input 2 gives the shape only.
template <class T>
class unsorted_segment_sum_like_kernel : public op_kernel {
public:
  using op_kernel::op_kernel;
  void compute(kernel_context& ctx) override {
    if (ctx.num_inputs() != 3 || !ctx.input(2).is_initialized())
      return ctx.fail(make_error(errc::invalid_argument, "UnsortedSegmentSumLike needs 3 inputs"));
    scatter_rows_into_zeros<T>(ctx, *this, ctx.input(2).shape());
  }
};

template <class T>
class unsorted_segment_sum_kernel : public op_kernel {
public:
  using op_kernel::op_kernel;
  bool host_memory_input(int i) const override { return i == 2; }
  void compute(kernel_context& ctx) override {
    if (!check_index_input(ctx, 2))
      return;
    auto segments = index_at(ctx.input(2), 0);
    if (segments < 0)
      return ctx.fail(make_error(errc::invalid_argument, "UnsortedSegmentSum node '" + name() +
                                                           "': num_segments is negative"));
    std::vector<std::int64_t> dims{segments};
    for (int i = 1; i < ctx.input(0).shape().rank(); ++i)
      dims.push_back(ctx.input(0).shape().dim(i));
    scatter_rows_into_zeros<T>(ctx, *this, tensor_shape{dims});
  }
};

/// The distinct values in first-appearance order, and each element's position among them.
template <class T>
class unique_kernel : public op_kernel {
public:
  using op_kernel::op_kernel;
  void compute(kernel_context& ctx) override {
    if (!check_input(ctx, 0, dtype_of<T>()))
      return;
    auto& x = ctx.input(0);
    auto n = x.num_elements();
    std::unordered_map<T, std::int32_t> seen;
    seen.reserve(static_cast<std::size_t>(n));
    std::vector<T> distinct;
    auto idx = ctx.allocate_output(1, dtype::int32, x.shape());
    auto* positions = idx.template data<std::int32_t>();
    const T* values = x.template data<T>();
    for (std::int64_t i = 0; i < n; ++i) {
      auto [at, fresh] = seen.emplace(values[i], static_cast<std::int32_t>(distinct.size()));
      if (fresh)
        distinct.push_back(values[i]);
      positions[i] = at->second;
    }
    auto y = ctx.allocate_output(0, dtype_of<T>(),
                                 tensor_shape{std::vector<std::int64_t>{static_cast<std::int64_t>(distinct.size())}});
    std::copy(distinct.begin(), distinct.end(), y.template data<T>());
  }
};

/// The rows summed per distinct index: output 0 the indices, output 1 the sums.
template <class T>
class deduplicate_slices_kernel : public op_kernel {
public:
  using op_kernel::op_kernel;
  void compute(kernel_context& ctx) override {
    if (!check_input(ctx, 0, dtype_of<T>()) || !check_index_input(ctx, 1))
      return;
    auto& values = ctx.input(0);
    auto& indices = ctx.input(1);
    auto n = indices.num_elements();
    auto width = n > 0 ? values.num_elements() / n : row_size(values);
    if (values.num_elements() != n * width)
      return ctx.fail(make_error(errc::invalid_argument,
                                 "_DeduplicateSlices node '" + name() + "': " +
                                   std::to_string(n) + " indices for values of shape " +
                                   values.shape().to_string()));
    std::unordered_map<std::int64_t, std::int64_t> row_of;
    row_of.reserve(static_cast<std::size_t>(n));
    std::vector<std::int64_t> distinct;
    std::vector<std::int64_t> first_row;
    std::vector<std::int64_t> target(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i) {
      auto [at, fresh] = row_of.emplace(index_at(indices, i), static_cast<std::int64_t>(distinct.size()));
      if (fresh)
        distinct.push_back(at->first);
      target[static_cast<std::size_t>(i)] = at->second;
    }
    auto m = static_cast<std::int64_t>(distinct.size());
    auto ids = ctx.allocate_output(0, indices.type(), tensor_shape{std::vector<std::int64_t>{m}});
    for (std::int64_t i = 0; i < m; ++i) {
      if (indices.type() == dtype::int32)
        ids.template data<std::int32_t>()[i] = static_cast<std::int32_t>(distinct[static_cast<std::size_t>(i)]);
      else
        ids.template data<std::int64_t>()[i] = distinct[static_cast<std::size_t>(i)];
    }
    std::vector<std::int64_t> dims{m};
    for (int i = 1; i < values.shape().rank(); ++i)
      dims.push_back(values.shape().dim(i));
    auto sums = ctx.allocate_output(1, dtype_of<T>(), tensor_shape{dims});
    T* dst = sums.template data<T>();
    std::fill(dst, dst + sums.num_elements(), T(0));
    const T* src = values.template data<T>();
    for (std::int64_t i = 0; i < n; ++i)
      view(dst + target[static_cast<std::size_t>(i)] * width, width) += view(src + i * width, width);
  }
};

/// The sparse updates' common part: prepare the variables (input 0 and `Refs - 1` slots),
/// bring every fresh buffer up to the old value (only some rows change), check the rows, then
/// `update(row_in_variable, row_of_input, vars)` for each row, then commit.
template <class T, std::size_t Refs>
class sparse_update_base : public op_kernel {
public:
  explicit sparse_update_base(const node& n)
    : op_kernel(n), variables_(updated_variable_names(n, Refs)) {}

protected:
  template <class Update>
  void run(kernel_context& ctx, int rows_input, int indices_input, const std::vector<int>& scalars,
           Update&& update) {
    variable_update held{cpu_update_rules};
    auto prepared = held.prepare(ctx, *this, variables_, dtype_of<T>(), {}, scalars, {indices_input});
    if (!prepared.ok())
      return ctx.fail(std::move(prepared));
    auto vars = held.template variables<T, Refs>();
    auto total = held.num_elements();
    for (std::size_t i = 0; i < Refs; ++i)
      if (!held.in_place(i))
        std::memcpy(vars[i].out, vars[i].in, static_cast<std::size_t>(total) * sizeof(T));
    auto& rows = ctx.input(rows_input);
    auto& indices = ctx.input(indices_input);
    auto& var_shape = held.shape();
    auto extent = var_shape.rank() > 0 ? var_shape.dim(0) : 1;
    auto width = total / std::max<std::int64_t>(extent, 1);
    auto n = indices.num_elements();
    if (rows.num_elements() != n * width)
      return ctx.fail(make_error(errc::invalid_argument,
                                 op() + " node '" + name() + "': " + std::to_string(n) +
                                   " indices for rows of shape " + rows.shape().to_string() +
                                   " into variable shape " + var_shape.to_string()));
    for (std::int64_t r = 0; r < n; ++r)
      if (auto at = index_at(indices, r); at < 0 || at >= extent)
        return ctx.fail(out_of_range(*this, at, extent));
    const T* src = rows.template data<T>();
    for (std::int64_t r = 0; r < n; ++r)
      update(index_at(indices, r) * width, src + r * width, width, vars);
    held.commit(ctx);
  }

  static T scalar(const kernel_context& ctx, int i) { return ctx.input(i).data<T>()[0]; }

private:
  std::vector<std::string> variables_;
};

template <class T, int Kind>
class scatter_kernel : public sparse_update_base<T, 1> {
public:
  using sparse_update_base<T, 1>::sparse_update_base;
  void compute(kernel_context& ctx) override {
    this->run(ctx, 2, 1, {}, [](std::int64_t at, const T* row, std::int64_t width, auto& vars) {
      auto out = view(vars[0].out + at, width);
      auto in = view(row, width);
      if constexpr (Kind == 0)
        out += in;
      else if constexpr (Kind == 1)
        out -= in;
      else
        out = in;
    });
  }
};
template <class T>
using scatter_add_kernel = scatter_kernel<T, 0>;
template <class T>
using scatter_sub_kernel = scatter_kernel<T, 1>;
template <class T>
using scatter_update_kernel = scatter_kernel<T, 2>;

/// var[i] -= alpha * grad_row for each (i, grad_row).
template <class T>
class sparse_apply_gradient_descent_kernel : public sparse_update_base<T, 1> {
public:
  using sparse_update_base<T, 1>::sparse_update_base;
  void compute(kernel_context& ctx) override {
    if (ctx.num_inputs() != 4)
      return ctx.fail(make_error(errc::invalid_argument, "SparseApplyGradientDescent needs 4 inputs"));
    T alpha = ctx.input(1).is_initialized() ? this->scalar(ctx, 1) : T(0);
    this->run(ctx, 2, 3, {1}, [alpha](std::int64_t at, const T* grad, std::int64_t width, auto& vars) {
      view(vars[0].out + at, width) -= alpha * view(grad, width);
    });
  }
};

/// Per row: accum = accum * momentum + grad; var -= lr * accum (Nesterov: lr * (grad + momentum
/// * accum)); rows not named keep their accum (TF's SparseApplyMomentum).
template <class T>
class sparse_apply_momentum_kernel : public sparse_update_base<T, 2> {
public:
  explicit sparse_apply_momentum_kernel(const node& n)
    : sparse_update_base<T, 2>(n), use_nesterov_(n.attr_or<bool>("use_nesterov", false)) {}
  void compute(kernel_context& ctx) override {
    if (ctx.num_inputs() != 6)
      return ctx.fail(make_error(errc::invalid_argument, "SparseApplyMomentum needs 6 inputs"));
    T lr = ctx.input(2).is_initialized() ? this->scalar(ctx, 2) : T(0);
    T momentum = ctx.input(5).is_initialized() ? this->scalar(ctx, 5) : T(0);
    bool nesterov = use_nesterov_;
    this->run(ctx, 3, 4, {2, 5},
              [=](std::int64_t at, const T* grad_row, std::int64_t width, auto& vars) {
                auto grad = view(grad_row, width);
                auto accum = view(vars[1].out + at, width);
                accum = accum * momentum + grad;
                auto var = view(vars[0].out + at, width);
                if (nesterov)
                  var -= lr * (grad + momentum * accum);
                else
                  var -= lr * accum;
              });
  }

private:
  bool use_nesterov_;
};

/// Per row: accum += grad^2; var -= lr * grad / sqrt(accum) (TF's SparseApplyAdagrad).
template <class T>
class sparse_apply_adagrad_kernel : public sparse_update_base<T, 2> {
public:
  using sparse_update_base<T, 2>::sparse_update_base;
  void compute(kernel_context& ctx) override {
    if (ctx.num_inputs() != 5)
      return ctx.fail(make_error(errc::invalid_argument, "SparseApplyAdagrad needs 5 inputs"));
    T lr = ctx.input(2).is_initialized() ? this->scalar(ctx, 2) : T(0);
    this->run(ctx, 3, 4, {2}, [lr](std::int64_t at, const T* grad_row, std::int64_t width, auto& vars) {
      auto grad = view(grad_row, width);
      auto accum = view(vars[1].out + at, width);
      accum += grad.square();
      view(vars[0].out + at, width) -= lr * grad / accum.sqrt();
    });
  }
};

/// Per row named (lazy, as TF's LazyAdamOptimizer): m += (g - m)(1 - beta1), v += (g^2 - v)(1 -
/// beta2), var -= lr_t m / (sqrt(v) + epsilon), lr_t = lr sqrt(1 - beta2_power) / (1 - beta1_power).
template <class T>
class sparse_apply_adam_kernel : public sparse_update_base<T, 3> {
public:
  using sparse_update_base<T, 3>::sparse_update_base;
  void compute(kernel_context& ctx) override {
    if (ctx.num_inputs() != 11)
      return ctx.fail(make_error(errc::invalid_argument, "SparseApplyAdam needs 11 inputs"));
    for (int i = 3; i <= 8; ++i)
      if (!ctx.input(i).is_initialized())
        return ctx.fail(make_error(errc::invalid_argument, "SparseApplyAdam: input " +
                                                             std::to_string(i) + " is missing"));
    T beta1_power = this->scalar(ctx, 3), beta2_power = this->scalar(ctx, 4);
    T lr = this->scalar(ctx, 5), beta1 = this->scalar(ctx, 6), beta2 = this->scalar(ctx, 7);
    T epsilon = this->scalar(ctx, 8);
    T lr_t = lr * std::sqrt(T(1) - beta2_power) / (T(1) - beta1_power);
    this->run(ctx, 9, 10, {3, 4, 5, 6, 7, 8},
              [=](std::int64_t at, const T* grad_row, std::int64_t width, auto& vars) {
                auto grad = view(grad_row, width);
                auto m = view(vars[1].out + at, width);
                m += (grad - m) * (T(1) - beta1);
                auto v = view(vars[2].out + at, width);
                v += (grad.square() - v) * (T(1) - beta2);
                view(vars[0].out + at, width) -= lr_t * m / (v.sqrt() + epsilon);
              });
  }
};

/// Per row named: FTRL-Proximal (devices/ftrl.hpp), TF's SparseApplyFtrl(var, accum, linear,
/// grad, indices, lr, l1, l2, lr_power) and, with `V2`, SparseApplyFtrlV2(..., l2, l2_shrinkage,
/// lr_power). Rows not named keep var, accum and linear.
template <class T, bool V2>
class sparse_apply_ftrl_kernel : public sparse_update_base<T, 3> {
public:
  using sparse_update_base<T, 3>::sparse_update_base;
  void compute(kernel_context& ctx) override {
    const int inputs = V2 ? 10 : 9;
    if (ctx.num_inputs() != inputs)
      return ctx.fail(make_error(errc::invalid_argument, this->op() + " needs " +
                                                           std::to_string(inputs) + " inputs"));
    std::vector<int> scalars;
    for (int i = 5; i < inputs; ++i) {
      if (!ctx.input(i).is_initialized() || ctx.input(i).type() != dtype_of<T>() ||
          ctx.input(i).num_elements() != 1)
        return ctx.fail(make_error(errc::invalid_argument, this->op() + " node '" + this->name() +
                                                             "': input " + std::to_string(i) +
                                                             " must be a scalar of the variable's type"));
      scalars.push_back(i);
    }
    ftrl_parameters<T> p{this->scalar(ctx, 5), this->scalar(ctx, 6), this->scalar(ctx, 7),
                         V2 ? this->scalar(ctx, 8) : T(0), this->scalar(ctx, inputs - 1)};
    if (auto checked = check_ftrl_parameters(p, this->op() + " node '" + this->name() + "'"); !checked.ok())
      return ctx.fail(std::move(checked));
    this->run(ctx, 3, 4, scalars, [&p](std::int64_t at, const T* grad, std::int64_t width, auto& vars) {
      ftrl_update(vars[0].out + at, vars[1].out + at, vars[2].out + at, grad, width, p);
    });
  }
};
template <class T>
using sparse_apply_ftrl_v1_kernel = sparse_apply_ftrl_kernel<T, false>;
template <class T>
using sparse_apply_ftrl_v2_kernel = sparse_apply_ftrl_kernel<T, true>;

/// Rows of data split by partition, order kept; rows are copied as bytes (any dtype).
class dynamic_partition_kernel : public op_kernel {
public:
  explicit dynamic_partition_kernel(const node& n)
    : op_kernel(n), parts_(n.attr_or<std::int64_t>("num_partitions", 1)) {}
  void compute(kernel_context& ctx) override {
    auto& data = ctx.input(0);
    if (!check_input(ctx, 1, dtype::int32))
      return;
    auto& partitions = ctx.input(1);
    auto n = partitions.num_elements();
    if (data.shape().rank() < 1 || data.shape().dim(0) != n)
      return ctx.fail(make_error(errc::invalid_argument,
                                 "DynamicPartition node '" + name() + "': " + std::to_string(n) +
                                   " partitions for data of shape " + data.shape().to_string()));
    auto bytes = static_cast<std::size_t>(row_size(data)) * size_of(data.type());
    std::vector<std::int64_t> counts(static_cast<std::size_t>(parts_), 0);
    const auto* of = partitions.data<std::int32_t>();
    for (std::int64_t i = 0; i < n; ++i) {
      if (of[i] < 0 || of[i] >= parts_)
        return ctx.fail(make_error(errc::invalid_argument,
                                   "DynamicPartition node '" + name() + "': partition " +
                                     std::to_string(of[i]) + " is out of range [0, " +
                                     std::to_string(parts_) + ")"));
      ++counts[static_cast<std::size_t>(of[i])];
    }
    std::vector<char*> next;
    for (std::int64_t p = 0; p < parts_; ++p) {
      auto dims = data.shape().dims();
      dims[0] = counts[static_cast<std::size_t>(p)];
      auto out = ctx.allocate_output(static_cast<int>(p), data.type(), tensor_shape{dims});
      next.push_back(static_cast<char*>(out.raw_data()));
    }
    const auto* src = static_cast<const char*>(data.raw_data());
    for (std::int64_t i = 0; i < n; ++i) {
      auto& dst = next[static_cast<std::size_t>(of[i])];
      std::memcpy(dst, src + static_cast<std::size_t>(i) * bytes, bytes);
      dst += bytes;
    }
  }

private:
  std::int64_t parts_;
};

/// merged[indices[p][i]] = data[p][i]; rows copied as bytes (any dtype).
class dynamic_stitch_kernel : public op_kernel {
public:
  using op_kernel::op_kernel;
  void compute(kernel_context& ctx) override {
    auto n = ctx.num_inputs() / 2;
    std::int64_t rows = 0;
    for (int p = 0; p < n; ++p) {
      if (!check_input(ctx, p, dtype::int32))
        return;
      auto& indices = ctx.input(p);
      for (std::int64_t i = 0; i < indices.num_elements(); ++i)
        rows = std::max<std::int64_t>(rows, indices.data<std::int32_t>()[i] + 1);
    }
    auto& first = ctx.input(n);
    auto dims = first.shape().dims();
    auto row_dims = ctx.input(0).shape().rank();
    std::vector<std::int64_t> out_dims{rows};
    out_dims.insert(out_dims.end(), dims.begin() + std::min<std::size_t>(dims.size(), static_cast<std::size_t>(row_dims)), dims.end());
    auto out = ctx.allocate_output(0, first.type(), tensor_shape{out_dims});
    auto width = rows > 0 ? out.num_elements() / rows : 0;
    auto bytes = static_cast<std::size_t>(width) * size_of(first.type());
    std::memset(out.raw_data(), 0, static_cast<std::size_t>(out.num_elements()) * size_of(first.type()));
    auto* dst = static_cast<char*>(out.raw_data());
    for (int p = 0; p < n; ++p) {
      auto& indices = ctx.input(p);
      auto& data = ctx.input(n + p);
      if (data.type() != first.type() ||
          data.num_elements() != indices.num_elements() * width)
        return ctx.fail(make_error(errc::invalid_argument,
                                   "DynamicStitch node '" + name() + "': data " + std::to_string(p) +
                                     " of shape " + data.shape().to_string() + " does not fit " +
                                     std::to_string(indices.num_elements()) + " indices"));
      const auto* src = static_cast<const char*>(data.raw_data());
      for (std::int64_t i = 0; i < indices.num_elements(); ++i) {
        auto at = indices.data<std::int32_t>()[i];
        if (at < 0)
          return ctx.fail(out_of_range(*this, at, rows));
        std::memcpy(dst + static_cast<std::size_t>(at) * bytes, src + static_cast<std::size_t>(i) * bytes, bytes);
      }
    }
  }
};

/// TF's embedding_lookup rules: for each id its shard, its row there, and its position.
template <class T>
class embedding_shard_ids_kernel : public op_kernel {
public:
  explicit embedding_shard_ids_kernel(const node& n)
    : op_kernel(n), mod_(n.attr_or<std::string>("strategy", "mod") == "mod"),
      shards_(n.attr_or<std::int64_t>("num_shards", 1)),
      total_(n.attr_or<std::int64_t>("total_rows", 0)) {}
  void compute(kernel_context& ctx) override {
    if (!check_input(ctx, 0, dtype_of<T>()))
      return;
    auto& ids = ctx.input(0);
    auto shard = ctx.allocate_output(0, dtype::int32, ids.shape());
    auto row = ctx.allocate_output(1, dtype_of<T>(), ids.shape());
    auto position = ctx.allocate_output(2, dtype::int32, ids.shape());
    auto per_shard = total_ / shards_;
    auto extras = total_ % shards_;
    for (std::int64_t i = 0; i < ids.num_elements(); ++i) {
      std::int64_t id = ids.template data<T>()[i];
      if (id < 0 || id >= total_)
        return ctx.fail(make_error(errc::invalid_argument,
                                   "embedding_lookup node '" + name() + "': id " +
                                     std::to_string(id) + " is out of the table's " +
                                     std::to_string(total_) + " rows"));
      std::int64_t p = 0, r = 0;
      if (mod_) {
        p = id % shards_;
        r = id / shards_;
      } else if (id < extras * (per_shard + 1)) {
        p = id / (per_shard + 1);
        r = id % (per_shard + 1);
      } else {
        p = extras + (id - extras * (per_shard + 1)) / per_shard;
        r = (id - extras * (per_shard + 1)) % per_shard;
      }
      shard.template data<std::int32_t>()[i] = static_cast<std::int32_t>(p);
      row.template data<T>()[i] = static_cast<T>(r);
      position.template data<std::int32_t>()[i] = static_cast<std::int32_t>(i);
    }
  }

private:
  bool mod_;
  std::int64_t shards_, total_;
};

} // namespace

void register_sparse_kernels(kernel_registry& registry) {
  registry.add("DynamicPartition", "CPU", all_dtypes(), make_kernel<dynamic_partition_kernel>);
  registry.add("DynamicStitch", "CPU", all_dtypes(), make_kernel<dynamic_stitch_kernel>);
  add_typed_kernels<embedding_shard_ids_kernel, std::int32_t, std::int64_t>(registry, "_EmbeddingShardIds");
  add_typed_kernels<indexed_slices_kernel, float, double, std::int32_t, std::int64_t>(registry, "IndexedSlices");
  add_typed_kernels<unsorted_segment_sum_like_kernel, float, double>(registry, "UnsortedSegmentSumLike");
  add_typed_kernels<unsorted_segment_sum_kernel, float, double, std::int32_t, std::int64_t>(registry, "UnsortedSegmentSum");
  add_typed_kernels<unique_kernel, std::int32_t, std::int64_t>(registry, "Unique");
  add_typed_kernels<deduplicate_slices_kernel, float, double>(registry, "_DeduplicateSlices");
  add_typed_kernels<scatter_add_kernel, float, double>(registry, "ScatterAdd");
  add_typed_kernels<scatter_sub_kernel, float, double>(registry, "ScatterSub");
  add_typed_kernels<scatter_update_kernel, float, double>(registry, "ScatterUpdate");
  add_typed_kernels<sparse_apply_gradient_descent_kernel, float, double>(registry, "SparseApplyGradientDescent");
  add_typed_kernels<sparse_apply_momentum_kernel, float, double>(registry, "SparseApplyMomentum");
  add_typed_kernels<sparse_apply_adagrad_kernel, float, double>(registry, "SparseApplyAdagrad");
  add_typed_kernels<sparse_apply_adam_kernel, float, double>(registry, "SparseApplyAdam");
  add_typed_kernels<sparse_apply_ftrl_v1_kernel, float, double>(registry, "SparseApplyFtrl");
  add_typed_kernels<sparse_apply_ftrl_v2_kernel, float, double>(registry, "SparseApplyFtrlV2");
}

} // namespace actorflow
