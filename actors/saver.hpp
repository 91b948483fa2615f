#pragma once
/// Saving and restoring a session's variables (TensorFlow's tf.train.Saver).
///   saver s{g};                                   // before the session first runs the graph
///   checkpoint_manager m{"/tmp/run1", 3};
///   AF_RETURN_IF_ERROR(s.save(sess, m, step));    // one session.run fetches every variable
///   if (auto p = m.latest()) AF_RETURN_IF_ERROR(s.restore(sess, *p));
/// Checkpoint entries are keyed by the variable's node name ("layer1/weights").

#include "actors/session.hpp"
#include "graph/graph.hpp"
#include "graph/status.hpp"
#include "serialization/checkpoint.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace actorflow {

class saver {
public:
  /// Saves and restores `vars`, by default every global variable `g` has now (variables made
  /// later are not included). Adds to `g`, inside a name scope "save", one placeholder and one
  /// Assign per variable and a NoOp grouping the assigns; do this before a session runs the
  /// graph. A malformed list (a variable without a node, one listed twice) is reported by
  /// status() and by every save and restore. `g` must outlive the saver.
  explicit saver(graph& g, std::vector<variable> vars = {});

  /// Ok, or what is wrong with the variable list.
  const actorflow::status& status() const { return status_; }

  /// The variables this saver handles, in the order given.
  const std::vector<variable>& variables() const { return vars_; }

  /// The current values of the variables, fetched in one run of `s`. Fails (naming the
  /// variable) when one is uninitialised.
  result<checkpoint_entries> values(session& s) const;

  /// Fetches every variable's current value in one run of `s` and saves them as the checkpoint
  /// of `step` through `m`.
  actorflow::status save(session& s, checkpoint_manager& m, std::int64_t step);

  /// Reads the checkpoint at `path` and assigns every variable its saved value in one run of
  /// `s`. Entries for variables this saver does not handle are ignored. Everything is checked
  /// first: a checkpoint that cannot be read, lacks a variable or holds a value of another
  /// dtype or shape is refused with an error naming the file and the variable, and no variable
  /// changes.
  actorflow::status restore(session& s, const std::string& path);
  /// The same with a checkpoint already read; errors name `source`.
  actorflow::status restore(session& s, const checkpoint_data& data,
                            const std::string& source = "checkpoint");

private:
  std::vector<variable> vars_;
  /// Per variable: the placeholder that takes the restored value.
  std::vector<output> restore_values_;
  /// Runs every restore assign.
  output restore_all_;
  actorflow::status status_;
};

} // namespace actorflow
