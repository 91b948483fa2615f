#include "actors/cluster_spec.hpp"

#include <nlohmann/json.hpp>

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cctype>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <sstream>
#include <utility>

namespace actorflow {

namespace {

using json = nlohmann::json;

status invalid(const std::string& message) {
  return make_error(errc::invalid_argument, "invalid cluster spec: " + message);
}

std::string_view trim(std::string_view text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front())) != 0)
    text.remove_prefix(1);
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back())) != 0)
    text.remove_suffix(1);
  return text;
}

std::string lower_case(std::string_view text) {
  std::string out{text};
  for (auto& c : out)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string join(const std::vector<std::string>& parts, const char* separator) {
  std::string out;
  for (auto& p : parts) {
    if (!out.empty())
      out += separator;
    out += p;
  }
  return out;
}

std::string where(const std::string& job, std::size_t index) {
  return "job '" + job + "' task " + std::to_string(index);
}

status check_job_name(const std::string& job) {
  if (job.empty())
    return invalid("a job name is empty");
  // The same rule as a device name's job, so that every job can be named in a device string
  // ("*" parses there, meaning any job, and must not be a job's name).
  auto parsed = device_name::parse("/job:" + job);
  if (!parsed || parsed->job != job)
    return invalid("bad job name '" + job +
                   "': a job name starts with a letter and contains only letters, digits, '_' "
                   "and '-'");
  return {};
}

bool is_host_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '.' || c == '-' || c == '_';
}

/// Checks "host:port" and returns the key two addresses collide on: the host in lower case
/// (host names are case-insensitive) and the port as a number ("02222" is port 2222).
result<std::string> check_address(const std::string& job, std::size_t index,
                                  const std::string& address) {
  auto parsed = parse_host_port(address);
  if (!parsed)
    return invalid(where(job, index) + ": " + parsed.error().message());
  return lower_case(parsed->host) + ":" + std::to_string(parsed->port);
}

/// Short printable form of a JSON value for error messages.
std::string describe(const json& value) {
  auto text = value.dump();
  if (text.size() > 60)
    text = text.substr(0, 57) + "...";
  return text;
}

/// Parses JSON text; duplicate keys in one object are an error (nlohmann would keep the last
/// silently, and a job listed twice is almost certainly a mistake).
result<json> parse_json(std::string_view text, const std::string& what) {
  std::vector<std::set<std::string>> open_objects;
  std::string duplicate;
  auto callback = [&](int, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::object_start) {
      open_objects.emplace_back();
    } else if (event == json::parse_event_t::object_end) {
      if (!open_objects.empty())
        open_objects.pop_back();
    } else if (event == json::parse_event_t::key && !open_objects.empty() && duplicate.empty()) {
      auto key = parsed.get<std::string>();
      if (!open_objects.back().insert(key).second)
        duplicate = key;
    }
    return true;
  };
  json value;
  try {
    value = json::parse(text.begin(), text.end(), callback);
  } catch (const json::parse_error& e) {
    // what() is "[json.exception.parse_error.101] parse error at line 1, column 9: ..."
    std::string detail = e.what();
    if (auto close = detail.find("] "); close != std::string::npos && detail.front() == '[')
      detail = detail.substr(close + 2);
    return make_error(errc::invalid_argument, "malformed JSON in " + what + " at byte " +
                                                std::to_string(e.byte) + ": " + detail);
  }
  if (!duplicate.empty())
    return make_error(errc::invalid_argument,
                      "malformed JSON in " + what + ": key '" + duplicate + "' appears twice");
  return value;
}

result<cluster_spec> from_json_value(const json& value) {
  if (!value.is_object())
    return invalid("expected a JSON object mapping job names to lists of \"host:port\" strings, "
                   "got " + describe(value));
  cluster_spec::job_map jobs;
  for (auto& [job, tasks] : value.items()) {
    if (!tasks.is_array())
      return invalid("job '" + job + "': expected a list of \"host:port\" strings, got " +
                     describe(tasks));
    auto& addresses = jobs[job];
    for (std::size_t i = 0; i < tasks.size(); ++i) {
      if (!tasks[i].is_string())
        return invalid(where(job, i) + ": expected a \"host:port\" string, got " +
                       describe(tasks[i]));
      addresses.push_back(tasks[i].get<std::string>());
    }
  }
  return cluster_spec::from_jobs(std::move(jobs));
}

} // namespace

result<cluster_spec> cluster_spec::from_jobs(job_map jobs) {
  if (jobs.empty())
    return invalid("no jobs");
  // Address key -> where it was first seen and how it was spelled there.
  std::map<std::string, std::pair<std::string, std::string>> seen;
  for (auto& [job, addresses] : jobs) {
    AF_RETURN_IF_ERROR(check_job_name(job));
    if (addresses.empty())
      return invalid("job '" + job + "' has no tasks");
    for (std::size_t i = 0; i < addresses.size(); ++i) {
      auto key = check_address(job, i, addresses[i]);
      if (!key)
        return key.error();
      auto [first, inserted] = seen.emplace(*key, std::make_pair(where(job, i), addresses[i]));
      if (!inserted) {
        auto& [first_place, first_spelling] = first->second;
        // Name the first spelling too when it differs ("Host:2222" and "host:02222").
        auto spelled = first_spelling == addresses[i] ? "" : " ('" + first_spelling + "')";
        return invalid("address '" + addresses[i] + "' appears twice: " + first_place + spelled +
                       " and " + where(job, i));
      }
    }
  }
  return cluster_spec{std::move(jobs)};
}

result<cluster_spec> cluster_spec::from_json(std::string_view text) {
  auto value = parse_json(text, "cluster spec");
  if (!value)
    return value.error();
  return from_json_value(*value);
}

result<cluster_spec> cluster_spec::from_json_file(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec))
    return make_error(errc::not_found, "cannot read cluster spec file '" + path +
                                         "': no such file");
  if (std::filesystem::is_directory(path, ec))
    return make_error(errc::invalid_argument,
                      "cannot read cluster spec file '" + path + "': it is a directory");
  std::ifstream in{path, std::ios::binary};
  if (!in)
    return make_error(errc::invalid_argument, "cannot read cluster spec file '" + path +
                                                "': " + std::strerror(errno));
  std::string text{std::istreambuf_iterator<char>{in}, std::istreambuf_iterator<char>{}};
  if (in.bad())
    return make_error(errc::invalid_argument,
                      "cannot read cluster spec file '" + path + "': read error");
  auto spec = from_json(text);
  if (!spec)
    return spec.error().with_context("cluster spec file '" + path + "'");
  return spec;
}

result<cluster_spec> cluster_spec::from_inline(std::string_view text) {
  job_map jobs;
  std::size_t start = 0;
  while (start <= text.size()) {
    auto end = text.find(';', start);
    if (end == std::string_view::npos)
      end = text.size();
    auto part = trim(text.substr(start, end - start));
    start = end + 1;
    if (part.empty())
      continue;
    auto equals = part.find('=');
    if (equals == std::string_view::npos)
      return invalid("part '" + std::string{part} +
                     "' has no '=' (expected JOB=HOST:PORT,HOST:PORT;JOB=...)");
    auto job = std::string{trim(part.substr(0, equals))};
    if (job.empty())
      return invalid("a job name is empty in '" + std::string{part} + "'");
    if (jobs.count(job) > 0)
      return invalid("job '" + job + "' appears twice");
    auto& addresses = jobs[job];
    auto list = trim(part.substr(equals + 1));
    std::size_t from = 0;
    while (!list.empty() && from <= list.size()) {
      auto comma = list.find(',', from);
      if (comma == std::string_view::npos)
        comma = list.size();
      addresses.emplace_back(trim(list.substr(from, comma - from)));
      from = comma + 1;
    }
  }
  if (jobs.empty())
    return invalid("no jobs in '" + std::string{text} + "'");
  return from_jobs(std::move(jobs));
}

result<cluster_spec> cluster_spec::parse(std::string_view text) {
  auto trimmed = trim(text);
  if (trimmed.empty())
    return invalid("the spec is empty");
  // JSON of any kind is JSON, not a file name: '[1,2,3]' is refused as the wrong shape.
  if (trimmed.front() == '{' || trimmed.front() == '[' || trimmed.front() == '"')
    return from_json(trimmed);
  if (trimmed.find('=') != std::string_view::npos)
    return from_inline(trimmed);
  return from_json_file(std::string{trimmed});
}

std::vector<std::string> cluster_spec::jobs() const {
  std::vector<std::string> out;
  for (auto& entry : jobs_)
    out.push_back(entry.first);
  return out;
}

int cluster_spec::num_tasks(const std::string& job) const {
  auto i = jobs_.find(job);
  return i == jobs_.end() ? 0 : static_cast<int>(i->second.size());
}

result<std::string> cluster_spec::address(const std::string& job, int index) const {
  auto i = jobs_.find(job);
  if (i == jobs_.end())
    return make_error(errc::not_found, "the cluster has no job '" + job + "' (jobs: " +
                                         join(jobs(), ", ") + ")");
  if (index < 0 || index >= static_cast<int>(i->second.size()))
    return make_error(errc::out_of_range, "job '" + job + "' has no task " +
                                            std::to_string(index) + " (it has " +
                                            std::to_string(i->second.size()) + ")");
  return i->second[static_cast<std::size_t>(index)];
}

std::vector<device_name> cluster_spec::tasks(const std::string& job) const {
  std::vector<device_name> out;
  for (int t = 0; t < num_tasks(job); ++t) {
    device_name d;
    d.job = job;
    d.replica = 0;
    d.task = t;
    out.push_back(std::move(d));
  }
  return out;
}

std::vector<device_name> cluster_spec::tasks() const {
  std::vector<device_name> out;
  for (auto& entry : jobs_) {
    auto job_tasks = tasks(entry.first);
    out.insert(out.end(), job_tasks.begin(), job_tasks.end());
  }
  return out;
}

std::string cluster_spec::to_json() const {
  json value = json::object();
  for (auto& [job, addresses] : jobs_)
    value[job] = addresses;
  return value.dump();
}

std::string cluster_spec::to_inline() const {
  std::vector<std::string> parts;
  for (auto& [job, addresses] : jobs_)
    parts.push_back(job + "=" + join(addresses, ","));
  return join(parts, ";");
}

device_name tf_config::task() const {
  device_name d;
  d.job = job;
  d.replica = 0;
  d.task = task_index;
  return d;
}

result<tf_config> parse_tf_config(std::string_view text) {
  auto fail = [](const std::string& message) {
    return make_error(errc::invalid_argument, "invalid TF_CONFIG: " + message);
  };
  auto value = parse_json(text, "TF_CONFIG");
  if (!value)
    return value.error();
  if (!value->is_object())
    return fail("expected a JSON object with \"cluster\" and \"task\", got " + describe(*value));
  auto cluster = value->find("cluster");
  if (cluster == value->end())
    return fail("no \"cluster\"");
  auto spec = from_json_value(*cluster);
  if (!spec)
    return spec.error().with_context("TF_CONFIG \"cluster\"");
  auto task = value->find("task");
  if (task == value->end())
    return fail("no \"task\"");
  if (!task->is_object())
    return fail("\"task\" must be an object like {\"type\": \"worker\", \"index\": 0}, got " +
                describe(*task));
  auto type = task->find("type");
  if (type == task->end() || !type->is_string())
    return fail("\"task\" needs a \"type\" string naming a job, got " + describe(*task));
  tf_config config;
  config.job = type->get<std::string>();
  if (!spec->has_job(config.job))
    return fail("task type '" + config.job + "' is not a job of the cluster (jobs: " +
                join(spec->jobs(), ", ") + ")");
  auto index = task->find("index");
  if (index != task->end()) {
    if (!index->is_number_integer())
      return fail("task index " + describe(*index) + " is not an integer");
    auto n = index->get<std::int64_t>();
    auto count = spec->num_tasks(config.job);
    if (n < 0 || n >= count)
      return fail("task index " + std::to_string(n) + " is out of range: job '" + config.job +
                  "' has " + std::to_string(count) + " task" + (count == 1 ? "" : "s"));
    config.task_index = static_cast<int>(n);
  }
  config.cluster = std::move(*spec);
  return config;
}

result<tf_config> tf_config_from_environment(const char* variable) {
  const char* value = std::getenv(variable);
  if (value == nullptr)
    return make_error(errc::not_found,
                      "environment variable " + std::string{variable} + " is not set");
  auto config = parse_tf_config(value);
  if (!config)
    return config.error().with_context("environment variable " + std::string{variable});
  return config;
}

result<device_function> replica_device_setter_for(const cluster_spec& cluster,
                                                  replica_device_setter_options options) {
  std::string ps_job = "ps";
  if (!options.ps_device.empty()) {
    auto ps = device_name::parse(options.ps_device);
    if (!ps)
      return replica_device_setter(std::move(options)); // reports the bad ps_device
    if (ps->job)
      ps_job = *ps->job;
  }
  if (!cluster.has_job(ps_job))
    return make_error(errc::not_found, "replica_device_setter: the cluster has no ps job '" +
                                         ps_job + "' (jobs: " + join(cluster.jobs(), ", ") + ")");
  if (!options.worker_device.empty()) {
    auto worker = device_name::parse(options.worker_device);
    if (worker && worker->job && !cluster.has_job(*worker->job))
      return make_error(errc::not_found, "replica_device_setter: the cluster has no worker job '" +
                                           *worker->job + "' (jobs: " +
                                           join(cluster.jobs(), ", ") + ")");
  }
  options.ps_tasks = cluster.num_tasks(ps_job);
  return replica_device_setter(std::move(options));
}

namespace {

/// The numeric addresses `host` resolves to ("127.0.0.1", "::1"), sorted and without
/// repeats; empty when it does not resolve.
std::set<std::string> resolve_host(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  std::set<std::string> out;
  if (getaddrinfo(host.c_str(), nullptr, &hints, &found) != 0)
    return out;
  for (auto* entry = found; entry != nullptr; entry = entry->ai_next) {
    char text[INET6_ADDRSTRLEN] = {};
    const void* raw = nullptr;
    if (entry->ai_family == AF_INET)
      raw = &reinterpret_cast<const sockaddr_in*>(entry->ai_addr)->sin_addr;
    else if (entry->ai_family == AF_INET6)
      raw = &reinterpret_cast<const sockaddr_in6*>(entry->ai_addr)->sin6_addr;
    if (raw != nullptr && inet_ntop(entry->ai_family, raw, text, sizeof text) != nullptr)
      out.insert(text);
  }
  freeaddrinfo(found);
  return out;
}

/// "127.0.0.1:2222", "[::1]:2222".
std::string numeric_address(const std::string& address, std::uint16_t port) {
  auto host = address.find(':') == std::string::npos ? address : "[" + address + "]";
  return host + ":" + std::to_string(port);
}

} // namespace

status check_distinct_addresses(const cluster_spec& cluster) {
  struct task_address {
    std::string place; // "worker task 1 (localhost:2222)"
    host_port split;
  };
  std::vector<task_address> tasks;
  std::map<std::uint16_t, int> tasks_per_port;
  for (auto& [job, addresses] : cluster.as_map())
    for (std::size_t i = 0; i < addresses.size(); ++i) {
      auto split = parse_host_port(addresses[i]);
      if (!split) // from_jobs checked every address; keep the error should that change
        return split.error();
      tasks.push_back({job + " task " + std::to_string(i) + " (" + addresses[i] + ")", *split});
      ++tasks_per_port[split->port];
    }
  // Resolved "address:port" -> the first task that names it.
  std::map<std::string, const task_address*> seen;
  for (auto& task : tasks) {
    if (tasks_per_port[task.split.port] < 2)
      continue; // nothing to collide with: spare the look-up
    for (auto& resolved : resolve_host(task.split.host)) {
      auto key = numeric_address(resolved, task.split.port);
      auto [first, inserted] = seen.emplace(key, &task);
      if (!inserted)
        return make_error(errc::invalid_argument,
                          "cluster spec: " + first->second->place + " and " + task.place +
                            " name the same address " + key);
    }
  }
  return {};
}

namespace {
status bad_address(const std::string& message) { return make_error(errc::invalid_argument, message); }
} // namespace

result<host_port> parse_host_port(std::string_view text) {
  std::string address{text};
  if (address.empty())
    return bad_address("the address is empty (expected host:port)");
  auto colon = address.rfind(':');
  if (colon == std::string::npos)
    return bad_address("address '" + address + "' has no port (expected host:port)");
  auto host = address.substr(0, colon);
  auto port = address.substr(colon + 1);
  if (host.empty())
    return bad_address("address '" + address + "' has no host");
  bool host_ok = true;
  if (host.front() == '[') {
    // An IPv6 literal, "[::1]:2222".
    host_ok = host.size() > 2 && host.back() == ']';
    for (std::size_t i = 1; host_ok && i + 1 < host.size(); ++i)
      host_ok = std::isxdigit(static_cast<unsigned char>(host[i])) != 0 || host[i] == ':' ||
                host[i] == '.' || host[i] == '%';
  } else {
    for (char c : host)
      host_ok = host_ok && is_host_char(c);
  }
  if (!host_ok)
    return bad_address("address '" + address + "' has a bad host '" + host + "'");
  bool digits = !port.empty() && port.size() <= 5;
  for (char c : port)
    digits = digits && c >= '0' && c <= '9';
  auto number = digits ? std::atoi(port.c_str()) : 0;
  if (number < 1 || number > 65535)
    return bad_address("address '" + address + "' has a bad port '" + port +
                   "' (expected a number from 1 to 65535)");
  if (host.front() == '[')
    host = host.substr(1, host.size() - 2);
  return host_port{host, static_cast<std::uint16_t>(number)};
}

result<host_port> parse_target(std::string_view target) {
  constexpr std::string_view scheme = "caf://";
  if (target.substr(0, scheme.size()) != scheme)
    return bad_address("target '" + std::string{target} + "' does not start with caf:// (expected caf://host:port)");
  auto parsed = parse_host_port(target.substr(scheme.size()));
  if (!parsed)
    return bad_address("target '" + std::string{target} + "': " + parsed.error().message());
  return parsed;
}

} // namespace actorflow
