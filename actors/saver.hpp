#pragma once
/// Saving and restoring a session's variables (TensorFlow's tf.train.Saver).
///   saver s{g};                                   // before the session first runs the graph
///   checkpoint_manager m{"/tmp/run1", 3};
///   AF_RETURN_IF_ERROR(s.save(sess, m, step));    // one session.run fetches every variable
///   if (auto p = m.latest()) AF_RETURN_IF_ERROR(s.restore(sess, *p));
/// Checkpoint entries are keyed by the variable's node name ("layer1/weights"); a hash embedding
/// shard (graph/hash_embedding.hpp) "users/part_0" is saved as five entries, "users/part_0-keys",
/// "-rows" (value and slots), "-last_steps", "-candidates" and "-counts", taken in the same run as
/// the variables, so one checkpoint file holds one moment of everything.
/// Sharded (TF's Saver(sharded=True), for models bigger than the saving process): given a
/// shard directory, each device that holds variables writes their shard file itself, in the
/// save's one run, and the checkpoint's own file records the shards' checksums; restoring
/// reads each shard on its device and assigns all or nothing:
///   saver s{g, {}, "/ckpt"};                      // the checkpoint_manager's directory
///   AF_RETURN_IF_ERROR(s.save(sess, m, step));    // no variable's value comes to this process

#include "actors/session.hpp"
#include "graph/graph.hpp"
#include "graph/status.hpp"
#include "serialization/checkpoint.hpp"

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace actorflow {

class saver {
public:
  /// Saves and restores `vars`, by default every global variable and every hash embedding
  /// shard `g` has now (those made later are not included); a hash table shard in `vars`
  /// (hash_embedding::variables()) is saved as a table. Adds to `g`, inside a name scope "save", one placeholder and one
  /// Assign per variable and a NoOp grouping the assigns; do this before a session runs the
  /// graph. A malformed list (a variable without a node, one listed twice) is reported by
  /// status() and by every save and restore. `g` must outlive the saver.
  explicit saver(graph& g, std::vector<variable> vars = {});
  /// Sharded into `shard_directory` (the checkpoint_manager's): one shard per device the
  /// variables and tables ask for (their nodes' requested devices), written and read there.
  saver(graph& g, std::vector<variable> vars, std::string shard_directory);

  /// Ok, or what is wrong with the variable list.
  const actorflow::status& status() const { return status_; }

  /// The variables this saver handles, in the order given (hash tables not included).
  const std::vector<variable>& variables() const { return vars_; }
  /// The hash embedding shards it handles (their table nodes).
  const std::vector<output>& tables() const { return tables_; }

  /// The current values of the variables, fetched in one run of `s`; sharded, the shards of
  /// `step` written by that run and the entry that records them. Fails (naming the variable)
  /// when one is uninitialised.
  result<checkpoint_entries> values(session& s, std::int64_t step = 0) const;

  bool sharded() const { return !shard_directory_.empty(); }

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
  /// The sharded save and restore nodes, one SaveShard and one RestoreShard per device.
  void add_shards(graph& g);
  actorflow::status restore_shards(session& s, const checkpoint_data& data,
                                   const std::string& source);

  std::string shard_directory_;
  /// Sharded: the step both shard ops take, each SaveShard's checksum output, the checksum each
  /// RestoreShard is fed, and the group of the assigns of the restored values.
  output shard_step_;
  std::vector<output> shard_checksums_;
  std::vector<output> shard_expected_checksums_;
  output restore_shards_;
  std::vector<variable> vars_;
  /// Per variable: the placeholder that takes the restored value.
  std::vector<output> restore_values_;
  /// Per hash table shard: its export's five outputs, and the placeholders its import takes.
  std::vector<output> tables_;
  std::vector<std::vector<output>> table_exports_;
  std::vector<std::vector<output>> table_restore_values_;
  /// Runs every restore assign.
  output restore_all_;
  actorflow::status status_;
};

/// Writes checkpoints on a thread of its own: a save holds training up only for the snapshot
/// (one run fetching every variable, each read whole in its shard's turn), not for the file.
///   background_saver writer{saver, manager};
///   AF_RETURN_IF_ERROR(writer.save(sess, step));   // snapshot taken; the file is on its way
///   AF_RETURN_IF_ERROR(writer.wait());             // before reading the manager's files
/// One write at a time, in order: a save while the previous write runs waits for it first.
/// The manager must not be used elsewhere while a write may be running (wait() first).
class background_saver {
public:
  background_saver(saver& from, checkpoint_manager& to);
  /// Waits for the write in progress.
  ~background_saver();
  background_saver(const background_saver&) = delete;
  background_saver& operator=(const background_saver&) = delete;

  /// Takes the snapshot of `step` in one run of `s`, then hands it to the writer. Fails with
  /// the snapshot's error, or with the previous write's (which this save then does not start).
  actorflow::status save(session& s, std::int64_t step);
  /// Waits until no write runs; the last write's error, reported once (ok when none failed).
  actorflow::status wait();
  /// Tests: runs on the writer's thread before each write.
  void before_each_write(std::function<void()> hook) { before_write_ = std::move(hook); }

private:
  void write_loop();

  saver& from_;
  checkpoint_manager& to_;
  std::function<void()> before_write_;
  std::mutex mutex_;
  std::condition_variable changed_;
  /// The snapshot waiting for the writer, and its step.
  std::optional<std::pair<std::int64_t, checkpoint_entries>> pending_;
  bool writing_ = false;
  bool stopping_ = false;
  actorflow::status last_write_;
  std::thread writer_;
};

} // namespace actorflow
