#pragma once
/// Making a training session's variables ready, written once for every mode that keeps them on
/// ps tasks (TensorFlow's tf.train.SessionManager): the chief prepares them (waits for the ps
/// tasks, then restores the latest checkpoint or initialises), the other workers wait until
/// they can read them, and after a lost ps came back every worker recovers them.
///   train::checkpoint_files checkpoints{dir, keep, saver};           // empty dir: none
///   train::session_manager_options ready;
///   ready.global_step = global_step.read;
///   ready.variables = all_variable_reads;
///   ready.initializer = ops::global_variables_initializer(g);
///   ready.checkpoints = &checkpoints;
///   train::session_manager manager{ready};
///   auto step = chief ? manager.prepare_session(s, {true, false})
///                     : manager.wait_for_session(s);
///   ... a step fails; if (manager.lost_ps(failure)) step = manager.recover_session(s, chief);
/// No CAF here: sessions, savers and the cluster's probes only.

#include "actors/saver.hpp"
#include "actors/session.hpp"
#include "graph/status.hpp"
#include "serialization/checkpoint.hpp"

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace actorflow::train {

/// Where a library piece says what the user should know but that is no error (a damaged
/// checkpoint skipped, a wait begun, a ps lost): one line each. Empty: standard error, the line
/// prefixed with the piece's name ("session_manager: ").
using warning_sink = std::function<void(const std::string&)>;

/// A checkpoint restored into a session's variables: where from, and its step.
struct restored_checkpoint {
  std::string path;
  std::int64_t step = 0;
};

/// Where checkpoints go (checkpoint_manager), written on a thread of their own so that training
/// waits for the snapshot only (background_saver). Empty without a directory, or for a process
/// that writes none.
class checkpoint_files {
public:
  checkpoint_files() = default;
  /// `directory` empty: no checkpoints. `keep`: how many to keep.
  checkpoint_files(const std::string& directory, int keep, saver& from);

  explicit operator bool() const { return manager_ != nullptr; }
  background_saver& writer() { return *writer_; }
  /// Waits for the write in progress: its error, or ok (also without checkpoints).
  status written();
  /// The newest checkpoint that verifies restored into `s`, once a write still running is done
  /// (it would race the search; its failure is said to `warn`). A damaged newer one is said and
  /// skipped; nothing when the directory has none; an error when none verifies.
  result<std::optional<restored_checkpoint>> restore_latest(session& s, const warning_sink& warn = {});

private:
  saver* saver_ = nullptr;
  std::unique_ptr<checkpoint_manager> manager_;
  std::unique_ptr<background_saver> writer_;
};

/// An ops::is_variable_initialized for every global variable of `g`, for
/// session_manager_options::variables: a readiness check moves a bool per variable, not the
/// variable. Add them before a session first runs `g`.
std::vector<output> variables_ready_of(graph& g);

struct session_manager_options {
  /// The global step's read: the step a kept or restored model goes on from.
  output global_step;
  /// Every variable's readiness (variables_ready_of: bool scalars made on the variables'
  /// devices, never their values): ready once each is true.
  std::vector<output> variables;
  /// Initialises every variable (ops::global_variables_initializer).
  output initializer;
  /// Where the chief restores from; null or empty: it initialises.
  checkpoint_files* checkpoints = nullptr;
  /// How long to wait for the ps tasks and the variables, and what the error then blames.
  int init_timeout_seconds = 30;
  std::string timeout_source = "--init-timeout";
  /// The job whose tasks hold the variables.
  std::string ps_job = "ps";
  /// Whether the ps job answers a probe now (lost_ps's second test); null: never asked.
  std::function<status()> probe_ps;
  /// Lines for the user (restored, kept, initialised again): standard output by default.
  std::function<void(const std::string&)> say;
  /// Warnings (a damaged checkpoint skipped, waiting for the variables, a ps lost).
  warning_sink warn;
};

/// How the chief prepares at the start.
struct prepare_options {
  /// Restore the latest checkpoint when there is one (else initialise).
  bool restore = true;
  /// Say so when there is none to restore (a restore the user asked for, --resume).
  bool say_when_none = false;
};

class session_manager {
public:
  explicit session_manager(session_manager_options options);

  /// The chief, at the start: waits until the ps tasks answer, then restores or initialises.
  /// The global step training starts from (0 when initialised).
  result<std::int64_t> prepare_session(session& s, const prepare_options& how);
  /// Not the chief: waits, up to init_timeout_seconds, until every variable can be read; the
  /// error then names what is still uninitialised or unreachable. The global step.
  result<std::int64_t> wait_for_session(session& s);
  /// After a lost ps answers again. The chief: when the ps tasks still hold every variable (a
  /// ps frozen or cut off, not restarted) training goes on from their global step, said;
  /// otherwise the latest checkpoint is restored ("; the updates since are lost") or the
  /// variables initialised again, said. Not the chief: wait_for_session. The global step.
  result<std::int64_t> recover_session(session& s, bool chief);

  /// Whether `failure` is a lost ps task, which training outlives: a failure a lost connection
  /// or a timeout causes (connection_like) that comes from a ps task (status::origin), or with
  /// a ps task that does not answer probe_ps now (the failure's origin may be a bystander). When
  /// it is, says so (options' warn), and what training waits for.
  bool lost_ps(const status& failure) const;
  /// A warning through the options' warn.
  void warn(const std::string& line) const;

private:
  /// The values of `reads` once each can be read, waited for (readiness_wait); with
  /// `uninitialised_ends`, an uninitialised variable ends the wait with no values (a ps that
  /// came back empty).
  result<std::optional<std::vector<tensor>>> read_when_ready(session& s,
                                                             const std::vector<output>& reads,
                                                             bool uninitialised_ends) const;
  result<std::int64_t> restore_or_initialise(session& s, bool restore, bool after_loss,
                                             bool say_when_none);
  void say(const std::string& line) const;

  session_manager_options options_;
};

} // namespace actorflow::train
