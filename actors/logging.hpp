#pragma once
/// Verbose diagnostics, TensorFlow's INFO lines ("Creating TensorFlow device ..."): off unless
/// the environment variable ACTORFLOW_VERBOSE is 1 when first asked, or set_verbose(true).
///   if (verbose()) log_verbose("session 3 found device /job:ps/replica:0/task:0/device:CPU:0");

#include <string>

namespace actorflow {

/// Whether verbose lines are printed. Thread-safe.
bool verbose();

/// Turns verbose lines on or off for this process. Thread-safe.
void set_verbose(bool on);

/// Prints "actorflow: <line>" to standard error when verbose() is on. Thread-safe.
void log_verbose(const std::string& line);

/// Prints "actorflow: <line>" to standard error whatever verbose() says: what a user must see,
/// e.g. what a session still waits for (TensorFlow's INFO lines shown by default). Thread-safe.
void log_info(const std::string& line);

} // namespace actorflow
