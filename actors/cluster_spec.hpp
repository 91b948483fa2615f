#pragma once
/// Cluster specs (SPEC "Clusters"): job names mapped to ordered task addresses "host:port".
///   auto spec = cluster_spec::parse("ps=machine-a:2221;worker=machine-a:2222,machine-b:2222");
///   if (!spec) return spec.error();            // invalid_argument, quoting the part at fault
///   auto address = spec->address("worker", 1);   // "machine-b:2222"
/// Forms: a JSON file or JSON text (`{"ps": ["host:port"], "worker": [...]}`), an inline string
/// (`ps=host:port;worker=host:port,host:port`), and a TF_CONFIG-style value
/// (`{"cluster": {...}, "task": {"type": "worker", "index": 1}}`, see parse_tf_config).

#include "graph/device_name.hpp"
#include "graph/replica_device_setter.hpp"
#include "graph/status.hpp"

#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace actorflow {

/// An immutable, validated cluster: every job has a valid name and at least one task, every
/// address is "host:port" with a port from 1 to 65535, and no address appears twice. Plain
/// value; any thread may read it.
class cluster_spec {
public:
  /// Job name -> task addresses, task i at index i.
  using job_map = std::map<std::string, std::vector<std::string>>;

  /// An empty cluster (no jobs): a one-task local server needs no spec.
  cluster_spec() = default;

  /// Validates `jobs` (see the class comment); errors are invalid_argument and quote the job
  /// name or address at fault.
  static result<cluster_spec> from_jobs(job_map jobs);
  /// JSON text: an object mapping each job name to a list of "host:port" strings. Malformed
  /// JSON is reported with nlohmann's byte position.
  static result<cluster_spec> from_json(std::string_view text);
  /// The JSON form read from a file; an unreadable file is reported naming it (not_found).
  static result<cluster_spec> from_json_file(const std::string& path);
  /// The inline form "job=host:port,host:port;job=host:port"; spaces around parts are
  /// ignored, as is an empty part between or after ';'.
  static result<cluster_spec> from_inline(std::string_view text);
  /// What a --cluster flag takes: JSON text when it starts with '{', the inline form when it
  /// contains '=', else the name of a JSON file.
  static result<cluster_spec> parse(std::string_view text);

  /// Job names, sorted.
  std::vector<std::string> jobs() const;
  bool has_job(const std::string& job) const { return jobs_.count(job) > 0; }
  /// Number of tasks of `job`; 0 when there is no such job.
  int num_tasks(const std::string& job) const;
  /// Address of task `index` of `job`: not_found for an unknown job, out_of_range for an index
  /// past its tasks.
  result<std::string> address(const std::string& job, int index) const;
  /// The tasks of `job` as device name prefixes "/job:ps/replica:0/task:1", in task order;
  /// empty for an unknown job.
  std::vector<device_name> tasks(const std::string& job) const;
  /// Every task of every job, jobs sorted, then in task order.
  std::vector<device_name> tasks() const;
  /// The whole map.
  const job_map& as_map() const { return jobs_; }
  bool empty() const { return jobs_.empty(); }

  /// Compact JSON text, `{"ps":["a:1"],"worker":["b:2","c:3"]}`; from_json reads it back.
  std::string to_json() const;
  /// The inline form, "ps=a:1;worker=b:2,c:3"; from_inline reads it back.
  std::string to_inline() const;

  friend bool operator==(const cluster_spec& a, const cluster_spec& b) { return a.jobs_ == b.jobs_; }
  friend bool operator!=(const cluster_spec& a, const cluster_spec& b) { return !(a == b); }

private:
  explicit cluster_spec(job_map jobs) : jobs_(std::move(jobs)) {}
  job_map jobs_;
};

/// Checks that no two tasks of `cluster` name the same address once host names are resolved:
/// "localhost:2222" and "127.0.0.1:2222", or two names of one machine with one port. Each
/// task's host is looked up with getaddrinfo (IPv4 and IPv6); two tasks collide when they
/// share a port and any resolved address. A host that does not resolve is not an error here
/// (a Kubernetes DNS name may resolve only once its pod runs); it takes part in no collision.
/// Literal duplicates are already refused by from_jobs, so every cluster_spec passes them.
/// Errors (invalid_argument) name both tasks and the address, e.g. "cluster spec: ps task 0
/// (127.0.0.1:2222) and worker task 1 (localhost:2222) name the same address 127.0.0.1:2222".
/// Blocks on name look-ups (DNS): programs call it once, before serving (server::start does).
/// Only tasks whose port another task shares are looked up. Any thread may call it.
status check_distinct_addresses(const cluster_spec& cluster);

/// An address split for connecting: the host (IPv6 literals without their brackets) and port.
struct host_port {
  std::string host;
  std::uint16_t port = 0;
};

/// Checks and splits "host:port" ("[::1]:2222" for IPv6); errors (invalid_argument) quote the
/// address and say what is wrong with it.
result<host_port> parse_host_port(std::string_view address);

/// Splits a master target, "caf://host:port"; errors quote the target.
result<host_port> parse_target(std::string_view target);

/// A parsed TF_CONFIG: the cluster and which of its tasks this process is.
struct tf_config {
  cluster_spec cluster;
  /// The task's job ("type" in TF_CONFIG); always a job of `cluster`.
  std::string job;
  /// The task's index within its job; always in range.
  int task_index = 0;

  /// This task as a device name prefix, "/job:worker/replica:0/task:1".
  device_name task() const;
};

/// Parses a TF_CONFIG value `{"cluster": {...}, "task": {"type": "worker", "index": 1}}`.
/// "index" defaults to 0; other top-level keys ("environment", "rpc_layer") are ignored.
/// Errors (invalid_argument): malformed JSON (with the byte position), a missing "cluster" or
/// "task", a task type that is not a job of the cluster, an index out of range, and every
/// cluster_spec error.
result<tf_config> parse_tf_config(std::string_view text);

/// Parses the environment variable `variable` (TF_CONFIG by default) with parse_tf_config;
/// not_found when it is unset. Reads the environment: call it before starting threads that
/// might change it.
result<tf_config> tf_config_from_environment(const char* variable = "TF_CONFIG");

/// replica_device_setter with `options.ps_tasks` set to the number of tasks of the ps job of
/// `cluster` (the job of options.ps_device, "ps" when that names none), as TF does when given a
/// cluster. Fails (not_found) when the cluster has no such job, or has no job named by
/// options.worker_device; the other errors are replica_device_setter's.
result<device_function> replica_device_setter_for(const cluster_spec& cluster,
                                                  replica_device_setter_options options = {});

} // namespace actorflow
