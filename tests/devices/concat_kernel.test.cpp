// ConcatV2 and its gradient SplitToShapesOf on the CPU: several shapes and axes, every dtype,
// empty parts, the parallel path, and the errors, against an element-by-element reference.
#include "support/kernel_test_util.hpp"

using namespace actorflow;
using namespace actorflow::testing;
using Catch::Matchers::Contains;

namespace {

constexpr std::uint32_t seed = 4242;

tensor_shape shape(std::vector<std::int64_t> dims) { return tensor_shape{std::move(dims)}; }

node concat_node(dtype type, std::int64_t axis) {
  return make_node("ConcatV2", "concat", type, {{"axis", axis}});
}

node split_node(dtype type, std::int64_t axis, std::size_t outputs) {
  return make_node("SplitToShapesOf", "split", type, {{"axis", axis}},
                   std::vector<dtype>(outputs, type));
}

/// The concatenation of `parts` along `axis` (non-negative), element by element, as float64.
std::vector<double> reference_concat(const std::vector<tensor>& parts, int axis) {
  auto whole = parts.front().shape().dims();
  whole[static_cast<std::size_t>(axis)] = 0;
  for (auto& p : parts)
    whole[static_cast<std::size_t>(axis)] += p.shape().dim(axis);
  tensor_shape out_shape{whole};
  std::vector<double> out;
  std::vector<std::int64_t> index(whole.size(), 0);
  for (std::int64_t flat = 0; flat < out_shape.num_elements(); ++flat) {
    auto rest = flat;
    for (int d = out_shape.rank() - 1; d >= 0; --d) {
      index[static_cast<std::size_t>(d)] = rest % out_shape.dim(d);
      rest /= out_shape.dim(d);
    }
    // Find the part the axis index falls into, then the element's index inside it.
    auto along = index[static_cast<std::size_t>(axis)];
    std::size_t p = 0;
    while (along >= parts[p].shape().dim(axis)) {
      along -= parts[p].shape().dim(axis);
      ++p;
    }
    auto part_index = index;
    part_index[static_cast<std::size_t>(axis)] = along;
    std::int64_t in_flat = 0;
    for (int d = 0; d < out_shape.rank(); ++d)
      in_flat = in_flat * parts[p].shape().dim(d) + part_index[static_cast<std::size_t>(d)];
    out.push_back(as_doubles(parts[p])[static_cast<std::size_t>(in_flat)]);
  }
  return out;
}

template <class T>
tensor random_of(test_random& random, tensor_shape s) {
  if constexpr (std::is_floating_point_v<T>)
    return random.uniform<T>(std::move(s), -10.0, 10.0);
  else
    return random.integers<T>(std::move(s), std::is_same_v<T, bool> ? 0 : -1000,
                              std::is_same_v<T, bool> ? 1 : 1000);
}

struct concat_case {
  std::vector<tensor_shape> parts;
  std::int64_t axis;
  tensor_shape expected;
};

const std::vector<concat_case>& cases() {
  static const std::vector<concat_case> all{
    {{shape({2, 3}), shape({4, 3})}, 0, shape({6, 3})},
    {{shape({2, 3}), shape({2, 1}), shape({2, 5})}, 1, shape({2, 9})},
    {{shape({2, 3}), shape({2, 1}), shape({2, 5})}, -1, shape({2, 9})},
    {{shape({2, 3, 4}), shape({2, 1, 4}), shape({2, 0, 4}), shape({2, 2, 4})}, 1, shape({2, 6, 4})},
    {{shape({3, 2, 2}), shape({3, 2, 3})}, 2, shape({3, 2, 5})},
    {{shape({5}), shape({1}), shape({2})}, 0, shape({8})},
    {{shape({0, 3}), shape({2, 3})}, 0, shape({2, 3})},
  };
  return all;
}

template <class T>
void check_concat_and_split(kernel_test_env& env, test_random& random) {
  auto type = dtype_of<T>();
  for (auto& c : cases()) {
    INFO(to_string(type) << " axis " << c.axis << " into " << c.expected.to_string());
    std::vector<tensor> parts;
    for (auto& s : c.parts)
      parts.push_back(random_of<T>(random, s));
    auto axis = static_cast<int>(c.axis < 0 ? c.axis + c.expected.rank() : c.axis);
    auto whole = env.run_ok(concat_node(type, c.axis), parts);
    CHECK(whole.type() == type);
    require_near(whole, c.expected, reference_concat(parts, axis), 0.0);

    // The gradient splits the whole back into the parts, by their shapes alone.
    std::vector<tensor> split_inputs{whole};
    split_inputs.insert(split_inputs.end(), parts.begin(), parts.end());
    auto split = env.run(split_node(type, c.axis, parts.size()), split_inputs);
    INFO(split.status.to_string());
    REQUIRE(split.status.ok());
    REQUIRE(split.outputs.size() == parts.size());
    for (std::size_t i = 0; i < parts.size(); ++i)
      require_near(split.outputs[i], parts[i].shape(), as_doubles(parts[i]), 0.0);
  }
}

} // namespace

TEST_CASE("ConcatV2 and SplitToShapesOf are exact for every dtype, shape and axis",
          "[kernels][concat]") {
  INFO("seed " << seed);
  kernel_test_env env;
  test_random random{seed};
  check_concat_and_split<float>(env, random);
  check_concat_and_split<double>(env, random);
  check_concat_and_split<std::int32_t>(env, random);
  check_concat_and_split<std::int64_t>(env, random);
  check_concat_and_split<bool>(env, random);
}

TEST_CASE("ConcatV2 and SplitToShapesOf copy large tensors correctly on the parallel path",
          "[kernels][concat]") {
  INFO("seed " << seed);
  kernel_test_env env;
  test_random random{seed + 1};
  // 400 rows of 300 elements: past the parallel threshold.
  std::vector<tensor> parts{random.uniform<float>(shape({400, 200})),
                            random.uniform<float>(shape({400, 100}))};
  auto whole = env.run_ok(concat_node(dtype::float32, 1), parts);
  require_near(whole, shape({400, 300}), reference_concat(parts, 1), 0.0);
  auto split = env.run(split_node(dtype::float32, 1, 2), {whole, parts[0], parts[1]});
  REQUIRE(split.status.ok());
  require_near(split.outputs[0], shape({400, 200}), as_doubles(parts[0]), 0.0);
  require_near(split.outputs[1], shape({400, 100}), as_doubles(parts[1]), 0.0);
}

TEST_CASE("ConcatV2 of one input and SplitToShapesOf into one shape forward the buffer",
          "[kernels][concat]") {
  kernel_test_env env;
  auto x = tensor::from_vector<float>({1, 2, 3, 4}, shape({2, 2}));
  env.run_ok(concat_node(dtype::float32, 0), {x});
  CHECK(env.last_output_forwards_input(0, 0));
  env.run_ok(split_node(dtype::float32, 0, 1), {x, x});
  CHECK(env.last_output_forwards_input(0, 0));
}

TEST_CASE("ConcatV2 and SplitToShapesOf errors name the shapes", "[kernels][concat]") {
  kernel_test_env env;
  tensor a{dtype::float32, shape({2, 3})};
  tensor b{dtype::float32, shape({2, 4})};
  auto mismatch = env.run(concat_node(dtype::float32, 0), {a, b});
  CHECK(mismatch.status.code() == errc::invalid_argument);
  CHECK_THAT(mismatch.status.message(), Contains("[2,3]") && Contains("[2,4]"));

  auto rank = env.run(concat_node(dtype::float32, 0), {a, tensor{dtype::float32, shape({3})}});
  CHECK_THAT(rank.status.message(), Contains("[2,3]") && Contains("[3]"));

  auto axis = env.run(concat_node(dtype::float32, 2), {a, a});
  CHECK_THAT(axis.status.message(), Contains("axis 2 is out of range"));

  auto scalars = env.run(concat_node(dtype::float32, 0),
                         {tensor::scalar(1.f), tensor::scalar(2.f)});
  CHECK_THAT(scalars.status.message(), Contains("scalars"));

  auto types = env.run(concat_node(dtype::float32, 0), {a, tensor{dtype::float64, shape({2, 3})}});
  CHECK_THAT(types.status.message(), Contains("float64") && Contains("float32"));

  auto no_axis = kernel_registry::global().create(make_node("ConcatV2", "c", dtype::float32), "CPU");
  REQUIRE_FALSE(no_axis.ok());
  CHECK_THAT(no_axis.error().message(), Contains("'c'") && Contains("axis"));

  tensor dy{dtype::float32, shape({5, 3})};
  auto split = env.run(split_node(dtype::float32, 0, 2), {dy, a, a});
  CHECK(split.status.code() == errc::invalid_argument);
  CHECK_THAT(split.status.message(), Contains("[5,3]") && Contains("[2,3], [2,3]"));
}
