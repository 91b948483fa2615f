// AllReduce on GPUs through NCCL (MirroredStrategy's all-reduce): the members of a group, one
// per GPU of this process, meet in a rendezvous (devices/collective.hpp); the last issues one
// ncclAllReduce per member inside an NCCL group, each on its GPU's compute stream, so every
// member's output is ready in its stream's order. Communicators are made once per set of GPUs
// (ncclCommInitAll) and kept. The op, its attributes and its pruning and cancellation rules
// are the CPU kernel's (devices/cpu/kernels/all_reduce.cpp). Built where the toolkit has
// nccl.h; NCCL itself is loaded at the first use (devices/cuda/nccl_library.hpp).
#include "devices/collective.hpp"
#include "devices/cuda/cuda_kernel_util.hpp"
#include "devices/cuda/kernels/cuda_kernels.hpp"
#include "devices/kernel.hpp"

#if __has_include(<nccl.h>)
#include "devices/cuda/nccl_library.hpp"

#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

namespace actorflow::cuda {

namespace {

/// One GPU's part in an AllReduce.
struct nccl_member {
  int ordinal = 0;
  cudaStream_t stream = nullptr;
  const void* in = nullptr;
  void* out = nullptr;
  std::size_t count = 0;
  dtype type = dtype::float32;
  std::function<void(status)> done;
};

collective_rendezvous<nccl_member>& nccl_collectives() {
  static collective_rendezvous<nccl_member> rendezvous;
  return rendezvous;
}

/// The communicators of one set of GPUs, in rank order, made at the first use and kept.
result<std::vector<ncclComm_t>> communicators(const nccl_library& nccl,
                                              const std::vector<int>& ordinals) {
  static std::mutex mutex;
  static auto* made = new std::map<std::vector<int>, std::vector<ncclComm_t>>;
  std::lock_guard<std::mutex> guard{mutex};
  auto& comms = (*made)[ordinals];
  if (comms.empty()) {
    std::vector<ncclComm_t> fresh(ordinals.size());
    AF_NCCL_RETURN_IF_ERROR(nccl, nccl.comm_init_all(fresh.data(), static_cast<int>(fresh.size()),
                                                     ordinals.data()));
    comms = std::move(fresh);
  }
  return comms;
}

/// Enqueues every member's part of the collective on its stream.
status all_reduce(std::vector<nccl_member>& by_rank, bool mean) {
  auto nccl = nccl_library_loaded();
  if (!nccl)
    return nccl.error();
  const auto& lib = **nccl;
  std::vector<int> ordinals;
  std::set<int> distinct;
  for (auto& m : by_rank) {
    ordinals.push_back(m.ordinal);
    distinct.insert(m.ordinal);
    if (m.count != by_rank.front().count || m.type != by_rank.front().type)
      return make_error(errc::invalid_argument,
                        "AllReduce members differ: " + std::to_string(by_rank.front().count) +
                          " " + to_string(by_rank.front().type) + " elements and " +
                          std::to_string(m.count) + " " + to_string(m.type));
  }
  // NCCL keeps one rank per GPU.
  if (distinct.size() != ordinals.size())
    return make_error(errc::invalid_argument,
                      "NCCL AllReduce needs each member on a GPU of its own; " +
                        std::to_string(ordinals.size()) + " members share " +
                        std::to_string(distinct.size()) + " GPU(s)");
  auto type = nccl_type(by_rank.front().type, "AllReduce");
  if (!type)
    return type.error();
  // Groups complete on whichever thread brings their last member. NCCL forbids issuing on a
  // communicator (or on several of one device) from two threads at once, and two groups
  // interleaved here could reach GPU 0's stream as A, B and GPU 1's as B, A: each collective
  // then waits for peers that are stuck behind the other, and the GPUs hang. One group at a
  // time enqueues on every stream, in the same order everywhere.
  static std::mutex launching;
  std::lock_guard<std::mutex> one_group{launching};
  auto comms = communicators(lib, ordinals);
  if (!comms)
    return comms.error();
  // ncclAvg averages in the element type, as the CPU's mean divides the rank-order sum.
  auto op = mean ? ncclAvg : ncclSum;
  AF_NCCL_RETURN_IF_ERROR(lib, lib.group_start());
  status launched;
  for (std::size_t r = 0; r < by_rank.size() && launched.ok(); ++r) {
    auto& m = by_rank[r];
    auto issued = lib.all_reduce(m.in, m.out, m.count, *type, op, (*comms)[r], m.stream);
    if (issued != ncclSuccess)
      launched = make_error(errc::internal, std::string{"ncclAllReduce for GPU "} +
                                              std::to_string(m.ordinal) + ": " +
                                              lib.error_string(issued));
  }
  AF_NCCL_RETURN_IF_ERROR(lib, lib.group_end());
  return launched;
}

class nccl_all_reduce_kernel final : public op_kernel {
public:
  explicit nccl_all_reduce_kernel(const node& n)
    : op_kernel(n), attrs_(all_reduce_attrs::of(n)) {}

  bool is_async() const override { return true; }
  void compute(kernel_context& ctx) override {
    ctx.fail(make_error(errc::internal, "AllReduce runs only asynchronously"));
  }

  void compute_async(kernel_context& ctx, std::function<void()> done) override {
    // The executor keeps ctx alive until done() runs.
    auto finish = [&ctx, done](status st) {
      if (!st.ok())
        ctx.fail(std::move(st));
      done();
    };
    auto member = prepare(ctx, finish);
    if (!member) {
      finish(member.error());
      return;
    }
    auto where = attrs_.in_step(ctx.step_id());
    auto mean = attrs_.mean;
    nccl_collectives().join_in_step(
      where, std::move(*member),
      [mean, where](std::vector<nccl_member>& by_rank) {
        auto st = all_reduce(by_rank, mean);
        if (!st.ok())
          st = st.with_context(where.describe());
        for (auto& m : by_rank)
          m.done(st);
      },
      ctx.cancellation());
  }

private:
  result<nccl_member> prepare(kernel_context& ctx, std::function<void(status)> finish) {
    if (attrs_.group.empty())
      return make_error(errc::invalid_argument, "AllReduce has no group_key");
    auto stream = compute_stream_of(ctx);
    if (!stream)
      return stream.error();
    nccl_member m;
    AF_CUDA_RETURN_IF_ERROR(cudaGetDevice(&m.ordinal));
    const tensor& in = ctx.input(0);
    AF_RETURN_IF_ERROR(expect_input(ctx, 0, in.type()));
    tensor out;
    AF_RETURN_IF_ERROR(run_guarded([&] { out = ctx.allocate_output(0, in.type(), in.shape()); }));
    m.stream = *stream;
    m.in = in.raw_data();
    m.out = out.raw_data();
    m.count = static_cast<std::size_t>(in.num_elements());
    m.type = in.type();
    m.done = std::move(finish);
    return m;
  }

  all_reduce_attrs attrs_;
};

} // namespace

void register_all_reduce_kernels(kernel_registry& registry) {
  registry.add("AllReduce", "GPU", {dtype::float32, dtype::float64, dtype::int32, dtype::int64},
               make_kernel<nccl_all_reduce_kernel>);
}

} // namespace actorflow::cuda

#else

namespace actorflow::cuda {

// A toolkit without NCCL: AllReduce members on GPUs have no kernel, and placement says so.
void register_all_reduce_kernels(kernel_registry&) {}

} // namespace actorflow::cuda

#endif
