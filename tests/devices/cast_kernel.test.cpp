// Cast between every pair of the five dtypes.
#include "support/kernel_test_util.hpp"

using namespace actorflow;
using namespace actorflow::testing;

namespace {

const std::vector<dtype> every_dtype{dtype::float32, dtype::float64, dtype::int32, dtype::int64,
                                     dtype::boolean};

/// The source values as dtype `type`: bools are 0/1, integers truncate.
tensor source_values(dtype type) {
  std::vector<double> values{0.0, 1.0, -2.75, 3.5, 0.25, 100.0};
  if (type == dtype::boolean)
    values = {0, 1, 1, 0, 1, 1};
  tensor t{type, {2, 3}};
  visit_dtype(type, [&](auto zero) {
    using T = decltype(zero);
    for (std::size_t i = 0; i < values.size(); ++i)
      t.data<T>()[i] = static_cast<T>(values[i]);
    return 0;
  });
  return t;
}

/// static_cast semantics computed through double.
double cast_reference(double v, dtype to) {
  switch (to) {
    case dtype::float32: return static_cast<float>(v);
    case dtype::float64: return v;
    case dtype::int32: return static_cast<std::int32_t>(v);
    case dtype::int64: return static_cast<double>(static_cast<std::int64_t>(v));
    case dtype::boolean: return v != 0.0 ? 1.0 : 0.0;
  }
  return v;
}

} // namespace

TEST_CASE("Cast converts every dtype pair with static_cast semantics", "[kernels][cast]") {
  kernel_test_env env;
  for (auto from : every_dtype) {
    for (auto to : every_dtype) {
      INFO("Cast " << to_string(from) << " to " << to_string(to));
      auto x = source_values(from);
      auto out = env.run_ok(make_node("Cast", "cast", from, {{"dtype", to}}, {to}), {x});
      REQUIRE(out.type() == to);
      std::vector<double> expected;
      for (double v : as_doubles(x))
        expected.push_back(cast_reference(v, to));
      require_near(out, x.shape(), expected, 0.0);
      if (from == to)
        CHECK(env.last_output_forwards_input(0, 0));
    }
  }
}

TEST_CASE("Cast of a large tensor runs split over the pool and stays correct", "[kernels][cast]") {
  kernel_test_env env;
  test_random random{7};
  INFO("seed 7");
  auto x = random.uniform<float>({512, 200}, -1000, 1000);
  auto out = env.run_ok(make_node("Cast", "cast", dtype::float32, {{"dtype", dtype::int32}},
                                  {dtype::int32}),
                        {x});
  auto in = x.to_vector<float>();
  auto got = out.to_vector<std::int32_t>();
  for (std::size_t i = 0; i < in.size(); ++i)
    REQUIRE(got[i] == static_cast<std::int32_t>(in[i]));
}
