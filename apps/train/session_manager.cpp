#include "train/session_manager.hpp"

#include "actors/task_client.hpp"
#include "graph/ops.hpp"
#include "train/trainer.hpp"

#include <string>
#include <iostream>

namespace actorflow::train {

checkpoint_files::checkpoint_files(const std::string& directory, int keep, saver& from)
    : saver_(&from) {
  if (directory.empty())
    return;
  manager_ = std::make_unique<checkpoint_manager>(directory, keep);
  writer_ = std::make_unique<background_saver>(from, *manager_);
}

status checkpoint_files::written() { return writer_ ? writer_->wait() : status{}; }

namespace {

void warn_to(const warning_sink& sink, const char* piece, const std::string& line) {
  if (sink)
    sink(line);
  else
    std::cerr << piece << ": " << line << '\n';
}

} // namespace

result<std::optional<restored_checkpoint>> checkpoint_files::restore_latest(session& s,
                                                                            const warning_sink& warn) {
  if (auto written = writer_->wait(); !written.ok())
    warn_to(warn, "checkpoint_files", written.message());
  auto found = manager_->find_latest();
  for (auto& why : found.skipped)
    warn_to(warn, "checkpoint_files", "skipping a damaged checkpoint: " + why.message());
  if (!found.path && !found.skipped.empty())
    return make_error(errc::data_loss, "every checkpoint in '" + manager_->directory() +
                                         "' is damaged (" + std::to_string(found.skipped.size()) +
                                         "); the newest: " + found.skipped.front().message());
  if (!found.path)
    return std::optional<restored_checkpoint>{};
  auto data = read_checkpoint(*found.path);
  if (!data)
    return data.error();
  AF_RETURN_IF_ERROR(saver_->restore(s, *data, *found.path));
  return std::optional<restored_checkpoint>{restored_checkpoint{*found.path, data->step}};
}

session_manager::session_manager(session_manager_options options) : options_(std::move(options)) {}

void session_manager::warn(const std::string& line) const {
  warn_to(options_.warn, "session_manager", line);
}

void session_manager::say(const std::string& line) const {
  if (options_.say)
    options_.say(line);
  else
    std::cout << line << '\n';
}

std::vector<output> variables_ready_of(graph& g) {
  std::vector<output> ready;
  for (auto& v : g.global_variables())
    ready.push_back(ops::is_variable_initialized(v, v.name() + "/is_initialized"));
  return ready;
}

result<std::optional<std::vector<tensor>>>
session_manager::read_when_ready(session& s, const std::vector<output>& reads,
                                 bool uninitialised_ends) const {
  std::optional<std::vector<tensor>> values;
  readiness_wait wait;
  wait.check = [&]() -> status {
    auto read = s.run(reads);
    if (read) {
      // A readiness output that says false: that variable is not initialised yet.
      for (std::size_t i = 0; i < reads.size(); ++i)
        if (read->at(i).type() == dtype::boolean && !read->at(i).scalar_value<bool>()) {
          auto not_yet = make_error(errc::failed_precondition,
                                    "variable '" + reads[i].producer().attr_or<std::string>("variable", reads[i].name()) +
                                      "' is uninitialised");
          return uninitialised_ends ? status{} : not_yet;
        }
      values = std::move(*read);
    } else if (uninitialised_ends && read.error().code() == errc::failed_precondition) {
      return {};
    }
    return read ? status{} : read.error();
  };
  wait.timeout = std::chrono::seconds(options_.init_timeout_seconds);
  wait.timeout_source = options_.timeout_source;
  wait.waiting = [this](const status& why) {
    warn("waiting up to " + std::to_string(options_.init_timeout_seconds) + " s (" +
         options_.timeout_source + ") until the variables can be read: " + why.message());
  };
  auto waited = wait_until_ready(wait);
  if (!waited)
    return waited.error();
  return values;
}

result<std::int64_t> session_manager::restore_or_initialise(session& s, bool restore,
                                                            bool after_loss, bool say_when_none) {
  if (restore && options_.checkpoints && *options_.checkpoints) {
    auto found = options_.checkpoints->restore_latest(s, options_.warn);
    if (!found)
      return found.error();
    if (*found) {
      say("restored " + (*found)->path + ": training " +
          (after_loss ? "returns to" : "goes on from") + " global step " +
          std::to_string((*found)->step) + (after_loss ? "; the updates since are lost" : ""));
      return (*found)->step;
    }
  }
  AF_RETURN_IF_ERROR(s.run_targets({options_.initializer}));
  if (say_when_none)
    say("no checkpoint to restore (--checkpoint-dir): the variables start again from their "
        "initial values");
  return std::int64_t{0};
}

result<std::int64_t> session_manager::prepare_session(session& s, const prepare_options& how) {
  // Reading nothing still places nothing but reaches every ps task: the wait for them.
  auto reached = read_when_ready(s, {}, false);
  if (!reached)
    return reached.error();
  return restore_or_initialise(s, how.restore, false, how.say_when_none);
}

result<std::int64_t> session_manager::wait_for_session(session& s) {
  std::vector<output> reads{options_.global_step};
  reads.insert(reads.end(), options_.variables.begin(), options_.variables.end());
  auto read = read_when_ready(s, reads, false);
  if (!read)
    return read.error();
  return (*read)->at(0).scalar_value<std::int64_t>();
}

result<std::int64_t> session_manager::recover_session(session& s, bool chief) {
  if (!chief)
    return wait_for_session(s);
  // A ps that was only frozen or cut off keeps what it had: restoring a checkpoint or
  // initialising again would throw that training away. One that does not answer is waited
  // for, never taken for empty.
  std::vector<output> reads{options_.global_step};
  reads.insert(reads.end(), options_.variables.begin(), options_.variables.end());
  auto held = read_when_ready(s, reads, true);
  if (!held)
    return held.error();
  if (*held) {
    auto step = (*held)->at(0).scalar_value<std::int64_t>();
    say("the " + options_.ps_job + " tasks still hold every variable: training goes on from "
        "global step " + std::to_string(step));
    return step;
  }
  return restore_or_initialise(s, true, true, true);
}

bool session_manager::lost_ps(const status& failure) const {
  if (!connection_like(failure))
    return false;
  bool lost = (failure.origin() && failure.origin()->job == options_.ps_job) ||
              (options_.probe_ps && !options_.probe_ps().ok());
  if (lost)
    warn("lost a " + options_.ps_job + " task (" + failure.message() + "); waiting up to " +
         std::to_string(options_.init_timeout_seconds) + " s (" + options_.timeout_source +
         ") for it to come back");
  return lost;
}

} // namespace actorflow::train
