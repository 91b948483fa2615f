// The update logic every device's variable kernels share (devices/variable_update.hpp): names,
// lock order, checks, and the choice between writing in place and copy-on-write. Runs on a CPU
// device (and a test device for the memory rule) with the shared code called directly.
#include "devices/variable_update.hpp"

#include "support/kernel_test_util.hpp"

#include <catch2/catch.hpp>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

using namespace actorflow;
using namespace actorflow::testing;

namespace {

/// A kernel only for its op and node name, which the errors quote.
class named_kernel : public op_kernel {
public:
  using op_kernel::op_kernel;
  void compute(kernel_context&) override {}
};

/// Accepts any data input of the right dtype, wherever it lives.
status any_input(kernel_context& ctx, int i, dtype expected) {
  if (i >= ctx.num_inputs() || ctx.input(i).type() != expected)
    return make_error(errc::invalid_argument, "bad input " + std::to_string(i));
  return {};
}

const update_rules host_rules{&any_input, false};

struct fixture {
  std::unique_ptr<device> dev =
    make_cpu_device(test_cpu_name(), std::make_shared<thread_pool>("test_intra_op", 1));
  node n = make_node("ApplyGradientDescent", "sgd/update_w", dtype::float32);
  named_kernel kernel{n};

  /// The state of variable `name`, holding `values`.
  std::shared_ptr<variable_state> variable(const std::string& name, std::vector<float> values) {
    auto state = dev->resources().variable(name);
    state->value = tensor::from_vector<float>(values);
    return state;
  }

  /// ApplyGradientDescent's inputs: the variable's own output (moved in, so that the call
  /// holds the only extra reference), alpha, delta.
  std::vector<tensor> sgd_inputs(const tensor& var_output, tensor delta) {
    std::vector<tensor> inputs;
    inputs.push_back(var_output);
    inputs.push_back(tensor::scalar<float>(0.5f));
    inputs.push_back(std::move(delta));
    return inputs;
  }

  node momentum = make_node("ApplyMomentum", "momentum/update_w", dtype::float32);
  named_kernel momentum_kernel{momentum};

  /// ApplyMomentum's inputs for a variable of 3 elements: var, accum, lr, grad, momentum.
  std::vector<tensor> momentum_inputs(const tensor& var_output, const tensor& accum_output) {
    std::vector<tensor> inputs;
    inputs.push_back(var_output);
    inputs.push_back(accum_output);
    inputs.push_back(tensor::scalar<float>(0.1f));
    inputs.push_back(tensor::from_vector<float>({1, 1, 1}));
    inputs.push_back(tensor::scalar<float>(0.9f));
    return inputs;
  }

  /// prepare() as ApplyMomentum calls it, for the variable and slot `names`.
  status prepare_momentum(variable_update& update, kernel_context& ctx,
                          const std::vector<std::string>& names) {
    return update.prepare(ctx, momentum_kernel, names, dtype::float32, {3}, {2, 4});
  }
};

/// Checks that `st` is the error `code` with `message`, word for word (tests elsewhere and
/// users match these messages).
void check_refused(const status& st, errc code, const std::string& message) {
  INFO(st.to_string());
  CHECK(st.code() == code);
  CHECK(st.message() == message);
}

/// Whether another thread could take `m` now.
bool is_free(std::mutex& m) {
  std::unique_lock<std::mutex> lock{m, std::try_to_lock};
  return lock.owns_lock();
}

} // namespace

TEST_CASE("split_names keeps empty names and gives none for an empty list",
          "[variable_update]") {
  CHECK(split_names("").empty());
  CHECK(split_names("m") == std::vector<std::string>{"m"});
  CHECK(split_names("m,v") == std::vector<std::string>{"m", "v"});
  CHECK(split_names("m,,v") == std::vector<std::string>{"m", "", "v"});
  CHECK(split_names("m,") == std::vector<std::string>{"m", ""});
}

TEST_CASE("updated variable names come from the variable and slots attributes in input order",
          "[variable_update]") {
  auto adam = make_node("ApplyAdam", "adam/update_w", dtype::float32,
                        {{"variable", std::string{"w"}}, {"slots", std::string{"w/m,w/v"}}});
  CHECK(updated_variable_names(adam, 3) == std::vector<std::string>{"w", "w/m", "w/v"});
  auto short_of_slots = make_node("ApplyAdam", "adam/update_w", dtype::float32,
                                  {{"variable", std::string{"w"}}, {"slots", std::string{"w/m"}}});
  CHECK(updated_variable_names(short_of_slots, 3) == std::vector<std::string>{"w", "w/m", ""});
  auto bare = make_node("ApplyGradientDescent", "sgd", dtype::float32);
  CHECK(updated_variable_names(bare, 1) == std::vector<std::string>{""});
}

TEST_CASE("variables are locked in address order whatever order they are named in",
          "[variable_update]") {
  std::vector<variable_state> states(3);
  // Named highest address first: the locks must still start at the lowest.
  std::vector<variable_state*> named{&states[2], &states[0], &states[1]};
  auto locks = lock_in_address_order(named);
  REQUIRE(locks.size() == 3);
  for (std::size_t i = 0; i < locks.size(); ++i) {
    CHECK(locks[i].owns_lock());
    CHECK(locks[i].mutex() == &states[i].mutex);
  }
  CHECK_FALSE(is_free(states[2].mutex));
  locks.clear();
  CHECK(is_free(states[2].mutex));
}

TEST_CASE("an update writes the stored buffer in place when only its ref input shares it",
          "[variable_update]") {
  fixture f;
  auto w = f.variable("w", {1, 2, 3});
  const void* stored = w->value.raw_data();
  kernel_context ctx{f.n, *f.dev, 1, f.sgd_inputs(w->value, tensor::from_vector<float>({1, 1, 1}))};
  {
    variable_update update{host_rules};
    auto st = update.prepare(ctx, f.kernel, {"w"}, dtype::float32, {2}, {1});
    INFO(st.to_string());
    REQUIRE(st.ok());
    CHECK(update.in_place(0));
    auto var = update.variable<float>(0);
    CHECK(var.in == stored);
    CHECK(var.out == stored);
    CHECK_FALSE(is_free(w->mutex));
    update.commit(ctx);
  }
  CHECK(is_free(w->mutex));
  CHECK(w->value.raw_data() == stored);
  CHECK(w->version == 1);
  REQUIRE(ctx.outputs().size() >= 1);
  CHECK(ctx.outputs()[0].shares_buffer_with(w->value));
}

TEST_CASE("a reader holding the stored buffer makes the update write a fresh one",
          "[variable_update]") {
  fixture f;
  auto w = f.variable("w", {1, 2, 3});
  tensor reader = w->value;
  kernel_context ctx{f.n, *f.dev, 1, f.sgd_inputs(w->value, tensor::from_vector<float>({1, 1, 1}))};
  variable_update update{host_rules};
  REQUIRE(update.prepare(ctx, f.kernel, {"w"}, dtype::float32, {2}, {1}).ok());
  CHECK_FALSE(update.in_place(0));
  auto var = update.variable<float>(0);
  CHECK(var.in == reader.data<float>());
  CHECK(var.out != var.in);
  for (int i = 0; i < 3; ++i)
    var.out[i] = var.in[i] * 10;
  update.commit(ctx);
  CHECK_FALSE(w->value.shares_buffer_with(reader));
  CHECK(reader.to_vector<float>() == std::vector<float>{1, 2, 3});
  CHECK(w->value.to_vector<float>() == std::vector<float>{10, 20, 30});
  CHECK(w->version == 1);
}

TEST_CASE("a data input sharing the variable's buffer makes an optimizer update copy",
          "[variable_update]") {
  fixture f;
  auto w = f.variable("w", {1, 2, 3});
  // The delta is the variable's own buffer: writing it in place would change an input.
  tensor delta = w->value;
  kernel_context ctx{f.n, *f.dev, 1, f.sgd_inputs(w->value, std::move(delta))};
  variable_update update{host_rules};
  REQUIRE(update.prepare(ctx, f.kernel, {"w"}, dtype::float32, {2}, {1}).ok());
  CHECK_FALSE(update.in_place(0));
}

TEST_CASE("an assign update counts every input as its own and writes in place",
          "[variable_update]") {
  fixture f;
  auto w = f.variable("w", {1, 2, 3});
  const void* stored = w->value.raw_data();
  std::vector<tensor> inputs;
  inputs.push_back(w->value);
  inputs.push_back(w->value);
  node add = make_node("AssignAdd", "w/AssignAdd", dtype::float32);
  named_kernel kernel{add};
  kernel_context ctx{add, *f.dev, 1, std::move(inputs)};
  variable_update update{host_rules};
  REQUIRE(update.prepare_assign_update(ctx, kernel, "w", dtype::float32).ok());
  CHECK(update.in_place(0));
  CHECK(update.variable<float>(0).out == stored);
}

TEST_CASE("a variable named twice is refused without taking any lock", "[variable_update]") {
  fixture f;
  auto w = f.variable("w", {1, 2, 3});
  kernel_context ctx{f.momentum, *f.dev, 1, f.momentum_inputs(w->value, w->value)};
  variable_update update{host_rules};
  auto st = f.prepare_momentum(update, ctx, {"w", "w"});
  check_refused(st, errc::invalid_argument,
                "ApplyMomentum node 'momentum/update_w' names variable 'w' twice");
  CHECK(is_free(w->mutex));
}

TEST_CASE("a missing slot name is refused before any variable is made", "[variable_update]") {
  fixture f;
  kernel_context ctx{f.momentum, *f.dev, 1, {}};
  variable_update update{host_rules};
  auto st = f.prepare_momentum(update, ctx, {"w", ""});
  check_refused(st, errc::invalid_argument,
                "ApplyMomentum node 'momentum/update_w' has no 'slots' attribute naming its slot "
                "variable 1");
  CHECK(f.dev->resources().find_variable("w") == nullptr);
}

TEST_CASE("an uninitialised slot is refused naming it and its locks are let go",
          "[variable_update]") {
  fixture f;
  auto w = f.variable("w", {1, 2, 3});
  auto accum = f.dev->resources().variable("w/accum");
  kernel_context ctx{f.momentum, *f.dev, 1, f.momentum_inputs(w->value, tensor{})};
  {
    variable_update update{host_rules};
    auto st = f.prepare_momentum(update, ctx, {"w", "w/accum"});
    check_refused(st, errc::failed_precondition,
                  "Attempting to use uninitialized value w/accum (in ApplyMomentum node "
                  "'momentum/update_w')");
  }
  CHECK(is_free(w->mutex));
  CHECK(is_free(accum->mutex));
  CHECK(w->version == 0);
}

TEST_CASE("a slot of another shape is refused naming both shapes", "[variable_update]") {
  fixture f;
  auto w = f.variable("w", {1, 2, 3});
  auto accum = f.variable("w/accum", {1, 2});
  kernel_context ctx{f.momentum, *f.dev, 1, f.momentum_inputs(tensor{}, tensor{})};
  variable_update update{host_rules};
  auto st = f.prepare_momentum(update, ctx, {"w", "w/accum"});
  check_refused(st, errc::invalid_argument,
                "ApplyMomentum to variable 'w': the variable is float32[3] but slot "
                "variable 'w/accum' is float32[2]");
}

TEST_CASE("Assign adopts an unshared value, overwrites an unshared buffer and copies otherwise",
          "[variable_update]") {
  fixture f;
  node n = make_node("Assign", "w/Assign", dtype::float32);
  named_kernel kernel{n};
  int overwrites = 0;
  auto overwrite = [&](tensor& stored, const tensor& value) -> status {
    ++overwrites;
    std::memcpy(stored.raw_data(), value.raw_data(), value.bytes());
    return {};
  };
  auto assign = [&](tensor value) {
    std::vector<tensor> inputs;
    inputs.push_back(tensor{});
    inputs.push_back(std::move(value));
    kernel_context ctx{n, *f.dev, 1, std::move(inputs)};
    auto st = assign_variable(ctx, kernel, "w", dtype::float32, host_rules, overwrite);
    INFO(st.to_string());
    REQUIRE(st.ok());
  };
  auto w = f.dev->resources().variable("w");

  // Only the call holds the value: the variable takes its buffer.
  auto first = tensor::from_vector<float>({1, 2, 3});
  const void* first_data = first.raw_data();
  assign(std::move(first));
  CHECK(w->value.raw_data() == first_data);
  CHECK(overwrites == 0);

  // The caller keeps the value, nobody else holds the stored buffer: overwrite it.
  auto kept = tensor::from_vector<float>({4, 5, 6});
  assign(kept);
  CHECK(overwrites == 1);
  CHECK(w->value.raw_data() == first_data);
  CHECK(w->value.to_vector<float>() == std::vector<float>{4, 5, 6});

  // A reader holds the stored buffer too: a private copy replaces it.
  tensor reader = w->value;
  assign(kept);
  CHECK(overwrites == 1);
  CHECK_FALSE(w->value.shares_buffer_with(reader));
  CHECK_FALSE(w->value.shares_buffer_with(kept));
  CHECK(w->version == 3);
}

TEST_CASE("with own memory only an update refuses a variable outside the device's memory",
          "[variable_update]") {
  auto dev = make_test_device(test_device_name(test_device_type),
                              std::make_shared<thread_pool>("test_intra_op", 1), {});
  node n = make_node("ApplyGradientDescent", "sgd/update_w", dtype::float32);
  named_kernel kernel{n};
  auto w = dev->resources().variable("w");
  w->value = tensor::from_vector<float>({1, 2, 3}); // host memory, not the test device's
  std::vector<tensor> inputs;
  inputs.push_back(tensor{});
  inputs.push_back(tensor::scalar<float>(0.5f));
  inputs.push_back(tensor::from_vector<float>({1, 1, 1}));
  kernel_context ctx{n, *dev, 1, std::move(inputs)};
  {
    variable_update update{update_rules{&any_input, true}};
    auto st = update.prepare(ctx, kernel, {"w"}, dtype::float32, {2}, {1});
    check_refused(st, errc::internal,
                  "ApplyGradientDescent: variable 'w' is not in the memory of " +
                    dev->full_name());
  }
  // Without the rule the same update goes ahead.
  variable_update update{host_rules};
  CHECK(update.prepare(ctx, kernel, {"w"}, dtype::float32, {2}, {1}).ok());
}
