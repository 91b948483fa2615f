#include "graph/device_name.hpp"

#include <catch2/catch.hpp>

#include <optional>
#include <string>

using actorflow::device_name;
using actorflow::errc;

namespace {

/// Parses `text`, failing the test with the error message when it is rejected.
device_name parse_ok(const std::string& text) {
  auto parsed = device_name::parse(text);
  INFO("parsing '" << text << "': " << parsed.error().to_string());
  REQUIRE(parsed.ok());
  return *parsed;
}

/// Parses `text`, which must be rejected as invalid_argument; returns the message.
std::string parse_error(const std::string& text) {
  auto parsed = device_name::parse(text);
  INFO("parsing '" << text << "'");
  REQUIRE_FALSE(parsed.ok());
  CHECK(parsed.error().code() == errc::invalid_argument);
  // Every error quotes the whole string so the user can find it in their program.
  CHECK_THAT(parsed.error().message(),
             Catch::Matchers::StartsWith("invalid device name '" + text + "': "));
  return parsed.error().message();
}

device_name make(std::optional<std::string> job, std::optional<int> replica,
                 std::optional<int> task, std::optional<std::string> type,
                 std::optional<int> id) {
  device_name name;
  name.job = std::move(job);
  name.replica = replica;
  name.task = task;
  name.type = std::move(type);
  name.id = id;
  return name;
}

} // namespace

TEST_CASE("the empty string parses to a name with no field set", "[device_name]") {
  auto name = parse_ok("");
  CHECK(name.empty());
  CHECK_FALSE(name.fully_specified());
  CHECK(name == device_name{});
  CHECK(name.to_string().empty());
  CHECK(name.local_name().empty());
}

TEST_CASE("legacy cpu and gpu names set only the type and the id", "[device_name]") {
  CHECK(parse_ok("/cpu:0") == make({}, {}, {}, "CPU", 0));
  CHECK(parse_ok("/CPU:0") == make({}, {}, {}, "CPU", 0));
  CHECK(parse_ok("/gpu:1") == make({}, {}, {}, "GPU", 1));
  CHECK(parse_ok("/GPU:1") == make({}, {}, {}, "GPU", 1));
  CHECK(parse_ok("/Gpu:3") == make({}, {}, {}, "GPU", 3));
}

TEST_CASE("a legacy wildcard index leaves the id unset", "[device_name]") {
  CHECK(parse_ok("/cpu:*") == make({}, {}, {}, "CPU", {}));
  CHECK(parse_ok("/gpu:*") == make({}, {}, {}, "GPU", {}));
}

TEST_CASE("the device form names the type and the id", "[device_name]") {
  CHECK(parse_ok("/device:GPU:1") == make({}, {}, {}, "GPU", 1));
  CHECK(parse_ok("/device:CPU:0") == make({}, {}, {}, "CPU", 0));
  CHECK(parse_ok("/device:CPU:*") == make({}, {}, {}, "CPU", {}));
  CHECK(parse_ok("/device:GPU") == make({}, {}, {}, "GPU", {}));
}

TEST_CASE("cpu and gpu device types are upper-cased, other types keep their case",
          "[device_name]") {
  CHECK(parse_ok("/device:gpu:1") == make({}, {}, {}, "GPU", 1));
  CHECK(parse_ok("/device:gpu:1").type == "GPU");
  CHECK(parse_ok("/device:cpu:0").type == "CPU");
  CHECK(parse_ok("/device:cpu:0").to_string() == "/device:CPU:0");
  CHECK(parse_ok("/device:Cpu:0") == make({}, {}, {}, "CPU", 0));
  CHECK(parse_ok("/gpu:1").type == "GPU");
  CHECK(parse_ok("/gpu:1").to_string() == "/device:GPU:1");
  // TensorFlow keeps every other type as written.
  CHECK(parse_ok("/device:xla_gpu:2").type == "xla_gpu");
  CHECK(parse_ok("/device:XLA_GPU:2").type == "XLA_GPU");
  CHECK(parse_ok("/device:MyFunnyDevice:2").type == "MyFunnyDevice");
  CHECK(parse_ok("/device:MyFunnyDevice:2").to_string() == "/device:MyFunnyDevice:2");
  CHECK(parse_ok("/job:w/device:MyFunnyDevice:*").to_string() == "/job:w/device:MyFunnyDevice:*");
  CHECK(parse_ok("/device:MyFunnyDevice:2") != parse_ok("/device:MYFUNNYDEVICE:2"));
  CHECK(parse_ok("/device:cpus:0").type == "cpus");
}

TEST_CASE("a cpu or gpu type set in code prints and compares upper-case", "[device_name]") {
  auto cpu = make("ps", 0, 1, "cpu", 0);
  CHECK(cpu.to_string() == "/job:ps/replica:0/task:1/device:CPU:0");
  CHECK(cpu.local_name() == "/device:CPU:0");
  CHECK(make({}, {}, {}, "gpu", {}).to_string() == "/device:GPU:*");
  CHECK(make({}, {}, {}, "Gpu", 3).to_string() == "/device:GPU:3");
  CHECK(cpu == parse_ok("/job:ps/replica:0/task:1/device:CPU:0"));
  CHECK(parse_ok("/cpu:0").matches(cpu));
  CHECK(make({}, {}, {}, "gpu", {}).matches(parse_ok("/job:w/replica:0/task:0/device:GPU:1")));
  // Nothing else is touched.
  auto custom = make({}, {}, {}, "MyFunnyDevice", 2);
  CHECK(custom.to_string() == "/device:MyFunnyDevice:2");
  CHECK(custom == parse_ok("/device:MyFunnyDevice:2"));
  CHECK(make({}, {}, {}, "tpu", 0).to_string() == "/device:tpu:0");
}

TEST_CASE("merging names with cpu and other types set in code still works", "[device_name]") {
  auto merged = device_name::merge(parse_ok("/job:worker/task:0"), make({}, {}, {}, "cpu", 1));
  CHECK(merged == make("worker", {}, 0, "CPU", 1));
  CHECK(merged.to_string() == "/job:worker/task:0/device:CPU:1");
  auto custom = device_name::merge(make({}, {}, {}, "cpu", 1), parse_ok("/device:MyFunnyDevice:*"));
  CHECK(custom.to_string() == "/device:MyFunnyDevice:1");
  auto inner_task =
    device_name::merge(parse_ok("/job:ps/device:MyFunnyDevice:2"), parse_ok("/task:3"));
  CHECK(inner_task.to_string() == "/job:ps/task:3/device:MyFunnyDevice:2");
}

TEST_CASE("the legacy and the device forms name the same device", "[device_name]") {
  CHECK(parse_ok("/cpu:0") == parse_ok("/device:CPU:0"));
  CHECK(parse_ok("/gpu:1") == parse_ok("/device:GPU:1"));
  CHECK(parse_ok("/gpu:1").to_string() == "/device:GPU:1");
}

TEST_CASE("a fully qualified name sets every field", "[device_name]") {
  auto name = parse_ok("/job:ps/replica:0/task:1/device:CPU:0");
  CHECK(name == make("ps", 0, 1, "CPU", 0));
  CHECK(name.fully_specified());
  CHECK_FALSE(name.empty());
  auto worker = parse_ok("/job:worker/replica:0/task:1/device:GPU:1");
  CHECK(worker == make("worker", 0, 1, "GPU", 1));
  CHECK(worker.fully_specified());
}

TEST_CASE("partial names set only the fields they name", "[device_name]") {
  CHECK(parse_ok("/job:worker/task:0/gpu:1") == make("worker", {}, 0, "GPU", 1));
  CHECK(parse_ok("/job:worker/task:1") == make("worker", {}, 1, {}, {}));
  CHECK(parse_ok("/task:1") == make({}, {}, 1, {}, {}));
  CHECK(parse_ok("/job:canshu") == make("canshu", {}, {}, {}, {}));
  CHECK(parse_ok("/job:gongzuo/task:1") == make("gongzuo", {}, 1, {}, {}));
  CHECK(parse_ok("/replica:0/task:0/cpu:0") == make({}, 0, 0, "CPU", 0));
  CHECK(parse_ok("/job:ps/task:0/cpu:0") == make("ps", {}, 0, "CPU", 0));
  CHECK(parse_ok("/job:canshu/task:0") == make("canshu", {}, 0, {}, {}));
  CHECK_FALSE(parse_ok("/job:worker/task:0/gpu:1").fully_specified());
}

TEST_CASE("components may come in any order", "[device_name]") {
  auto expected = make("ps", 0, 1, "CPU", 0);
  CHECK(parse_ok("/device:CPU:0/task:1/replica:0/job:ps") == expected);
  CHECK(parse_ok("/task:1/job:ps/cpu:0/replica:0") == expected);
  CHECK(parse_ok("/replica:0/device:CPU:0/job:ps/task:1") == expected);
  CHECK(parse_ok("/gpu:1/job:worker") == make("worker", {}, {}, "GPU", 1));
}

TEST_CASE("job names may hold letters, digits, underscores and dashes", "[device_name]") {
  CHECK(parse_ok("/job:worker_2").job == "worker_2");
  CHECK(parse_ok("/job:local-host").job == "local-host");
  CHECK(parse_ok("/job:PS").job == "PS");
}

TEST_CASE("large indices within int range are accepted", "[device_name]") {
  CHECK(parse_ok("/task:2147483647").task == 2147483647);
  CHECK(parse_ok("/replica:12/task:007").task == 7);
}

TEST_CASE("a wildcard job, replica or task leaves that field unset", "[device_name]") {
  CHECK(parse_ok("/job:*/replica:*/task:*/device:CPU:0") == make({}, {}, {}, "CPU", 0));
}

TEST_CASE("a name without a leading slash is rejected", "[device_name]") {
  CHECK_THAT(parse_error("cpu:0"), Catch::Matchers::Contains("must start with '/'"));
  CHECK_THAT(parse_error("job:ps/task:0"), Catch::Matchers::Contains("must start with '/'"));
  CHECK_THAT(parse_error(" /cpu:0"), Catch::Matchers::Contains("must start with '/'"));
}

TEST_CASE("an empty component is rejected", "[device_name]") {
  CHECK_THAT(parse_error("//"), Catch::Matchers::Contains("empty component"));
  CHECK_THAT(parse_error("/"), Catch::Matchers::Contains("empty component"));
  CHECK_THAT(parse_error("/job:ps//task:0"), Catch::Matchers::Contains("empty component"));
  CHECK_THAT(parse_error("/cpu:0/"), Catch::Matchers::Contains("empty component"));
}

TEST_CASE("a component given twice is rejected", "[device_name]") {
  CHECK_THAT(parse_error("/task:1/task:2"),
             Catch::Matchers::Contains("'task' appears more than once"));
  CHECK_THAT(parse_error("/job:ps/job:worker"),
             Catch::Matchers::Contains("'job' appears more than once"));
  CHECK_THAT(parse_error("/replica:0/replica:0"),
             Catch::Matchers::Contains("'replica' appears more than once"));
  // The legacy and the device forms both name the device, so together they repeat it.
  CHECK_THAT(parse_error("/cpu:0/device:GPU:1"), Catch::Matchers::Contains("'device:GPU:1'"));
  CHECK_THAT(parse_error("/cpu:0/gpu:1"), Catch::Matchers::Contains("second device"));
}

TEST_CASE("a non-numeric index is rejected and named", "[device_name]") {
  CHECK(parse_error("/job:ps/task:x") ==
        "invalid device name '/job:ps/task:x': task index 'x' is not a number");
  CHECK_THAT(parse_error("/replica:one"),
             Catch::Matchers::Contains("replica index 'one' is not a number"));
  CHECK_THAT(parse_error("/gpu:a"), Catch::Matchers::Contains("device index 'a' is not a number"));
  CHECK_THAT(parse_error("/device:GPU:1.5"),
             Catch::Matchers::Contains("device index '1.5' is not a number"));
  CHECK_THAT(parse_error("/task:+1"), Catch::Matchers::Contains("task index '+1'"));
}

TEST_CASE("a negative index is rejected", "[device_name]") {
  CHECK_THAT(parse_error("/task:-1"), Catch::Matchers::Contains("task index '-1' is negative"));
  CHECK_THAT(parse_error("/replica:-3"), Catch::Matchers::Contains("replica index '-3'"));
  CHECK_THAT(parse_error("/device:GPU:-1"),
             Catch::Matchers::Contains("device index '-1' is negative"));
  CHECK_THAT(parse_error("/cpu:-1"), Catch::Matchers::Contains("device index '-1'"));
}

TEST_CASE("an index too large for an int is rejected", "[device_name]") {
  CHECK_THAT(parse_error("/task:2147483648"), Catch::Matchers::Contains("too large"));
  CHECK_THAT(parse_error("/gpu:99999999999999999999"), Catch::Matchers::Contains("too large"));
}

TEST_CASE("a missing index is rejected", "[device_name]") {
  CHECK_THAT(parse_error("/task:"), Catch::Matchers::Contains("task index is missing"));
  CHECK_THAT(parse_error("/device:GPU:"), Catch::Matchers::Contains("device index is missing"));
  CHECK_THAT(parse_error("/cpu:"), Catch::Matchers::Contains("device index is missing"));
}

TEST_CASE("an empty or malformed job name is rejected", "[device_name]") {
  CHECK_THAT(parse_error("/job:"), Catch::Matchers::Contains("job name is empty"));
  CHECK_THAT(parse_error("/job:1ps"),
             Catch::Matchers::Contains("job name '1ps' must start with a letter"));
  CHECK_THAT(parse_error("/job:_ps"), Catch::Matchers::Contains("job name '_ps'"));
  CHECK_THAT(parse_error("/job:p s"), Catch::Matchers::Contains("job name 'p s' may contain"));
  CHECK_THAT(parse_error("/job:ps.1"), Catch::Matchers::Contains("job name 'ps.1'"));
  CHECK_THAT(parse_error("/job:ps:1"), Catch::Matchers::Contains("job name 'ps:1'"));
}

TEST_CASE("an unknown component key is rejected and named", "[device_name]") {
  CHECK_THAT(parse_error("/foo:1"), Catch::Matchers::Contains("unknown component 'foo'"));
  CHECK_THAT(parse_error("/job:ps/tpu:0"), Catch::Matchers::Contains("unknown component 'tpu'"));
  // Only the legacy cpu and gpu keys are case-insensitive.
  CHECK_THAT(parse_error("/JOB:ps"), Catch::Matchers::Contains("unknown component 'JOB'"));
  CHECK_THAT(parse_error("/:1"), Catch::Matchers::Contains("no key"));
  CHECK_THAT(parse_error("/cpu"), Catch::Matchers::Contains("component 'cpu' has no ':'"));
  CHECK_THAT(parse_error("/job"), Catch::Matchers::Contains("component 'job' has no ':'"));
}

TEST_CASE("a device component without a type is rejected", "[device_name]") {
  CHECK_THAT(parse_error("/device:"), Catch::Matchers::Contains("device type is missing"));
  CHECK_THAT(parse_error("/device::0"), Catch::Matchers::Contains("device type is missing"));
  CHECK_THAT(parse_error("/device:*:0"), Catch::Matchers::Contains("device type '*'"));
  CHECK_THAT(parse_error("/device:G-PU:0"), Catch::Matchers::Contains("device type 'G-PU'"));
}

TEST_CASE("trailing garbage is rejected", "[device_name]") {
  CHECK_THAT(parse_error("/cpu:0x"), Catch::Matchers::Contains("'0x'"));
  CHECK_THAT(parse_error("/cpu:0 "), Catch::Matchers::Contains("'0 '"));
  CHECK_THAT(parse_error("/device:GPU:1:2"), Catch::Matchers::Contains("'1:2'"));
  CHECK_THAT(parse_error("/job:ps/task:0garbage"), Catch::Matchers::Contains("'0garbage'"));
  CHECK_THAT(parse_error("/job:ps/task:0/extra"), Catch::Matchers::Contains("'extra'"));
}

TEST_CASE("to_string prints the set fields in canonical order", "[device_name]") {
  CHECK(parse_ok("/device:CPU:0/task:1/replica:0/job:ps").to_string() ==
        "/job:ps/replica:0/task:1/device:CPU:0");
  CHECK(parse_ok("/job:worker/task:0/gpu:1").to_string() == "/job:worker/task:0/device:GPU:1");
  CHECK(parse_ok("/task:1").to_string() == "/task:1");
  CHECK(parse_ok("/job:canshu").to_string() == "/job:canshu");
  CHECK(parse_ok("/replica:0/task:0/cpu:0").to_string() == "/replica:0/task:0/device:CPU:0");
}

TEST_CASE("a type without an id prints as a wildcard", "[device_name]") {
  CHECK(parse_ok("/device:GPU").to_string() == "/device:GPU:*");
  CHECK(parse_ok("/cpu:*").to_string() == "/device:CPU:*");
  CHECK(parse_ok("/job:ps/device:CPU:*").local_name() == "/device:CPU:*");
}

TEST_CASE("an id without a type prints no device part", "[device_name]") {
  auto name = make("ps", {}, 0, {}, 3);
  CHECK(name.to_string() == "/job:ps/task:0");
  CHECK(name.local_name().empty());
}

TEST_CASE("local_name prints just the device part", "[device_name]") {
  CHECK(parse_ok("/job:ps/replica:0/task:1/device:CPU:0").local_name() == "/device:CPU:0");
  CHECK(parse_ok("/gpu:1").local_name() == "/device:GPU:1");
  CHECK(parse_ok("/job:worker/task:1").local_name().empty());
}

TEST_CASE("parsing the printed form gives back the same name", "[device_name]") {
  auto text = GENERATE(as<std::string>{}, "", "/cpu:0", "/CPU:0", "/gpu:1", "/device:GPU:1",
                       "/device:CPU:*", "/device:gpu:1", "/device:GPU", "/cpu:*",
                       "/job:ps/replica:0/task:1/device:CPU:0", "/job:worker/task:0/gpu:1",
                       "/job:worker/task:1", "/task:1", "/job:canshu", "/replica:0/task:0/cpu:0",
                       "/device:CPU:0/task:1/replica:0/job:ps", "/job:local-host_2/task:7",
                       "/device:cpu:0", "/device:MyFunnyDevice:2", "/device:xla_gpu:*",
                       "/job:ps/task:0/device:MyFunnyDevice:2");
  INFO("device string '" << text << "'");
  auto original = parse_ok(text);
  auto printed = original.to_string();
  CHECK(parse_ok(printed) == original);
  // The canonical form is a fixed point.
  CHECK(parse_ok(printed).to_string() == printed);
}

TEST_CASE("an inner device block fills in an outer job and task", "[device_name]") {
  auto merged = device_name::merge(parse_ok("/job:worker/task:0"), parse_ok("/gpu:1"));
  CHECK(merged == make("worker", {}, 0, "GPU", 1));
  CHECK(merged.to_string() == "/job:worker/task:0/device:GPU:1");
}

TEST_CASE("an inner task block overrides the task and keeps the outer device",
          "[device_name]") {
  auto merged =
      device_name::merge(parse_ok("/job:worker/task:0/device:GPU:1"), parse_ok("/task:1"));
  CHECK(merged == make("worker", {}, 1, "GPU", 1));
  CHECK(merged.to_string() == "/job:worker/task:1/device:GPU:1");
}

TEST_CASE("the replica device setter example nests gpu and task blocks", "[device_name]") {
  // SPEC: inside /gpu:1, p1 lands on /job:worker/task:0/gpu:1; nested again in /task:1,
  // p2 lands on /job:worker/task:1/gpu:1.
  auto worker = parse_ok("/job:worker");
  auto p1 = device_name::merge(device_name::merge(worker, parse_ok("/task:0")), parse_ok("/gpu:1"));
  CHECK(p1 == parse_ok("/job:worker/task:0/gpu:1"));
  auto p2 = device_name::merge(p1, parse_ok("/task:1"));
  CHECK(p2 == parse_ok("/job:worker/task:1/gpu:1"));
}

TEST_CASE("merging with an empty name changes nothing", "[device_name]") {
  auto full = parse_ok("/job:ps/replica:0/task:1/device:CPU:0");
  CHECK(device_name::merge(full, device_name{}) == full);
  CHECK(device_name::merge(device_name{}, full) == full);
  CHECK(device_name::merge(device_name{}, device_name{}).empty());
}

TEST_CASE("every field set in the inner name wins over the outer one", "[device_name]") {
  auto outer = parse_ok("/job:ps/replica:0/task:1/device:CPU:0");
  auto inner = parse_ok("/job:worker/replica:2/task:3/device:GPU:4");
  CHECK(device_name::merge(outer, inner) == inner);
  CHECK(device_name::merge(outer, parse_ok("/job:canshu")) == make("canshu", 0, 1, "CPU", 0));
  CHECK(device_name::merge(outer, parse_ok("/replica:5")) == make("ps", 5, 1, "CPU", 0));
}

TEST_CASE("an inner type without an id keeps the outer id", "[device_name]") {
  // Unset fields come from outer, field by field, as TensorFlow's DeviceSpec merge does.
  auto merged = device_name::merge(parse_ok("/cpu:1"), parse_ok("/device:GPU:*"));
  CHECK(merged == make({}, {}, {}, "GPU", 1));
}

TEST_CASE("fully_specified needs every field", "[device_name]") {
  CHECK(parse_ok("/job:ps/replica:0/task:1/device:CPU:0").fully_specified());
  CHECK_FALSE(parse_ok("/job:ps/replica:0/task:1/device:CPU:*").fully_specified());
  CHECK_FALSE(parse_ok("/job:ps/replica:0/device:CPU:0").fully_specified());
  CHECK_FALSE(parse_ok("/replica:0/task:1/device:CPU:0").fully_specified());
  CHECK_FALSE(parse_ok("/job:ps/task:1/device:CPU:0").fully_specified());
  CHECK_FALSE(parse_ok("/job:ps/replica:0/task:1").fully_specified());
}

TEST_CASE("empty is true only when no field is set", "[device_name]") {
  CHECK(device_name{}.empty());
  CHECK_FALSE(parse_ok("/task:0").empty());
  CHECK_FALSE(parse_ok("/cpu:*").empty());
  CHECK_FALSE(make({}, {}, {}, {}, 0).empty());
}

TEST_CASE("a partial name matches every more specific name that agrees", "[device_name]") {
  auto full = parse_ok("/job:worker/replica:0/task:1/device:GPU:1");
  CHECK(device_name{}.matches(full));
  CHECK(parse_ok("/gpu:1").matches(full));
  CHECK(parse_ok("/device:GPU:*").matches(full));
  CHECK(parse_ok("/job:worker").matches(full));
  CHECK(parse_ok("/job:worker/task:1").matches(full));
  CHECK(full.matches(full));
}

TEST_CASE("a name does not match one that differs or lacks a field it sets", "[device_name]") {
  auto full = parse_ok("/job:worker/replica:0/task:1/device:GPU:1");
  CHECK_FALSE(parse_ok("/gpu:0").matches(full));
  CHECK_FALSE(parse_ok("/cpu:1").matches(full));
  CHECK_FALSE(parse_ok("/job:ps").matches(full));
  CHECK_FALSE(parse_ok("/task:0").matches(full));
  CHECK_FALSE(parse_ok("/replica:1").matches(full));
  // matches is not symmetric: the more specific name sets fields the partial one lacks.
  CHECK_FALSE(full.matches(parse_ok("/gpu:1")));
  CHECK_FALSE(parse_ok("/job:worker").matches(device_name{}));
}

TEST_CASE("a task's name is the prefix of its devices' names") {
  CHECK(actorflow::task_name("ps", 1) == "/job:ps/replica:0/task:1");
  // A device's full name is its task's name followed by its local name (the separator
  // included: task 1's name is no prefix of task 10's devices).
  for (auto [job, task] : {std::pair{"ps", 1}, std::pair{"worker", 10}, std::pair{"gongzuo", 0}}) {
    INFO(job << " " << task);
    auto device = make(job, 0, task, "gpu", 3);
    CHECK(device.to_string() == actorflow::task_name(job, task) + device.local_name());
    CHECK(device.to_string() == actorflow::task_name(job, task) + "/device:GPU:3");
  }
  CHECK(make("ps", 0, 10, "CPU", 0).to_string().rfind(actorflow::task_name("ps", 1) + "/", 0) ==
        std::string::npos);
}
