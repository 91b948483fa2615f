#include "actors/task_service.hpp"
#include "graph/rendezvous_key.hpp"

#include "actors/bulk_channel.hpp"
#include "actors/collective.hpp"
#include "actors/device_actor.hpp"
#include "actors/master.hpp"
#include "actors/logging.hpp"
#include "actors/shard_actor.hpp"
#include "actors/protocols/master.hpp"
#include "actors/protocols/device.hpp"
#include "devices/device.hpp"
#include "devices/cpu/blas_kernels.hpp"
#include "devices/device_factory.hpp"
#include "devices/runtime_env.hpp"
#include "devices/thread_pool.hpp"

#include <caf/all.hpp>
#include <caf/io/basp_broker.hpp>
#include <caf/io/middleman.hpp>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <utility>

namespace actorflow {

namespace {

using namespace protocol;


/// Everything a task owns. The pools outlive the device actors that use them: each device
/// holds its intra-op pool and each actor's options hold the inter-op pool.
struct task_state {
  std::string job;
  int task = 0;
  std::uint64_t incarnation = 0;
  task_service_options options;
  std::shared_ptr<thread_pool> inter_op;
  std::shared_ptr<thread_pool> intra_op;
  /// Full name and actor of every device, in device order.
  std::vector<std::pair<std::string, device_actor>> devices;
  /// device_list::kernels: each device type's kernels, listed once when the devices are made.
  std::vector<std::pair<std::string, std::vector<std::string>>> kernel_sets;
  /// A shard actor per variable of the devices, spawned as each variable appears; stopped with
  /// the task (set when the task starts).
  std::shared_ptr<shard_table> shards;
  /// Tasks of other jobs that reported they finished, by job.
  std::map<std::string, std::set<std::int32_t>> finished;
  /// Workers that joined (task_joined_atom) and still live: (job, task) by their actor.
  std::map<caf::actor_addr, std::pair<std::string, std::int32_t>> joined;
  /// Jobs that had joined workers.
  std::set<std::string> joined_jobs;

  /// Whether job `job` has joined workers, none of them alive and unfinished, and not every
  /// task of it finished: nobody will use this task for that job again.
  bool abandoned_by(const std::string& job) const {
    if (joined_jobs.count(job) == 0 || !options.cluster)
      return false;
    auto done = finished.find(job);
    auto finished_count = done == finished.end() ? 0 : done->second.size();
    if (static_cast<int>(finished_count) >= options.cluster->num_tasks(job))
      return false;
    for (auto& [addr, who] : joined)
      if (who.first == job && (done == finished.end() || done->second.count(who.second) == 0))
        return false;
    return true;
  }
  /// The master this task serves, spawned on the first master message; null before.
  master_actor master;
  /// The task's collective member (actors/collective.hpp), spawned on first use; the members
  /// other tasks introduced, by (job, task); and this process's askers waiting for one.
  collective_actor collective;
  /// The member, for the bulk endpoint's reader threads (set once it is spawned).
  struct collective_inbox {
    std::mutex mutex;
    collective_actor member;
  };
  std::shared_ptr<collective_inbox> collective_frames = std::make_shared<collective_inbox>();
  std::map<std::pair<std::string, std::int32_t>, collective_member_info> introduced;
  std::multimap<std::pair<std::string, std::int32_t>,
                caf::typed_response_promise<collective_member_info>>
    awaiting_introduction;
  /// Large tensors out (shared with the device actors) and in (null without bulk_host).
  /// Both are shut down with the task: the state dies when the task service terminates.
  std::shared_ptr<bulk_sender> bulk_out = std::make_shared<bulk_sender>();
  std::unique_ptr<bulk_endpoint> bulk_in;

  ~task_state() {
    bulk_in.reset();
    bulk_out->close();
    if (shards)
      shards->stop();
  }

  std::string task_name() const {
    return actorflow::task_name(job, task);
  }

  device_list list_devices() const {
    return device_list{devices, bulk_in ? bulk_in->address() : std::string{}, incarnation,
                       kernel_sets};
  }

  task_manifest manifest() {
    task_manifest out;
    out.devices = list_devices();
    out.shards = shards->all();
    return out;
  }

  peer_table own_peers() const {
    peer_table peers;
    for (auto& [name, actor] : devices) {
      peers.devices.emplace(name, actor);
      peers.incarnations.emplace(name, incarnation);
    }
    return peers;
  }

  static inline const char* name = "actorflow.task_service";
};

/// Local only: the grace period after the workers of a job went away has passed.
using grace_atom = caf::atom_constant<caf::atom("grace")>;

/// What a task service handles: its protocol plus its own timer message.
using task_actor_impl = task_actor::extend<caf::reacts_to<grace_atom, std::string>>;
using task_self = task_actor_impl::stateful_pointer<task_state>;

/// Stops the task's bulk channel, devices, shards and master, then the task itself, with
/// `reason` (a normal end, or abandoned: see ended_abandoned).
void shut_down(task_self self, caf::error reason) {
  auto& st = self->state;
  st.bulk_in.reset();
  st.bulk_out->close();
  for (auto& [name, actor] : st.devices)
    self->send_exit(actor, caf::exit_reason::user_shutdown);
  st.shards->stop();
  if (st.master)
    self->send_exit(st.master, caf::exit_reason::user_shutdown);
  if (st.collective)
    self->send_exit(st.collective, caf::exit_reason::user_shutdown);
  self->quit(std::move(reason));
}

/// The task's master, spawned the first time a client needs one (TensorFlow servers serve the
/// master service too): it knows this task already and reaches the cluster's others.
const master_actor& master_of(task_self self) {
  auto& st = self->state;
  if (!st.master) {
    master_options master;
    master.task_services.push_back(caf::actor_cast<task_actor>(self));
    master.cluster = st.options.cluster;
    master.own_task = st.task_name();
    master.timeout_seconds = st.options.master_timeout_seconds;
    master.connect_timeout_seconds = st.options.master_connect_timeout_seconds;
    master.device_filters = st.options.master_device_filters;
    st.master = spawn_master(self->system(), std::move(master));
    self->link_to(st.master);
  }
  return st.master;
}

/// The task's collective member, spawned (and linked: it goes with the task) on first use.
collective_member_info collective_member_of_task(task_self self) {
  auto& st = self->state;
  collective_member_options options;
  options.job = st.job;
  options.task = st.task;
  options.incarnation = st.incarnation;
  // Large pieces come over the task's bulk channel and leave through its sender.
  options.bulk = st.bulk_out;
  options.bulk_address = st.bulk_in ? st.bulk_in->address() : std::string{};
  if (!st.collective) {
    st.collective = spawn_collective_member(self->system(), options);
    self->link_to(st.collective);
    std::lock_guard<std::mutex> guard{st.collective_frames->mutex};
    st.collective_frames->member = st.collective;
  }
  return collective_member_of(st.collective, options);
}

/// Hands a master message to the task's master, which answers the sender directly.
template <class Answer, class... Ts>
caf::typed_response_promise<Answer> forward_to_master(task_self self, Ts&&... xs) {
  auto rp = self->template make_response_promise<Answer>();
  rp.delegate(master_of(self), std::forward<Ts>(xs)...);
  return rp;
}

/// Direct links between tasks: a task dials the tasks of the peer tables it is told whose names
/// sort after its own, so that tensors between them travel on a connection of their own rather
/// than through the master's process, and keep doing so when the master restarts. A link that
/// went down while both tasks live on (a network partition; TCP_USER_TIMEOUT ends it) is
/// dialled again with the next peer table. One dialer per pair, and one dial at a time per
/// node: two connections between the same nodes would have CAF 0.17 close one and kill the
/// proxies routed over it (shared/NOTES.md).
class direct_links : public std::enable_shared_from_this<direct_links> {
public:
  direct_links(caf::actor_system& sys, std::string own_task,
               std::shared_ptr<const cluster_spec> cluster)
    : sys_(sys), own_task_(std::move(own_task)), cluster_(std::move(cluster)) {}

  void dial(const peer_table& table) {
    if (!cluster_ || !sys_.has_middleman())
      return;
    for (auto& [device, actor] : table.devices) {
      auto name = device_name::parse(device);
      if (!name || !name->job || !name->task || !actor || actor.node() == sys_.node())
        continue;
      auto task = task_name(*name->job, *name->task);
      if (task <= own_task_)
        continue;
      auto address = cluster_->address(*name->job, *name->task);
      if (!address)
        continue;
      auto split = parse_host_port(*address);
      if (!split)
        continue;
      {
        std::lock_guard<std::mutex> lock{mutex_};
        if (!dialing_.insert(actor.node()).second)
          continue;
      }
      dial_unless_connected(actor.node(), split->host, split->port);
    }
  }

private:
  /// Dials host:port unless this node has a direct connection to `node` already (made by an
  /// earlier dial, or by a task that serves as master): a second one would be closed as
  /// redundant, which CAF 0.17 mishandles under TLS. Until the dial is up, tensors take the
  /// relayed route as before.
  void dial_unless_connected(const caf::node_id& node, const std::string& host,
                             std::uint16_t port) {
    auto basp = sys_.middleman().named_broker<caf::io::basp_broker>(caf::atom("BASP"));
    auto middleman = sys_.middleman().actor_handle();
    auto links = shared_from_this();
    sys_.spawn([=](caf::event_based_actor* self) {
      auto finished = [=] {
        links->dial_ended(node);
        self->quit();
      };
      auto bound = std::chrono::seconds(10);
      self->request(basp, bound, caf::get_atom::value, node)
        .then(
          [=](const caf::node_id&, const std::string& direct_host, std::uint16_t) {
            if (!direct_host.empty()) {
              finished();
              return;
            }
            self->request(middleman, bound, caf::connect_atom::value, host, port)
              .then([=](const caf::node_id&, const caf::strong_actor_ptr&,
                        const std::set<std::string>&) { finished(); },
                    [=](caf::error&) { finished(); });
          },
          [=](caf::error&) { finished(); });
    });
  }

  void dial_ended(const caf::node_id& node) {
    std::lock_guard<std::mutex> lock{mutex_};
    dialing_.erase(node);
  }

  caf::actor_system& sys_;
  std::string own_task_;
  std::shared_ptr<const cluster_spec> cluster_;
  std::mutex mutex_;
  /// Nodes with a dial (or its check for an existing connection) in progress.
  std::set<caf::node_id> dialing_;
};

task_actor_impl::behavior_type task_service(task_self self, std::string job, int task,
                                            task_service_options options) {
  auto& st = self->state;
  st.job = job;
  st.task = task;
  st.incarnation = options.incarnation;
  // A fresh number per start: tensors keyed for an earlier life of this task never match a
  // step of this one.
  if (st.incarnation == 0)
    st.incarnation = new_incarnation();
  auto& env = env_or_default(options.env);
  env.prepare_host_memory();
  auto pools = options.pools.inter_op && options.pools.intra_op
                 ? options.pools
                 : env.make_pools(options.threads, options.threads);
  st.inter_op = pools.inter_op;
  st.intra_op = pools.intra_op;

  device_actor_options actor_options;
  // A task of a cluster runs its device actors on the I/O thread: a tensor hop between tasks
  // then wakes no scheduler thread on either side (the classic example on 4 processes:
  // 2326-2508 steps/s against 1667-2011, alternating; the between-graph MLP unchanged).
  // In-process clusters keep theirs on the scheduler, where their devices run side by side.
  actor_options.on_network_thread = options.cluster != nullptr && self->system().has_middleman();
  // One inter-op thread runs no two nodes at once either: nodes then run on the device
  // actor's thread, saving a thread handoff per node. On the scheduler the same holds when
  // the intra-op pool (its threads and the calling one; the BLAS has as many) spans the
  // inter-op pool: expensive kernels use every core themselves, so a second one beside them
  // only oversubscribes the cores (the MLP at 2 threads: 0.41-0.47 of its GEMM bound with
  // the pool, 0.59-0.76 inline, alternating runs). On the I/O thread a kernel would hold up
  // the process's connections, so there only a one-thread pool runs inline.
  bool one_thread = st.inter_op && st.inter_op->num_threads() <= 1;
  bool spanned = st.inter_op && st.intra_op &&
                 st.inter_op->num_threads() <= st.intra_op->num_threads() + 1;
  bool on_actor = one_thread || (spanned && !actor_options.on_network_thread);
  actor_options.inter_op_pool = options.run_inline || on_actor ? nullptr : st.inter_op;
  actor_options.long_chain_pool = options.run_inline ? nullptr : st.inter_op;
  actor_options.trace = options.trace;
  actor_options.bulk = st.bulk_out;
  if (options.cluster) {
    auto links = std::make_shared<direct_links>(self->system(), st.task_name(), options.cluster);
    actor_options.on_peers = [links](const peer_table& table) { links->dial(table); };
  }
  st.shards = std::make_shared<shard_table>(self->system(), st.bulk_out);
  // Every device type's factory makes its devices (devices/device_factory.hpp).
  device_factory_options made_with;
  made_with.job = job;
  made_with.task = task;
  made_with.cpu_device_count = options.cpu_device_count;
  made_with.test_device_count = options.test_device_count;
  made_with.gpu = options.gpu;
  made_with.intra_op = st.intra_op;
  made_devices made;
  if (auto tried = make_task_devices(made_with); tried) {
    made = std::move(*tried);
  } else {
    // The task ends with the error (its behavior below serves nobody).
    std::cerr << "actorflow: task " << st.task_name() << ": " << tried.error().message() << '\n';
    self->quit(make_wire_error(tried.error()));
  }
  // Why a type has no devices here, once per process (TensorFlow logs it at INFO).
  static std::once_flag noted;
  std::call_once(noted, [&] {
    log_verbose(blas_kernels().summary);
    for (auto& note : made.notes)
      log_verbose(note);
  });
  for (auto& dev : made.devices) {
    st.shards->serve(dev);
    auto actor = spawn_device_actor(self->system(), dev, actor_options);
    // Linked: a task that dies takes its devices along, and a device that dies takes the task.
    self->link_to(actor);
    st.devices.emplace_back(dev->full_name(), actor);
  }
  std::set<std::string> types;
  for (auto& dev : made.devices)
    types.insert(dev->type());
  for (auto& type : types)
    st.kernel_sets.emplace_back(type, kernel_registry::global().kernels_for(type));
  auto peers = st.own_peers();
  for (auto& [name, actor] : st.devices)
    self->send(actor, peers_atom::value, peers);
  if (!options.bulk_host.empty()) {
    // Frames for the devices carry rendezvous keys ("/job:..."), frames for the shards
    // "shard;<variable>;<id>", frames for the collective member "coll;...".
    auto to_devices = deliver_to_device_actors(peers.devices);
    std::weak_ptr<shard_table> shards = st.shards;
    auto collective = st.collective_frames;
    auto deliver = [to_devices, shards, collective](std::int64_t step_id, std::string key,
                                                    tensor value) {
      if (key.rfind(collective_bulk_prefix, 0) == 0) {
        auto piece = parse_collective_frame_key(key);
        if (!piece)
          return make_error(errc::data_loss, "malformed collective frame key '" + key + "'");
        collective_actor member;
        {
          std::lock_guard<std::mutex> guard{collective->mutex};
          member = collective->member;
        }
        if (!member)
          return make_error(errc::failed_precondition, "this task has no collective member");
        piece->value = std::move(value);
        caf::anon_send(member, std::move(*piece));
        return status{};
      }
      if (key.rfind(shard_bulk_prefix, 0) != 0)
        return to_devices(step_id, std::move(key), std::move(value));
      auto table = shards.lock();
      if (!table)
        return make_error(errc::unavailable, "the task's shards have stopped");
      return table->deliver_bulk(key, std::move(value));
    };
    bulk_listen_address where;
    where.bind_host = options.bulk_bind_host.empty() ? options.bulk_host : options.bulk_bind_host;
    where.port = options.bulk_port;
    where.advertised_host = options.bulk_host;
    // TLS files that cannot be loaded end the task rather than leave its bulk channel out:
    // TLS is never dropped on one channel while kept on another (programs check the files
    // before they serve; this catches embedders and files changed since).
    if (auto usable = validate_tls_files(process_transport_security()); !usable.ok()) {
      auto why = usable.with_context("bulk channel");
      std::cerr << "actorflow: task " << st.task_name() << ": " << why.message() << '\n';
      // The task ends with the error (its behavior below serves nobody).
      self->quit(make_wire_error(why.code(), why.message()));
    } else if (auto endpoint = bulk_endpoint::listen(where, deliver); endpoint) {
      st.bulk_in = std::move(*endpoint);
    } else { // Not fatal (the socket could not be bound): large tensors then come through CAF.
      std::cerr << "actorflow: task " << st.task_name() << ": " << endpoint.error().message()
                << "; large tensors will travel through CAF\n";
    }
  }
  st.options = std::move(options);
  self->set_down_handler([self](caf::down_msg& down) {
    auto& st = self->state;
    auto who = st.joined.find(down.source);
    if (who == st.joined.end())
      return;
    auto job = who->second.first;
    st.joined.erase(who);
    if (st.abandoned_by(job) && st.options.abandoned_grace_seconds > 0)
      self->delayed_send(self,
                         std::chrono::milliseconds(
                           static_cast<std::int64_t>(st.options.abandoned_grace_seconds * 1000)),
                         grace_atom::value, job);
  });

  return {
    [self](devices_atom) { return self->state.list_devices(); },
    [self](manifest_atom) { return self->state.manifest(); },
    [self](probe_atom) { return static_cast<std::int64_t>(self->state.incarnation); },
    [self](task_done_atom, const std::string& job, std::int32_t task) -> caf::result<std::int32_t> {
      auto& st = self->state;
      if (!st.options.cluster || !st.options.cluster->has_job(job))
        return make_wire_error(errc::invalid_argument,
                               "task " + st.task_name() + " knows no job '" + job + "'");
      auto total = st.options.cluster->num_tasks(job);
      if (task < 0 || task >= total)
        return make_wire_error(errc::invalid_argument, "job '" + job + "' has no task " +
                                                         std::to_string(task));
      auto& done = st.finished[job];
      done.insert(task);
      auto left = static_cast<std::int32_t>(total - static_cast<int>(done.size()));
      if (left == 0 && job != st.job) {
        std::cerr << "actorflow: task " << st.task_name() << ": all " << total << " tasks of job '"
                  << job << "' finished; stopping" << std::endl;
        // After this answer has left: the stop queues behind it.
        self->send(self, stop_atom::value);
      }
      return left;
    },
    [self](task_joined_atom, const std::string& job, std::int32_t task,
           task_presence& worker) -> std::int32_t {
      auto& st = self->state;
      st.joined_jobs.insert(job);
      if (worker && st.joined.emplace(worker.address(), std::make_pair(job, task)).second)
        self->monitor(worker);
      std::set<std::int32_t> tasks;
      for (auto& [addr, who] : st.joined)
        if (who.first == job)
          tasks.insert(who.second);
      return static_cast<std::int32_t>(tasks.size());
    },
    [self](grace_atom, const std::string& job) {
      auto& st = self->state;
      if (!st.abandoned_by(job))
        return; // a worker came back (restarted) or all finished meanwhile
      auto why = "every worker of job '" + job + "' went away without finishing, and none came back within " +
                 std::to_string(st.options.abandoned_grace_seconds) + " s";
      std::cerr << "actorflow: task " << st.task_name() << ": " << why << "; stopping" << std::endl;
      shut_down(self, make_wire_error(errc::aborted, "task " + st.task_name() + ": " + why));
    },
    [self](shard_atom, const std::string& name) -> caf::result<shard_actor> {
      if (auto shard = self->state.shards->find(name))
        return shard;
      return make_wire_error(errc::not_found, "task " + self->state.task_name() +
                                                " holds no variable '" + name + "'");
    },
    [self](collective_atom, collective_member_info& peer) {
      // One introduction serves one join: a peer that joins again (a group formed anew after
      // a loss) introduces itself again, so a restarted peer's old member is never handed out.
      auto key = std::make_pair(peer.job, peer.task);
      auto& st = self->state;
      auto waiting = st.awaiting_introduction.find(key);
      if (waiting != st.awaiting_introduction.end()) {
        waiting->second.deliver(peer);
        st.awaiting_introduction.erase(waiting);
      } else {
        st.introduced[key] = peer;
      }
      return collective_member_of_task(self);
    },
    [self](collective_atom, const std::string& job,
           std::int32_t task) -> caf::result<collective_member_info> {
      auto& st = self->state;
      if (job == st.job && task == st.task)
        return collective_member_of_task(self);
      if (auto known = st.introduced.find({job, task}); known != st.introduced.end()) {
        auto peer = std::move(known->second);
        st.introduced.erase(known);
        return peer;
      }
      auto promise = self->make_response_promise<collective_member_info>();
      st.awaiting_introduction.emplace(std::make_pair(job, task), promise);
      return promise;
    },
    [self](stop_atom) {
      if (stop_from_own_node(self, "task " + self->state.task_name()))
        shut_down(self, caf::exit_reason::normal);
    },
    [self](create_atom a, session_config& config, graph_def& def) {
      return forward_to_master<session_created>(self, a, std::move(config), std::move(def));
    },
    [self](extend_atom a, std::int64_t handle, graph_def& def) {
      return forward_to_master<status>(self, a, handle, std::move(def));
    },
    [self](run_atom a, master_run_request& req) {
      return forward_to_master<master_run_result>(self, a, std::move(req));
    },
    [self](close_atom a, std::int64_t handle) {
      return forward_to_master<status>(self, a, handle);
    },
    [self](sessions_atom a) { return forward_to_master<std::int64_t>(self, a); },
    [self](cancel_atom a, std::int64_t handle, std::int64_t generation) {
      return forward_to_master<std::int64_t>(self, a, handle, generation);
    },
  };
}

} // namespace

task_actor spawn_task_service(caf::actor_system& sys, const std::string& job, int task,
                              task_service_options options) {
  return caf::actor_cast<task_actor>(sys.spawn(task_service, job, task, std::move(options)));
}

bool ended_abandoned(const caf::error& exit_reason) {
  return status_from_error(exit_reason).code() == errc::aborted;
}

} // namespace actorflow
