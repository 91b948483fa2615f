#pragma once
/// What a device library's collectives across tasks (NCCL's, for CollectiveReduce on GPUs:
/// devices/cuda/kernels/collective_reduce.cpp) need from the group a program offered to the
/// device (devices/task_collective.hpp), written without the library, so that tests run it
/// with a fake one:
/// - A communicator per (group key, device), made at the group's first collective there: rank
///   0 makes an id (ncclGetUniqueId), the group broadcasts it under its reserved instance
///   (bootstrap_collective_instance), and every member joins with it (ncclCommInitRank). Kept
///   for the group's later collectives; dropped when the offer that made it ends, withdrawn or
///   replaced (a group formed again after a lost member has a new key, so a new communicator).
/// - One order of issue. Such a library matches a communicator's collectives by the order in
///   which each member issued them, not by key, and gradient buckets reach their kernels in any
///   order: rank 0 numbers each collective as it comes, the group broadcasts the number under
///   the collective's own instance (the key of its run), and every member issues them in that
///   order.
/// - Abort. A collective that fails or is aborted once it waits on the communicator breaks it
///   (a peer may be stuck in a collective that can no longer complete): the communicator is
///   aborted (ncclCommAbort), whatever waits for it fails, and so does every later collective
///   of the group on that device, as a group that lost a member does. Form the group again.
///   auto& collectives = device_collectives::process();
///   collectives.issue(member, device, instance, factory,
///                     [&](const std::shared_ptr<device_communicator>& comm) {
///                       return enqueue_on(comm);      // this member's part, in the order
///                     },
///                     [&](status why) { fail(why); });
/// No CAF, no CUDA: the group is a task_collective, the library a device_communicator_factory.

#include "devices/task_collective.hpp"
#include "graph/status.hpp"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace actorflow {

/// One member's communicator of a group on one device (an ncclComm_t). Released
/// (ncclCommDestroy) by its destructor, once its last holder (a collective in flight) lets go.
class device_communicator {
public:
  virtual ~device_communicator() = default;
  /// Ends it now, collectives in flight included (ncclCommAbort), so that nothing on the device
  /// waits for peers any more; they fail with `why`. Called at most once, on any thread;
  /// nothing is issued on it after.
  virtual void abort(const status& why) = 0;
};

/// Makes one device's communicators: the library's calls, behind an interface so that the
/// set-up runs without the library (and without a GPU) in tests.
class device_communicator_factory {
public:
  virtual ~device_communicator_factory() = default;
  /// "NCCL", for messages.
  virtual std::string library() const = 0;
  /// The size of a communicator id, the same on every member (NCCL_UNIQUE_ID_BYTES).
  virtual std::size_t id_bytes() const = 0;
  /// A fresh id, made at rank 0 (ncclGetUniqueId).
  virtual result<std::vector<std::uint8_t>> make_id() = 0;
  /// Joins the communicator of `size` members that `id` names, as `rank` (ncclCommInitRank,
  /// which waits for all of them): `done` runs once, on any thread, with it or the error.
  virtual void join(std::vector<std::uint8_t> id, int rank, int size,
                    std::function<void(result<std::shared_ptr<device_communicator>>)> done) = 0;
};

/// The communicators of the groups offered to devices, by (group key, device), and the order
/// of issue on each. Thread-safe.
class device_collectives {
public:
  /// Enqueues this member's part of a collective on `comm` (on the device's stream) and sees to
  /// its completion; an error when it could not be enqueued.
  using issue_fn = std::function<status(const std::shared_ptr<device_communicator>& comm)>;
  using failed_fn = std::function<void(status why)>;

  /// Watches `registry`: the communicators an offer made go when it ends. It must outlive the
  /// collectives it starts (their answers come back to it).
  explicit device_collectives(task_collective_registry& registry);
  device_collectives(const device_collectives&) = delete;
  device_collectives& operator=(const device_collectives&) = delete;

  /// The process's, over task_collectives(); never destroyed (collectives in flight may finish
  /// on their library's threads until the process exits).
  static device_collectives& process();

  /// `member`'s part of the next run of the graph's collective `instance` on `device` (a full
  /// name): once the group has its communicator there (made now through `factory` when it is
  /// the group's first collective there) and every collective rank 0 placed before this one
  /// was issued here, calls `issue` with it, on whatever thread got there, never two of one
  /// communicator at once. Calls `failed` instead, once, with an error naming the group and
  /// the device, when there is no communicator, it breaks before this one's turn, or this one
  /// cannot be placed. Every call takes part in its instance's ordering broadcast, whatever
  /// became of the communicator, so that the members' runs of each instance stay in step.
  void issue(const std::shared_ptr<task_collective>& member, const std::string& device,
             std::int64_t instance, std::shared_ptr<device_communicator_factory> factory,
             issue_fn issue, failed_fn failed);

  /// Breaks the communicator of group `group_key` on `device`, for a collective on it that
  /// failed or was aborted: aborts it (so that nothing waits for peers any more), fails what
  /// waits for it with `why`, and every later collective of the group there. Nothing when the
  /// group has none there, or it broke already.
  void abort(std::int64_t group_key, const std::string& device, const status& why);

  /// Communicators kept, made or being made (broken ones too, until their offer ends).
  std::size_t kept() const;

private:
  struct entry;
  struct queued {
    issue_fn issue;
    failed_fn failed;
  };

  void make_communicator(const std::shared_ptr<entry>& e,
                         const std::shared_ptr<task_collective>& member,
                         std::shared_ptr<device_communicator_factory> factory);
  void joined(const std::shared_ptr<entry>& e, result<std::shared_ptr<device_communicator>> made);
  /// Takes part in `instance`'s ordering broadcast, then queues the collective at its place;
  /// `ready` is how making the communicator went.
  void take_place(const std::shared_ptr<entry>& e, const std::shared_ptr<task_collective>& member,
                  std::int64_t instance, status ready, queued collective);
  void enqueue(const std::shared_ptr<entry>& e, std::int64_t place, queued collective);
  /// Issues queued collectives in order while the next one is there; on one thread at a time.
  void issue_in_order(const std::shared_ptr<entry>& e);
  /// Ends `e`: its waiters fail with `why`, its communicator is aborted (`abort`) or let go.
  void end(const std::shared_ptr<entry>& e, const status& why, bool abort);
  void withdrawn(const std::string& device, const std::shared_ptr<task_collective>& group);

  mutable std::mutex mutex_;
  std::map<std::pair<std::int64_t, std::string>, std::shared_ptr<entry>> entries_;
  // Last: its calls use the rest.
  task_collective_registry::watch watch_;
};

} // namespace actorflow
