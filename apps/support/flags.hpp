#pragma once
/// Command-line flags for actorflow's apps: "--flag value" and "--flag=value".
///   flag_set flags;
///   flags.values["--epochs"] = [&](const std::string& v) { return parse_int_flag("--epochs", v, 1, epochs); };
///   flags.switches["--resume"] = &resume;
///   status s = parse_flags(argc, argv, flags);   // "unknown flag '--epoch' (see --help)"

#include "graph/status.hpp"

#include <charconv>
#include <functional>
#include <limits>
#include <map>
#include <string>

namespace actorflow::apps {

/// Validates and stores a flag's value; an error names the flag.
using value_flag = std::function<status(const std::string& value)>;

struct flag_set {
  std::map<std::string, value_flag> values;
  /// Flags without a value, set to true when present.
  std::map<std::string, bool*> switches;
};

/// Parses argv[1..argc); errors name the flag at fault (unknown, or missing its value).
status parse_flags(int argc, const char* const* argv, const flag_set& flags);

/// Parses a whole number of at least `min` (and at most `max`) into `out`; the error quotes the
/// flag and the text.
template <class Int>
status parse_int_flag(const std::string& flag, const std::string& text, Int min, Int& out,
                      Int max = std::numeric_limits<Int>::max()) {
  Int value{};
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc{} || end != text.data() + text.size() || text.empty())
    return make_error(errc::invalid_argument, flag + ": '" + text + "' is not a whole number");
  if (value < min)
    return make_error(errc::invalid_argument,
                      flag + ": must be at least " + std::to_string(min) + ", got " + text);
  if (value > max)
    return make_error(errc::invalid_argument,
                      flag + ": must be at most " + std::to_string(max) + ", got " + text);
  out = value;
  return {};
}

/// --metrics-port PORT in an app's flags (0, the default: no metrics served; where it listens
/// and who may read it: support/metrics_http.hpp).
void add_metrics_port_flag(flag_set& flags, int& port);

/// --connect-timeout S in an app's flags: how long a client (or a master on its first session)
/// waits for a master or task where nothing listens yet (session_options and
/// server_options::connect_timeout_seconds); 0 fails at once. Its default stays the caller's.
void add_connect_timeout_flag(flag_set& flags, int& seconds);

/// The line of --help for --connect-timeout.
inline constexpr const char* connect_timeout_help =
  "  --connect-timeout S    wait at most S seconds for a master or task that does not listen yet\n"
  "                         (started later), saying every 5 s what is awaited; 0 fails at once\n"
  "                         (default 60)\n";

/// Runs an app's `run` and turns what fails outside a status (a thread the system cannot start,
/// memory it cannot give) into one line "<app>: <what>" and exit code 1 instead of
/// std::terminate. SIGPIPE is ignored first: a write to a peer or pipe that went away fails
/// with EPIPE instead of killing the program. Every program's main goes through it.
int run_main(const char* app, int (*run)(int, char**), int argc, char** argv);

/// The most threads (--threads) and CPU devices (--cpu-devices) a process may ask for: far
/// beyond any machine's cores, well below what makes thread creation fail.
inline constexpr int max_threads_flag = 1024;
inline constexpr int max_cpu_devices_flag = 256;

} // namespace actorflow::apps
