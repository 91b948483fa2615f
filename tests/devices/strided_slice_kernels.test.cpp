// StridedSlice and StridedSliceGrad (graph/strided_slice.hpp) against an index-by-index
// reference, for every dtype, on random subscripts; their layouts (devices/strided_layout.hpp),
// buffer sharing and errors. Tagged [kernels]: they run on the CPU, on the test device, and on
// a GPU where there is one. Python's tests check the subscripts' meaning against numpy.
#include "support/kernel_test_util.hpp"

#include "devices/strided_layout.hpp"
#include "graph/strided_slice.hpp"

#include <cstdint>
#include <random>
#include <type_traits>
#include <vector>

using namespace actorflow;
using namespace actorflow::testing;

namespace {

/// One entry of a subscript, as Python writes it.
struct entry {
  enum kind_t { index, range, new_axis, ellipsis } kind = range;
  std::int64_t start = 0;  // index: the index
  std::int64_t stop = 0;
  std::int64_t step = 1;
  bool has_start = true;
  bool has_stop = true;
};

strided_slice_spec spec_of(const std::vector<entry>& key) {
  strided_slice_spec spec;
  for (std::size_t i = 0; i < key.size(); ++i) {
    auto& e = key[i];
    auto bit = std::int64_t{1} << i;
    spec.begin.push_back(e.kind == entry::index || e.kind == entry::range ? e.start : 0);
    spec.end.push_back(e.kind == entry::index ? e.start + 1 : e.kind == entry::range ? e.stop : 0);
    spec.strides.push_back(e.kind == entry::range ? e.step : 1);
    if (e.kind == entry::index)
      spec.shrink_axis_mask |= bit;
    if (e.kind == entry::new_axis)
      spec.new_axis_mask |= bit;
    if (e.kind == entry::ellipsis)
      spec.ellipsis_mask |= bit;
    if (e.kind == entry::range && !e.has_start)
      spec.begin_mask |= bit;
    if (e.kind == entry::range && !e.has_stop)
      spec.end_mask |= bit;
  }
  return spec;
}

/// The indices `e` takes from an axis of n, by stepping from its first index while inside the
/// axis and short of its stop: Python's rule, written as a walk.
std::vector<std::int64_t> taken_indices(const entry& e, std::int64_t n) {
  if (e.kind == entry::index)
    return {e.start < 0 ? e.start + n : e.start};
  auto forward = e.step > 0;
  auto wrap = [n](std::int64_t v) { return v < 0 ? v + n : v; };
  auto first = e.has_start ? wrap(e.start) : (forward ? 0 : n - 1);
  auto stop = e.has_stop ? wrap(e.stop) : (forward ? n : -1);
  if (e.has_stop && !forward && stop < -1)
    stop = -1;
  if (forward && first < 0)
    first = 0;
  if (!forward && first >= n)
    first = n - 1;
  std::vector<std::int64_t> out;
  for (auto i = first; forward ? (i < stop && i < n) : (i > stop && i >= 0); i += e.step)
    out.push_back(i);
  return out;
}

struct expected_slice {
  tensor_shape shape;
  std::vector<std::int64_t> sources;  // per output element, its flat input index
};

expected_slice reference(const std::vector<std::int64_t>& dims, std::vector<entry> key) {
  // The ellipsis (or, without one, the end) stands for the axes no other entry takes.
  std::size_t taking = 0;
  bool has_ellipsis = false;
  for (auto& e : key) {
    has_ellipsis |= e.kind == entry::ellipsis;
    taking += e.kind == entry::index || e.kind == entry::range;
  }
  std::vector<entry> expanded;
  entry whole;
  whole.has_start = whole.has_stop = false;
  for (auto& e : key) {
    if (e.kind == entry::ellipsis)
      expanded.insert(expanded.end(), dims.size() - taking, whole);
    else
      expanded.push_back(e);
  }
  if (!has_ellipsis)
    expanded.insert(expanded.end(), dims.size() - taking, whole);
  std::vector<std::int64_t> strides(dims.size(), 1);
  for (auto k = dims.size(); k-- > 1;)
    strides[k - 1] = strides[k] * dims[k];
  std::vector<std::vector<std::int64_t>> per_axis;  // input offsets taken, per input axis
  std::vector<std::int64_t> out_dims;
  std::size_t axis = 0;
  for (auto& e : expanded) {
    if (e.kind == entry::new_axis) {
      out_dims.push_back(1);
      continue;
    }
    auto indices = taken_indices(e, dims[axis]);
    std::vector<std::int64_t> offsets;
    for (auto i : indices)
      offsets.push_back(i * strides[axis]);
    per_axis.push_back(offsets);
    if (e.kind != entry::index)
      out_dims.push_back(static_cast<std::int64_t>(indices.size()));
    ++axis;
  }
  // Every combination, the last axis fastest.
  std::vector<std::int64_t> sources{0};
  for (auto& offsets : per_axis) {
    std::vector<std::int64_t> next;
    for (auto s : sources)
      for (auto o : offsets)
        next.push_back(s + o);
    sources = std::move(next);
  }
  return {tensor_shape{out_dims}, sources};
}

/// 0, 1, 2, ... as a tensor of `type` (bool: a pattern of trues).
tensor counting(dtype type, const std::vector<std::int64_t>& dims) {
  tensor t{type, tensor_shape{dims}};
  visit_dtype(type, [&](auto zero) {
    using T = decltype(zero);
    for (std::int64_t i = 0; i < t.num_elements(); ++i)
      t.data<T>()[i] = static_cast<T>(std::is_same<T, bool>::value ? i % 3 == 1 : i % 120);
    return 0;
  });
  return t;
}

node slice_node(dtype type, const strided_slice_spec& spec) {
  return make_node("StridedSlice", "s", type, spec.attrs());
}

node grad_node(dtype type, const strided_slice_spec& spec) {
  return make_node("StridedSliceGrad", "g", type, spec.attrs());
}

/// A random subscript valid for `dims` (its integer indices inside their axes).
std::vector<entry> random_key(std::mt19937& rng, const std::vector<std::int64_t>& dims) {
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
  std::vector<entry> key;
  std::size_t axis = 0;
  auto ellipsis_at = pick(3) == 0 ? pick(static_cast<int>(dims.size()) + 1) : -1;
  auto taking = static_cast<std::size_t>(pick(static_cast<int>(dims.size())) + 1);
  for (std::size_t i = 0; i < taking; ++i) {
    if (static_cast<int>(i) == ellipsis_at) {
      entry e;
      e.kind = entry::ellipsis;
      key.push_back(e);
    }
    if (pick(6) == 0) {
      entry e;
      e.kind = entry::new_axis;
      key.push_back(e);
    }
    auto n = dims[axis++];
    entry e;
    if (pick(4) == 0) {
      e.kind = entry::index;
      e.start = pick(static_cast<int>(2 * n)) - n;
    } else {
      static const std::int64_t steps[] = {1, 1, 2, 3, -1, -2};
      e.step = steps[pick(6)];
      e.has_start = pick(4) != 0;
      e.has_stop = pick(4) != 0;
      e.start = pick(static_cast<int>(2 * n + 5)) - n - 2;
      e.stop = pick(static_cast<int>(2 * n + 5)) - n - 2;
    }
    key.push_back(e);
  }
  return key;
}

} // namespace

TEST_CASE("StridedSlice and its gradient match an index-by-index reference on random subscripts",
          "[kernels][strided_slice]") {
  kernel_test_env env;
  std::mt19937 rng(20261203);
  std::vector<std::vector<std::int64_t>> shapes{{7}, {4, 6}, {3, 4, 5}, {2, 3, 2, 5}, {2, 1, 3, 2, 2}};
  for (auto type : all_dtypes())
    for (auto& dims : shapes)
      for (int trial = 0; trial < 6; ++trial) {
        auto key = random_key(rng, dims);
        auto spec = spec_of(key);
        auto expected = reference(dims, key);
        INFO(to_string(type) << " " << tensor_shape{dims}.to_string() << " begin "
                             << tensor_shape{spec.begin}.to_string() << " end "
                             << tensor_shape{spec.end}.to_string() << " strides "
                             << tensor_shape{spec.strides}.to_string() << " masks " << spec.begin_mask
                             << "," << spec.end_mask << "," << spec.ellipsis_mask << ","
                             << spec.new_axis_mask << "," << spec.shrink_axis_mask);
        auto x = counting(type, dims);
        auto values = as_doubles(x);
        std::vector<double> want;
        for (auto s : expected.sources)
          want.push_back(values[static_cast<std::size_t>(s)]);
        auto out = env.run_ok(slice_node(type, spec), {x});
        CHECK(out.type() == type);
        require_near(out, expected.shape, want, 0.0);
        // The gradient puts each of the slice's elements back where it came from.
        auto dx = env.run_ok(grad_node(type, spec), {x, out});
        std::vector<double> scattered(values.size(), 0.0);
        for (auto s : expected.sources)
          scattered[static_cast<std::size_t>(s)] = values[static_cast<std::size_t>(s)];
        require_near(dx, tensor_shape{dims}, scattered, 0.0);
      }
}

TEST_CASE("StridedSlice of a large tensor is exact on the parallel path", "[kernels][strided_slice]") {
  kernel_test_env env;
  // 2^18 elements in, above the parallel threshold out: blocks start mid-run.
  std::vector<std::int64_t> dims{64, 32, 128};
  auto x = counting(dtype::float64, dims);
  auto values = as_doubles(x);
  std::vector<std::vector<entry>> keys(2);
  entry rows;  // x[1:63]: contiguous runs
  rows.start = 1;
  rows.stop = 63;
  keys[0] = {rows};
  entry every_other;  // x[:, ::-1, 1::2]: strided runs, walking backwards
  every_other.has_start = every_other.has_stop = false;
  entry backwards = every_other;
  backwards.step = -1;
  entry odd;
  odd.start = 1;
  odd.has_stop = false;
  odd.step = 2;
  keys[1] = {every_other, backwards, odd};
  for (auto& key : keys) {
    auto spec = spec_of(key);
    auto expected = reference(dims, key);
    std::vector<double> want;
    for (auto s : expected.sources)
      want.push_back(values[static_cast<std::size_t>(s)]);
    require_near(env.run_ok(slice_node(dtype::float64, spec), {x}), expected.shape, want, 0.0);
  }
}

TEST_CASE("a StridedSlice that takes everything in order shares its input's buffer",
          "[kernels][strided_slice]") {
  kernel_test_env env;
  auto x = counting(dtype::float32, {3, 4});
  strided_slice_spec everything;  // x[..., tf.newaxis]
  everything.begin = {0, 0};
  everything.end = {0, 0};
  everything.strides = {1, 1};
  everything.ellipsis_mask = 1;
  everything.new_axis_mask = 2;
  auto out = env.run_ok(slice_node(dtype::float32, everything), {x});
  CHECK(out.shape() == tensor_shape{3, 4, 1});
  CHECK(env.last_output_forwards_input(0, 0));
  auto grad = env.run_ok(grad_node(dtype::float32, everything), {x, out});
  CHECK(grad.shape() == tensor_shape{3, 4});
  CHECK(env.last_output_forwards_input(0, 1));
  // Rows 1..2 of 3 are contiguous but not the whole buffer: copied.
  auto rows = env.run_ok(slice_node(dtype::float32, spec_of({entry{entry::range, 1, 3}})), {x});
  CHECK_FALSE(env.last_output_forwards_input(0, 0));
  require_near(rows, tensor_shape{2, 4}, {4, 5, 6, 7, 8, 9, 10, 11}, 0.0);
}

TEST_CASE("StridedSlice errors name the node, the entry and the shape", "[kernels][strided_slice]") {
  kernel_test_env env;
  auto x = counting(dtype::float32, {3, 4});
  auto past = env.run(slice_node(dtype::float32, spec_of({entry{entry::range}, entry{entry::index, 4}})),
                      {x});
  REQUIRE_FALSE(past.status.ok());
  CHECK(past.status.code() == errc::invalid_argument);
  CHECK_THAT(past.status.message(),
             Catch::Contains("StridedSlice 's': entry 1 (dimension 1 of input shape [3,4]): index 4 "
                             "is out of bounds"));
  auto too_many = env.run(slice_node(dtype::float32, spec_of({entry{}, entry{}, entry{}})), {x});
  REQUIRE_FALSE(too_many.status.ok());
  CHECK_THAT(too_many.status.message(), Catch::Contains("3 indices for input shape [3,4] of rank 2"));
  auto wrong_dy = env.run(grad_node(dtype::float32, spec_of({entry{entry::range, 0, 2}})),
                          {x, counting(dtype::float32, {3, 4})});
  REQUIRE_FALSE(wrong_dy.status.ok());
  CHECK_THAT(wrong_dy.status.message(),
             Catch::Contains("StridedSliceGrad 'g': dy has shape [3,4] but the slice of [3,4] has "
                             "shape [2,4]"));
}

TEST_CASE("strided slice layouts merge the axes that stay together", "[devices][strided_slice]") {
  // x[2:6:2] of [8, 5]: two rows of five, ten apart, after an offset of two rows.
  auto rows = make_strided_slice_layout(tensor_shape{8, 5}, spec_of({entry{entry::range, 2, 6, 2}}), "s");
  REQUIRE(rows.ok());
  CHECK(rows->in_offset == 10);
  CHECK(rows->extents == std::vector<std::int64_t>{2, 5});
  CHECK(rows->in_strides == std::vector<std::int64_t>{10, 1});
  // x[1:3, :, ::-1] of [4, 2, 3]: rows 1 and 2 are adjacent and merge; the reversed axis stays.
  entry whole;
  whole.has_start = whole.has_stop = false;
  entry reversed = whole;
  reversed.step = -1;
  auto flipped = make_strided_slice_layout(
    tensor_shape{4, 2, 3}, spec_of({entry{entry::range, 1, 3}, whole, reversed}), "s");
  REQUIRE(flipped.ok());
  CHECK(flipped->in_offset == 6 + 2);
  CHECK(flipped->extents == std::vector<std::int64_t>{4, 3});
  CHECK(flipped->in_strides == std::vector<std::int64_t>{3, -1});
  // An empty slice reads nothing.
  auto empty = make_strided_slice_layout(tensor_shape{4, 2}, spec_of({entry{entry::range, 3, 1}}), "s");
  REQUIRE(empty.ok());
  CHECK(empty->out_shape == tensor_shape{0, 2});
  CHECK(empty->out_elements() == 0);
}
