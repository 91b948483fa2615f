// What a build registers for GPUs: kernels for ops and dtypes the CPU has (so a graph means the
// same thing on both), and a make_cuda_device that says why it makes no device where there is
// no GPU. Runs in every build; a build without CUDA registers no GPU kernel at all.
#include "devices/cuda/cuda_device.hpp"
#include "devices/kernel.hpp"

#include <catch2/catch.hpp>

#include <algorithm>

using namespace actorflow;

TEST_CASE("every GPU kernel is for an op and dtype the CPU has a kernel for", "[cuda][registry]") {
  auto& registry = kernel_registry::global();
  auto cpu = registry.kernels_for("CPU");
  for (auto& name : registry.kernels_for("GPU")) {
    INFO("GPU kernel " << name);
    CHECK(std::binary_search(cpu.begin(), cpu.end(), name));
  }
}

TEST_CASE("GPU kernels, where built, cover a training step's ops", "[cuda][registry]") {
  auto& registry = kernel_registry::global();
  if (!registry.has("MatMul", "GPU", dtype::float32))
    return; // a build without CUDA
  for (const char* op : {"Const", "Identity", "NoOp", "Placeholder", "VariableV2", "Reshape",
                         "MatMul", "Add", "Sub", "Mul", "Div", "Relu", "ReluGrad", "Sigmoid",
                         "Tanh", "Sum", "Mean", "Max", "ArgMax", "ArgMin", "Cumsum", "Cast", "Fill", "Softmax",
                         "SoftmaxCrossEntropyWithLogits", "SumToShapeOf", "BroadcastToShapeOf",
                         "AddN", "Assign", "AssignAdd", "AssignSub", "ApplyGradientDescent",
                         "ApplyMomentum", "ApplyAdam"}) {
    INFO(op);
    CHECK(registry.has(op, "GPU", dtype::float32));
  }
}

TEST_CASE("GPU kernels, where built, cover control flow and what the RNN runs", "[cuda][registry]") {
  auto& registry = kernel_registry::global();
  if (!registry.has("MatMul", "GPU", dtype::float32))
    return; // a build without CUDA
  for (const char* op : {"Switch", "Merge", "Enter", "Exit", "NextIteration", "StackPush",
                         "StackPop", "Gather", "Less", "Greater"}) {
    INFO(op);
    CHECK(registry.has(op, "GPU", dtype::float32));
  }
  for (const char* op : {"LoopCond", "LogicalAnd", "LogicalNot", "Switch"}) {
    INFO(op);
    CHECK(registry.has(op, "GPU", dtype::boolean));
  }
  CHECK(registry.has("Less", "GPU", dtype::int32));
}

TEST_CASE("GPU kernels where built cover pooling and the convolutions as one family",
          "[cuda][registry]") {
  auto& registry = kernel_registry::global();
  if (!registry.has("MatMul", "GPU", dtype::float32))
    return; // a build without CUDA
  for (const char* op : {"MaxPool", "MaxPoolGrad", "AvgPool", "AvgPoolGrad"})
    for (auto type : {dtype::float32, dtype::float64}) {
      INFO(op << " " << to_string(type));
      CHECK(registry.has(op, "GPU", type));
    }
  // On cuDNN (float32 only): all three or none, so that a training step's convolution and its
  // gradients run on one side.
  bool forward = registry.has("Conv2D", "GPU", dtype::float32);
  CHECK(registry.has("Conv2DBackpropInput", "GPU", dtype::float32) == forward);
  CHECK(registry.has("Conv2DBackpropFilter", "GPU", dtype::float32) == forward);
}

TEST_CASE("GPU kernels where built cover Transpose, Shape, Size and Rank for every dtype",
          "[cuda][registry]") {
  auto& registry = kernel_registry::global();
  if (!registry.has("MatMul", "GPU", dtype::float32))
    return; // a build without CUDA
  for (auto type : all_dtypes())
    for (const char* op : {"Transpose", "Shape", "Size", "Rank"}) {
      INFO(op << " " << to_string(type));
      // Without a GPU Shape, placement would put it on the CPU and copy its whole input there.
      CHECK(registry.has(op, "GPU", type));
    }
}

TEST_CASE("GPU kernels where built with NCCL all-reduce across tasks the number types AllReduce does",
          "[cuda][registry]") {
  auto& registry = kernel_registry::global();
  if (!registry.has("AllReduce", "GPU", dtype::float32))
    return; // a build without CUDA, or a toolkit without nccl.h
  for (auto type : {dtype::float32, dtype::float64, dtype::int32, dtype::int64}) {
    INFO(to_string(type));
    CHECK(registry.has("CollectiveReduce", "GPU", type));
  }
  CHECK_FALSE(registry.has("CollectiveReduce", "GPU", dtype::boolean));
}

TEST_CASE("making a CUDA device where there is none says why", "[cuda][registry]") {
  if (gpu_count() > 0)
    return; // a GPU machine makes one (the kernel tests use it)
  auto made = make_cuda_device(device_name::parse("/job:localhost/replica:0/task:0/device:GPU:0").value(),
                               0, nullptr, gpu_options{});
  REQUIRE_FALSE(made.ok());
  auto message = made.error().message();
  INFO(message);
  CHECK(message.find("GPU:0") != std::string::npos);
  // The device's name is in every such error; the reason is what says why: a build without
  // CUDA, or what the driver told (no driver, no device visible).
  bool says_why = message.find("no CUDA support") != std::string::npos ||
                  message.find(gpu_absence_reason()) != std::string::npos;
  CHECK(says_why);
}
