#include "support/flags.hpp"

#include <csignal>
#include <exception>
#include <iostream>

namespace actorflow::apps {

status parse_flags(int argc, const char* const* argv, const flag_set& flags) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    std::string value;
    bool has_inline_value = false;
    if (auto eq = arg.find('='); arg.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
      has_inline_value = true;
    }
    if (auto s = flags.switches.find(arg); s != flags.switches.end() && !has_inline_value) {
      *s->second = true;
      continue;
    }
    auto v = flags.values.find(arg);
    if (v == flags.values.end())
      return make_error(errc::invalid_argument, "unknown flag '" + arg + "' (see --help)");
    if (!has_inline_value) {
      if (i + 1 >= argc)
        return make_error(errc::invalid_argument, arg + " needs a value");
      value = argv[++i];
    }
    AF_RETURN_IF_ERROR(v->second(value));
  }
  return {};
}

int run_main(const char* app, int (*run)(int, char**), int argc, char** argv) {
  // A peer, scraper or pipe reader that goes away must cost a write (EPIPE), not the process,
  // whichever thread writes: stdout and stderr and any library's sockets included, beyond the
  // sockets actorflow's libraries keep from SIGPIPE themselves.
  std::signal(SIGPIPE, SIG_IGN);
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << app << ": " << e.what() << std::endl;
    return 1;
  }
}

void add_connect_timeout_flag(flag_set& flags, int& seconds) {
  flags.values["--connect-timeout"] = [&seconds](const std::string& v) {
    return parse_int_flag("--connect-timeout", v, 0, seconds);
  };
}

void add_metrics_port_flag(flag_set& flags, int& port) {
  flags.values["--metrics-port"] = [&port](const std::string& v) {
    return parse_int_flag("--metrics-port", v, 0, port, 65535);
  };
}

} // namespace actorflow::apps
