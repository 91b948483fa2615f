// CollectiveReduce on GPUs: this device's member of a group across tasks
// (devices/task_collective.hpp) all-reduces in device memory with NCCL, on the card's compute
// stream, over one communicator per (group, device) that devices/device_collectives.hpp sets
// up through the group (rank 0's ncclGetUniqueId, broadcast; ncclCommInitRank on every member)
// and issues on in rank 0's order. The op and its attributes are the CPU kernel's
// (devices/cpu/kernels/collective_reduce.cpp).
// The kernel is done once its all-reduce is, not once it is enqueued as other GPU kernels are,
// so that the wait can end: an aborted step, the group's bound passing, or NCCL's own error (a
// peer lost) aborts the communicator (ncclCommAbort), which breaks the group on this device
// (form it again, as after a lost member). Built where the toolkit has nccl.h; NCCL itself is
// loaded at the first use.
#include "devices/cuda/cuda_kernel_util.hpp"
#include "devices/cuda/kernels/cuda_kernels.hpp"
#include "devices/kernel.hpp"

#if __has_include(<nccl.h>)
#include "devices/cuda/nccl_library.hpp"
#include "devices/device_collectives.hpp"
#include "devices/task_collective.hpp"

#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

namespace actorflow::cuda {

namespace {

/// One member's NCCL communicator of a group on one GPU.
class nccl_communicator final : public device_communicator {
public:
  nccl_communicator(const nccl_library& nccl, ncclComm_t comm, int ordinal, std::string what)
    : nccl_(nccl), comm_(comm), ordinal_(ordinal), what_(std::move(what)) {}

  ~nccl_communicator() override {
    if (aborted_)
      return; // ncclCommAbort freed it
    // Its last collective has finished (its probe held it until then): nothing waits on peers.
    (void)cudaSetDevice(ordinal_);
    (void)nccl_.comm_destroy(comm_);
  }

  void abort(const status& why) override {
    // Under the lock, and marked before the call: a probe that then finds its collective's
    // event done and the mark unset saw it finish on its own, not cut short by the abort.
    std::lock_guard<std::mutex> guard{mutex_};
    if (aborted_)
      return;
    aborted_ = true;
    why_ = why;
    (void)cudaSetDevice(ordinal_);
    (void)nccl_.comm_abort(comm_);
  }

  /// Why its collectives in flight cannot be trusted: it was aborted, or NCCL found an error
  /// of its own (a peer lost); ok otherwise. Quick: for probes.
  status trouble() const {
    std::lock_guard<std::mutex> guard{mutex_};
    if (aborted_)
      return why_;
    ncclResult_t found = ncclSuccess;
    auto asked = nccl_.comm_get_async_error(comm_, &found);
    if (asked != ncclSuccess)
      found = asked;
    if (found == ncclSuccess || found == ncclInProgress)
      return {};
    return make_error(errc::unavailable, "NCCL failed on the communicator of " + what_ + ": " +
                                           nccl_.describe(found, comm_));
  }

  /// Enqueues an all-reduce on `stream`; the error names the group and device.
  status all_reduce(const void* in, void* out, std::size_t count, ncclDataType_t type,
                    ncclRedOp_t op, cudaStream_t stream) const {
    {
      std::lock_guard<std::mutex> guard{mutex_};
      if (aborted_)
        return why_;
    }
    // Outside the lock: the first collective connects to the peers and waits for them, and an
    // abort must be able to end that wait (ncclCommAbort is meant to be called meanwhile).
    auto issued = nccl_.all_reduce(in, out, count, type, op, comm_, stream);
    if (issued != ncclSuccess)
      return make_error(errc::internal, "ncclAllReduce on the communicator of " + what_ + ": " +
                                          nccl_.describe(issued, comm_));
    return {};
  }

private:
  const nccl_library& nccl_;
  ncclComm_t comm_;
  int ordinal_;
  std::string what_;
  mutable std::mutex mutex_;
  bool aborted_ = false;
  status why_;
};

/// Makes the communicators of one GPU.
class nccl_factory final : public device_communicator_factory {
public:
  nccl_factory(const nccl_library& nccl, int ordinal, std::string what)
    : nccl_(nccl), ordinal_(ordinal), what_(std::move(what)) {}

  std::string library() const override { return "NCCL"; }
  std::size_t id_bytes() const override { return sizeof(ncclUniqueId); }

  result<std::vector<std::uint8_t>> make_id() override {
    ncclUniqueId id{};
    AF_NCCL_RETURN_IF_ERROR(nccl_, nccl_.get_unique_id(&id));
    const auto* bytes = reinterpret_cast<const std::uint8_t*>(&id);
    return std::vector<std::uint8_t>(bytes, bytes + sizeof id);
  }

  void join(std::vector<std::uint8_t> id, int rank, int size,
            std::function<void(result<std::shared_ptr<device_communicator>>)> done) override {
    // ncclCommInitRank waits for every rank: on a thread of its own, so that no CAF or kernel
    // thread waits with it (two members in one process would wait for each other). Detached:
    // a rank that never comes leaves it waiting, and the collectives that wait for the
    // communicator end at their bound or their step's abort.
    auto init = [nccl = &nccl_, ordinal = ordinal_, what = what_, id = std::move(id), rank, size,
                 done]() {
      auto made = [&]() -> result<std::shared_ptr<device_communicator>> {
        AF_CUDA_RETURN_IF_ERROR(cudaSetDevice(ordinal));
        ncclUniqueId unique{};
        std::memcpy(&unique, id.data(), sizeof unique);
        ncclComm_t comm = nullptr;
        AF_NCCL_RETURN_IF_ERROR(*nccl, nccl->comm_init_rank(&comm, size, unique, rank));
        return std::shared_ptr<device_communicator>{
          std::make_shared<nccl_communicator>(*nccl, comm, ordinal, what)};
      }();
      done(std::move(made));
    };
    try {
      std::thread{std::move(init)}.detach();
    } catch (const std::system_error& e) {
      done(make_error(errc::resource_exhausted,
                      "no thread for ncclCommInitRank on " + what_ + ": " + e.what()));
    }
  }

private:
  const nccl_library& nccl_;
  int ordinal_;
  std::string what_;
};

ncclRedOp_t nccl_op(reduction r) {
  switch (r) {
    case reduction::sum: return ncclSum;
    // The sum over the group divided by its size, in the element type.
    case reduction::mean: return ncclAvg;
    case reduction::max: return ncclMax;
    case reduction::min: return ncclMin;
  }
  return ncclSum;
}

/// One run of the kernel, shared by the completion probe, the step's cancellation and the
/// issue, which may run on other threads; the probe alone ends it (ctx lives until done()).
struct collective_run {
  std::mutex mutex;
  /// Why it ends early: the step aborted, or device_collectives could not issue it.
  status stopped;
  /// Once issued: its communicator, and what says the all-reduce has finished.
  std::shared_ptr<nccl_communicator> comm;
  std::optional<completion_poller::probe> finished;
  /// Held until the all-reduce has finished: NCCL reads and writes them.
  tensor in, out;
  std::uint64_t cancel_token = 0;

  void stop(status why) {
    std::lock_guard<std::mutex> guard{mutex};
    if (stopped.ok())
      stopped = std::move(why);
  }
};

class nccl_collective_reduce_kernel final : public op_kernel {
public:
  explicit nccl_collective_reduce_kernel(const node& n)
    : op_kernel(n), attrs_(collective_reduce_attrs::of(n)) {}

  bool is_async() const override { return true; }
  void compute(kernel_context& ctx) override {
    ctx.fail(make_error(errc::internal, "CollectiveReduce runs only asynchronously"));
  }

  void compute_async(kernel_context& ctx, std::function<void()> done) override {
    if (auto st = start(ctx, done); !st.ok()) {
      ctx.fail(std::move(st));
      done();
    }
  }

private:
  /// Starts the run; on an error nothing is under way and done() is not called.
  status start(kernel_context& ctx, const std::function<void()>& done) {
    const auto device = ctx.dev().full_name();
    auto found = attrs_.member_on(device);
    if (!found)
      return found.error();
    auto member = std::move(*found);
    const auto what = member->describe() + " on " + device;
    auto nccl = nccl_library_loaded();
    if (!nccl)
      return nccl.error().with_context("CollectiveReduce of " + what);
    auto card = card_handle_of(ctx);
    if (!card)
      return card.error();
    AF_RETURN_IF_ERROR(card->make_current());
    const tensor& in = ctx.input(0);
    AF_RETURN_IF_ERROR(expect_input(ctx, 0, in.type()));
    auto type = nccl_type(in.type(), "CollectiveReduce");
    if (!type)
      return type.error();
    auto run = std::make_shared<collective_run>();
    run->in = in;
    AF_RETURN_IF_ERROR(
      run_guarded([&] { run->out = ctx.allocate_output(0, in.type(), in.shape()); }));

    auto* cancellation = ctx.cancellation();
    if (cancellation != nullptr) {
      run->cancel_token = cancellation->add([run, what] {
        run->stop(make_error(errc::aborted,
                             "the step was aborted while its part of " + what + " ran"));
      });
      if (run->cancel_token == 0)
        return make_error(errc::aborted, "the step was aborted before its part of " + what);
    }

    using clock = std::chrono::steady_clock;
    const auto bound = member->timeout_seconds();
    const auto deadline =
      bound > 0 ? clock::now() + std::chrono::duration_cast<clock::duration>(
                                   std::chrono::duration<double>(bound))
                : clock::time_point::max();
    const auto instance = attrs_.instance;
    auto probe = [run, deadline, bound, what, instance]() -> completion_poller::probe_result {
      std::lock_guard<std::mutex> guard{run->mutex};
      if (!run->stopped.ok())
        return completion_poller::probe_result::failed(run->stopped);
      if (run->finished) {
        // The event first, then the communicator's state (see nccl_communicator::abort).
        auto reduced = (*run->finished)();
        if (auto trouble = run->comm->trouble(); !trouble.ok())
          return completion_poller::probe_result::failed(std::move(trouble));
        if (reduced.finished)
          return reduced;
      }
      if (clock::now() >= deadline) {
        std::ostringstream seconds;
        seconds << bound;
        return completion_poller::probe_result::failed(make_error(
          errc::deadline_exceeded, "CollectiveReduce instance " + std::to_string(instance) +
                                     " of " + what + " did not finish within the group's " +
                                     "bound of " + seconds.str() + " s"));
      }
      return completion_poller::probe_result::pending();
    };
    auto key = member->key();
    card->when_finished(std::move(probe), [&ctx, done, run, cancellation, key,
                                           device](status ended) {
      if (cancellation != nullptr)
        cancellation->remove(run->cancel_token);
      if (!ended.ok()) {
        // The all-reduce may still wait for peers on this card's stream, and the peers for
        // this member's part: the communicator is aborted, so that the stream waits no longer
        // (the peers' own bounds, aborts or NCCL's errors end theirs). Nothing when it broke
        // already or was never made.
        device_collectives::process().abort(key, device, ended);
        ctx.fail(ended);
      }
      {
        // NCCL is done with the buffers (or was aborted): the allocator may hand them out. An
        // issue still to come finds the run ended (a deadline leaves `stopped` unset).
        std::lock_guard<std::mutex> guard{run->mutex};
        if (run->stopped.ok() && !ended.ok())
          run->stopped = ended;
        run->in = {};
        run->out = {};
      }
      done();
    });

    auto factory = std::make_shared<nccl_factory>(**nccl, card->ordinal(), what);
    const auto count = static_cast<std::size_t>(in.num_elements());
    const auto op = nccl_op(*attrs_.op);
    device_collectives::process().issue(
      member, device, instance, std::move(factory),
      [run, card = *card, count, type = *type, op](
        const std::shared_ptr<device_communicator>& comm) -> status {
        auto* nccl_comm = dynamic_cast<nccl_communicator*>(comm.get());
        if (nccl_comm == nullptr)
          return make_error(errc::internal, "the communicator is not NCCL's");
        const void* in = nullptr;
        void* out = nullptr;
        {
          std::lock_guard<std::mutex> guard{run->mutex};
          // Ended before its turn: its peers issue theirs, so this one's end must break it.
          if (!run->stopped.ok())
            return run->stopped;
          in = run->in.raw_data();
          out = run->out.raw_data();
        }
        AF_RETURN_IF_ERROR(card.make_current());
        AF_RETURN_IF_ERROR(
          nccl_comm->all_reduce(in, out, count, type, op, card.compute_stream()));
        auto finished = card.compute_stream_probe();
        if (!finished)
          return finished.error();
        std::lock_guard<std::mutex> guard{run->mutex};
        run->comm = std::shared_ptr<nccl_communicator>{comm, nccl_comm};
        run->finished = std::move(*finished);
        return {};
      },
      [run](status why) { run->stop(std::move(why)); });
    return {};
  }

  collective_reduce_attrs attrs_;
};

} // namespace

void register_collective_reduce_kernels(kernel_registry& registry) {
  registry.add("CollectiveReduce", "GPU",
               {dtype::float32, dtype::float64, dtype::int32, dtype::int64},
               make_kernel<nccl_collective_reduce_kernel>);
}

} // namespace actorflow::cuda

#else

namespace actorflow::cuda {

// A toolkit without NCCL: CollectiveReduce nodes on GPUs have no kernel, and placement says so.
void register_collective_reduce_kernels(kernel_registry&) {}

} // namespace actorflow::cuda

#endif
