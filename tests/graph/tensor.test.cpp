// Host-side tensor operations.
#include "graph/tensor.hpp"

#include <catch2/catch.hpp>

#include <string>
#include <vector>

using namespace actorflow;

TEST_CASE("sliced copies a range of rows, or of any axis, into a new buffer") {
  auto batch = tensor::from_vector<float>({0, 1, 2, 3, 4, 5, 6, 7, 8}, tensor_shape{{3, 3}});
  auto middle = batch.sliced(0, 1, 2);
  REQUIRE(middle.ok());
  CHECK(middle->shape() == tensor_shape{{2, 3}});
  CHECK(middle->to_vector<float>() == std::vector<float>{3, 4, 5, 6, 7, 8});
  CHECK_FALSE(middle->shares_buffer_with(batch));
  auto columns = batch.sliced(1, 1, 2);
  REQUIRE(columns.ok());
  CHECK(columns->shape() == tensor_shape{{3, 2}});
  CHECK(columns->to_vector<float>() == std::vector<float>{1, 2, 4, 5, 7, 8});
  auto none = batch.sliced(0, 3, 0);
  REQUIRE(none.ok());
  CHECK(none->shape() == tensor_shape{{0, 3}});
}

TEST_CASE("sliced names the axis or range that does not fit") {
  auto batch = tensor::from_vector<float>({0, 1, 2, 3, 4, 5}, tensor_shape{{2, 3}});
  auto bad_axis = batch.sliced(2, 0, 1);
  REQUIRE_FALSE(bad_axis.ok());
  CHECK(bad_axis.error().message().find("axis 2") != std::string::npos);
  auto past_end = batch.sliced(0, 1, 2);
  REQUIRE_FALSE(past_end.ok());
  CHECK(past_end.error().message().find("[1, 3) of axis 0") != std::string::npos);
  CHECK_FALSE(batch.sliced(1, -1, 1).ok());
}
