#include "devices/test_device.hpp"
#include "devices/thread_pool.hpp"
#include "devices/variable_shard.hpp"
#include "graph/device_name.hpp"

#include <catch2/catch.hpp>

using namespace actorflow;

namespace {

/// Variable "w" of a device of its own (the CPU, or the test device, whose memory is not the
/// host's), holding `initial` (uninitialised when empty).
variable_shard make_shard(std::vector<float> initial, const std::string& type = "CPU") {
  auto name = *device_name::parse("/job:ps/replica:0/task:0/device:" + type + ":0");
  auto intra = std::make_shared<thread_pool>("intra", 0);
  std::shared_ptr<device> dev = type == test_device_type ? make_test_device(name, intra, {})
                                                         : make_cpu_device(name, intra);
  if (!initial.empty())
    dev->resources().variable("w")->value =
      copy_from_host_and_wait(*dev, tensor::from_vector<float>(initial)).value();
  return variable_shard{"w", dev};
}

} // namespace

TEST_CASE("a shard's updates apply in turn and count as versions") {
  auto type = GENERATE(as<std::string>{}, "CPU", "TEST");
  INFO("on " << type);
  auto w = make_shard({1, 2}, type);
  CHECK(w.version() == 0);
  CHECK(w.assign_add(tensor::from_vector<float>({1, 1})).value() == 1);
  CHECK(w.apply_gradient_descent(0.5, tensor::from_vector<float>({2, 4})).value() == 2);
  auto now = w.read();
  REQUIRE(now.ok());
  // Reads serve other tasks: host memory whatever the device.
  CHECK(now->value.on_host());
  CHECK(now->value.to_vector<float>() == std::vector<float>{1, 1});
  CHECK(now->version == 2);
  CHECK(w.assign(tensor::from_vector<float>({7, 8})).value() == 3);
  CHECK(w.read()->value.to_vector<float>() == std::vector<float>{7, 8});
}

TEST_CASE("a read keeps its value while the shard is updated after it") {
  auto w = make_shard({1, 2});
  auto before = w.read();
  REQUIRE(before.ok());
  // The reader holds the buffer: the update builds a new one instead of writing it.
  REQUIRE(w.assign_add(tensor::from_vector<float>({10, 10})).ok());
  CHECK(before->value.to_vector<float>() == std::vector<float>{1, 2});
  CHECK(w.read()->value.to_vector<float>() == std::vector<float>{11, 12});
}

TEST_CASE("a shard refuses reads of an uninitialised variable and mismatched updates") {
  auto empty = make_shard({});
  auto read = empty.read();
  REQUIRE_FALSE(read.ok());
  CHECK(read.error().message().find("uninitialized value w") != std::string::npos);
  REQUIRE_FALSE(empty.assign_add(tensor::from_vector<float>({1})).ok());

  auto w = make_shard({1, 2});
  auto wrong_shape = w.apply_gradient_descent(0.1, tensor::from_vector<float>({1, 2, 3}));
  REQUIRE_FALSE(wrong_shape.ok());
  CHECK(wrong_shape.error().message().find("variable 'w'") != std::string::npos);
  REQUIRE_FALSE(w.apply_gradient_descent(0.1, tensor::from_vector<std::int32_t>({1, 2})).ok());
  REQUIRE_FALSE(w.assign(tensor::from_vector<float>({1, 2, 3})).ok());
  CHECK(w.version() == 0); // nothing changed
}

TEST_CASE("restoring a snapshot puts back its value and version") {
  auto type = GENERATE(as<std::string>{}, "CPU", "TEST");
  INFO("on " << type);
  auto w = make_shard({1}, type);
  auto snapshot = *w.read();
  REQUIRE(w.assign_add(tensor::from_vector<float>({5})).ok());
  REQUIRE(w.assign_add(tensor::from_vector<float>({5})).ok());
  CHECK(w.restore(versioned_value{snapshot.value, 41}).value() == 41);
  CHECK(w.read()->value.to_vector<float>() == std::vector<float>{1});
  CHECK(w.version() == 41);
}
