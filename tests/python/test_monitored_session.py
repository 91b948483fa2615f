"""tf.train's training loop over the C++ training library, in one process: Saver,
MonitoredTrainingSession and its hooks (the C++ ones and SessionRunHook subclasses in Python).
test_between_graph.py runs it on a cluster of processes."""

import logging
import os
import time

import numpy as np
import pytest

import actorflow.compat.v1 as tf
from linear_model import batch, linear_model
from seed_processes import free_ports


@pytest.fixture(autouse=True)
def fresh_default_graph():
    tf.reset_default_graph()
    yield


def test_global_step_is_made_once_and_found_again():
    assert tf.train.get_global_step() is None
    step = tf.train.get_or_create_global_step()
    assert tf.train.get_global_step() is step
    assert tf.train.get_or_create_global_step() is step
    assert step.dtype == tf.int64
    with pytest.raises(ValueError, match="global_step"):
        tf.train.create_global_step()


def test_saver_saves_restores_and_finds_the_latest(tmp_path):
    v = tf.Variable(np.array([1.0, 2.0], np.float32), name="v")
    step = tf.train.get_or_create_global_step()
    saver = tf.train.Saver(max_to_keep=2)
    double = v.assign(v * 2.0)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        assert tf.train.latest_checkpoint(str(tmp_path)) is None
        first = saver.save(sess, str(tmp_path / "model.ckpt"), global_step=1)
        assert os.path.isfile(first)
        sess.run(double)
        sess.run(step.assign(5))
        second = saver.save(sess, str(tmp_path / "model.ckpt"), global_step=step)
        assert second != first and second.endswith("5.afckpt")
        assert tf.train.latest_checkpoint(str(tmp_path)) == second
        sess.run(double)
        saver.restore(sess, first)
        np.testing.assert_array_equal(sess.run(v), [1.0, 2.0])
        assert sess.run(step) == 0
        saver.restore(sess, tf.train.latest_checkpoint(str(tmp_path)))
        np.testing.assert_array_equal(sess.run(v), [2.0, 4.0])
        assert sess.run(step) == 5
        # max_to_keep=2: a third save removes the first file.
        saver.save(sess, str(tmp_path / "model.ckpt"), global_step=9)
        assert not os.path.exists(first)
        with pytest.raises(tf.errors.OpError, match="nowhere"):
            saver.restore(sess, str(tmp_path / "nowhere.afckpt"))
        with pytest.raises(ValueError, match="None"):
            saver.restore(sess, None)
    with pytest.raises(TypeError, match="Variables"):
        tf.train.Saver([v.read_value() if hasattr(v, "read_value") else v * 1.0])


def test_a_checkpoint_of_another_shape_is_refused_naming_the_variable(tmp_path):
    with tf.Graph().as_default():
        tf.Variable(np.zeros([3], np.float32), name="v")
        saver = tf.train.Saver()
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            path = saver.save(sess, str(tmp_path / "m"), global_step=1)
    v = tf.Variable(np.zeros([4], np.float32), name="v")
    saver = tf.train.Saver()
    with tf.Session() as sess:
        sess.run(v.initializer)
        with pytest.raises(tf.errors.OpError, match="v"):
            saver.restore(sess, path)


def test_monitored_session_trains_stops_at_the_step_and_checkpoints(tmp_path):
    x, y, w, b, loss, global_step, train_op = linear_model()
    hooks = [tf.train.StopAtStepHook(last_step=60)]
    losses = []
    with tf.train.MonitoredTrainingSession(checkpoint_dir=str(tmp_path), hooks=hooks,
                                           save_checkpoint_steps=25) as sess:
        steps = 0
        while not sess.should_stop():
            xs, ys = batch(steps)
            _, value = sess.run([train_op, loss], feed_dict={x: xs, y: ys})
            losses.append(value)
            steps += 1
            assert steps <= 70, "StopAtStepHook did not stop the loop"
    assert steps in (60, 61)          # the step's read may come before its own increment
    assert losses[-1] < 0.1 * losses[0]
    latest = tf.train.latest_checkpoint(str(tmp_path))
    assert latest is not None and latest.endswith("ckpt-%d.afckpt" % 60)
    assert sess.should_stop()         # closed
    with pytest.raises(RuntimeError, match="closed"):
        sess.run(loss, feed_dict={x: xs, y: ys})

    # A new session on the same directory restores: the global step goes on from 60.
    tf.reset_default_graph()
    x, y, w, b, loss, global_step, train_op = linear_model()
    with tf.train.MonitoredTrainingSession(checkpoint_dir=str(tmp_path), hooks=[
            tf.train.StopAtStepHook(last_step=65)]) as sess:
        start = sess.run(global_step)
        assert start == 60
        restored_loss = sess.run(loss, feed_dict=dict(zip((x, y), batch(0))))
        assert restored_loss < 0.1 * losses[0]
        while not sess.should_stop():
            sess.run(train_op, feed_dict=dict(zip((x, y), batch(1))))
    assert tf.train.latest_checkpoint(str(tmp_path)).endswith("ckpt-65.afckpt")


def test_checkpoint_saver_hook_is_the_sessions_checkpoint_options(tmp_path):
    x, y, w, b, loss, global_step, train_op = linear_model()
    hooks = [tf.train.CheckpointSaverHook(str(tmp_path), save_steps=5),
             tf.train.StopAtStepHook(last_step=12)]
    with tf.train.MonitoredTrainingSession(hooks=hooks) as sess:
        while not sess.should_stop():
            sess.run(train_op, feed_dict=dict(zip((x, y), batch(2))))
    names = sorted(os.listdir(str(tmp_path)))
    assert "ckpt-12.afckpt" in names
    assert any(n in names for n in ("ckpt-5.afckpt", "ckpt-6.afckpt", "ckpt-10.afckpt",
                                    "ckpt-11.afckpt")), names
    with pytest.raises(ValueError, match="save_steps"):
        tf.train.CheckpointSaverHook(str(tmp_path))
    with pytest.raises(ValueError, match="by steps"):
        tf.train.MonitoredTrainingSession(save_checkpoint_secs=60)
    # What only tf.Session takes is refused, not ignored.
    config = tf.ConfigProto(device_count={"CPU": 2})
    config.gpu_options.allow_growth = True
    with pytest.raises(ValueError, match="device_count, gpu_options.allow_growth are taken by "
                                         "tf.Session only"):
        tf.train.MonitoredTrainingSession(config=config)


class RecordingHook(tf.train.SessionRunHook):
    """Records every call; fetches the loss and the global step; stops after `stop_after` runs."""

    def __init__(self, loss, stop_after):
        self.calls = []
        self.loss = loss
        self.stop_after = stop_after
        self.results = []
        self.extra = None

    def begin(self):
        self.calls.append("begin")
        # Ops a hook makes in begin are in the session's graph.
        self.extra = tf.constant(7.0, name="made_in_begin") * 2.0

    def after_create_session(self, session, coord):
        self.calls.append("after_create_session")
        # The session is usable here: the variables are ready.
        self.created_step = session.run(tf.train.get_global_step())

    def before_run(self, run_context):
        self.calls.append("before_run")
        assert run_context.original_args.fetches is not None
        return tf.train.SessionRunArgs({"loss": self.loss, "extra": self.extra,
                                        "step": tf.train.get_global_step()})

    def after_run(self, run_context, run_values):
        self.calls.append("after_run")
        self.results.append(run_values.results)
        if len(self.results) >= self.stop_after:
            run_context.request_stop()

    def end(self, session):
        self.calls.append("end")
        self.end_step = session.run(tf.train.get_global_step())


def test_a_python_hook_sees_every_call_and_its_fetches_and_can_stop():
    x, y, w, b, loss, global_step, train_op = linear_model()
    hook = RecordingHook(loss, stop_after=4)
    with tf.train.MonitoredTrainingSession(hooks=[hook]) as sess:
        runs = 0
        while not sess.should_stop():
            sess.run(train_op, feed_dict=dict(zip((x, y), batch(runs))))
            runs += 1
            assert runs <= 10
    assert runs == 4
    assert hook.calls[:2] == ["begin", "after_create_session"]
    assert hook.calls[2:-1] == ["before_run", "after_run"] * 4
    assert hook.calls[-1] == "end"
    assert hook.created_step == 0
    assert hook.end_step == 4
    assert [r["extra"] for r in hook.results] == [14.0] * 4
    assert sorted(set(r["step"] for r in hook.results)) == sorted(r["step"] for r in hook.results)
    assert hook.results[-1]["loss"] < hook.results[0]["loss"]
    assert isinstance(hook.results[0]["loss"], np.floating)


class FailingHook(tf.train.SessionRunHook):
    class Boom(Exception):
        pass

    def __init__(self, where):
        self.where = where

    def before_run(self, run_context):
        if self.where == "before_run":
            raise FailingHook.Boom("before_run failed on purpose")

    def after_run(self, run_context, run_values):
        if self.where == "after_run":
            raise FailingHook.Boom("after_run failed on purpose")


@pytest.mark.parametrize("where", ["before_run", "after_run"])
def test_a_python_hooks_exception_is_what_run_raises(where):
    x, y, w, b, loss, global_step, train_op = linear_model()
    sess = tf.train.MonitoredTrainingSession(hooks=[FailingHook(where)])
    with pytest.raises(FailingHook.Boom, match="failed on purpose"):
        sess.run(train_op, feed_dict=dict(zip((x, y), batch(0))))
    sess.close()


def test_a_hook_that_returns_the_wrong_thing_or_fetches_an_op_is_a_type_error():
    x, y, w, b, loss, global_step, train_op = linear_model()

    class Wrong(tf.train.SessionRunHook):
        def before_run(self, run_context):
            return [loss]

    class FetchesAnOp(tf.train.SessionRunHook):
        def before_run(self, run_context):
            return tf.train.SessionRunArgs(train_op)

    for hook, message in ((Wrong(), "SessionRunArgs"), (FetchesAnOp(), "Operation")):
        sess = tf.train.MonitoredTrainingSession(hooks=[hook])
        with pytest.raises(TypeError, match=message):
            sess.run(loss, feed_dict=dict(zip((x, y), batch(0))))
        sess.close()
    with pytest.raises(TypeError, match="SessionRunHook"):
        tf.train.MonitoredTrainingSession(hooks=[object()])


def test_a_kept_hook_session_is_closed_after_the_call():
    x, y, w, b, loss, global_step, train_op = linear_model()

    class Keeper(tf.train.SessionRunHook):
        def after_create_session(self, session, coord):
            self.session = session

    keeper = Keeper()
    with tf.train.MonitoredTrainingSession(hooks=[keeper]) as sess:
        sess.run(loss, feed_dict=dict(zip((x, y), batch(0))))
        with pytest.raises(RuntimeError, match="closed"):
            keeper.session.run(loss, feed_dict=dict(zip((x, y), batch(0))))


def test_nan_tensor_hook_fails_the_step_naming_the_loss():
    x = tf.placeholder(tf.float32, [], name="x")
    v = tf.Variable(1.0)
    loss = tf.identity(v * x, name="the_loss")
    step = tf.train.get_or_create_global_step()
    train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=step)
    with tf.train.MonitoredTrainingSession(hooks=[tf.train.NanTensorHook(loss)]) as sess:
        sess.run(train_op, feed_dict={x: 1.0})
        with pytest.raises(tf.train.NanLossDuringTrainingError, match="nan.*the_loss"):
            sess.run(train_op, feed_dict={x: np.nan})
    with pytest.raises(ValueError, match="fail_on_nan_loss"):
        tf.train.NanTensorHook(loss, fail_on_nan_loss=False)
    with pytest.raises(ValueError, match="scalar"):
        tf.train.NanTensorHook(tf.zeros([3]))


def test_logging_tensor_hook_logs_every_n_steps(caplog):
    x, y, w, b, loss, global_step, train_op = linear_model()
    seen = []

    def formatter(values):
        seen.append(dict(values))
        return "loss is %.3f" % values["loss"]

    hooks = [tf.train.LoggingTensorHook({"loss": loss, "w": "w:0"}, every_n_iter=3,
                                        formatter=formatter),
             tf.train.StopAtStepHook(last_step=9)]
    with caplog.at_level(logging.INFO, logger="actorflow"):
        with tf.train.MonitoredTrainingSession(hooks=hooks) as sess:
            while not sess.should_stop():
                sess.run(train_op, feed_dict=dict(zip((x, y), batch(3))))
    assert 2 <= len(seen) <= 4, seen
    assert set(seen[0]) == {"loss", "w"}
    assert any("loss is" in r.getMessage() for r in caplog.records)
    with pytest.raises(ValueError, match="every_n_iter"):
        tf.train.LoggingTensorHook([loss])


def test_stop_at_step_hook_arguments():
    with pytest.raises(ValueError, match="One of"):
        tf.train.StopAtStepHook()
    with pytest.raises(ValueError, match="Only one"):
        tf.train.StopAtStepHook(num_steps=3, last_step=4)


def test_stop_at_step_hook_num_steps_counts_from_the_restored_step(tmp_path):
    x, y, w, b, loss, global_step, train_op = linear_model()
    for expected_end in (7, 14):
        with tf.train.MonitoredTrainingSession(checkpoint_dir=str(tmp_path),
                                               hooks=[tf.train.StopAtStepHook(num_steps=7)]) as sess:
            while not sess.should_stop():
                sess.run(train_op, feed_dict=dict(zip((x, y), batch(0))))
        assert sess.global_step() == expected_end


def test_sync_replicas_optimizer_refuses_what_it_cannot_do():
    x, y, w, b, loss, global_step, _ = linear_model()
    with pytest.raises(ValueError, match="wraps a tf.train optimizer"):
        tf.train.SyncReplicasOptimizer("adam", 2, 2)
    # Any tf.train optimizer: the chief applies it to each round's mean.
    tf.train.SyncReplicasOptimizer(tf.train.AdamOptimizer(), 2, 2)
    opt = tf.train.SyncReplicasOptimizer(tf.train.GradientDescentOptimizer(0.1), 2, 2)
    with pytest.raises(ValueError, match="Global step"):
        opt.minimize(loss)
    opt.minimize(loss, global_step=global_step)
    hook = opt.make_session_run_hook(True)
    # Without a tf.train.Server of this process for the master, the hook cannot reach the shards.
    with pytest.raises(ValueError, match="Server"):
        tf.train.MonitoredTrainingSession(hooks=[hook])


@pytest.mark.parametrize("where", ["begin", "after_create_session", "end"])
def test_a_hook_failing_around_the_steps_raises_its_exception(where):
    x, y, w, b, loss, global_step, train_op = linear_model()

    class Boom(Exception):
        pass

    class Failing(tf.train.SessionRunHook):
        def begin(self):
            if where == "begin":
                raise Boom(where)

        def after_create_session(self, session, coord):
            if where == "after_create_session":
                raise Boom(where)

        def end(self, session):
            if where == "end":
                raise Boom(where)

    with pytest.raises(Boom, match=where):
        sess = tf.train.MonitoredTrainingSession(hooks=[Failing()])
        sess.run(train_op, feed_dict=dict(zip((x, y), batch(0))))
        sess.close()


def test_the_context_manager_ends_quietly_at_the_end_of_the_input_only():
    x, y, w, b, loss, global_step, train_op = linear_model()
    with tf.train.MonitoredTrainingSession() as sess:
        sess.run(train_op, feed_dict=dict(zip((x, y), batch(0))))
        raise tf.errors.OutOfRangeError(None, None, "the input is done")
    assert sess.should_stop()
    with pytest.raises(KeyError):
        with tf.train.MonitoredTrainingSession():
            raise KeyError("not swallowed")
    # One hook object serves several sessions (each makes its own C++ hook).
    hook = tf.train.StopAtStepHook(last_step=2)
    for _ in range(2):
        with tf.train.MonitoredTrainingSession(hooks=[hook]) as sess:
            runs = 0
            while not sess.should_stop() and runs < 5:
                sess.run(train_op, feed_dict=dict(zip((x, y), batch(0))))
                runs += 1
        assert runs == 2


def test_an_unreachable_master_fails_within_max_wait_secs_naming_it():
    tf.Variable(1.0)
    started = time.monotonic()
    port = free_ports(1)[0]
    with pytest.raises(tf.errors.UnavailableError, match="max_wait_secs"):
        tf.train.MonitoredTrainingSession(master="grpc://127.0.0.1:%d" % port, max_wait_secs=2)
    assert time.monotonic() - started < 30


def test_summary_dir_gets_the_chiefs_metrics(tmp_path):
    x, y, w, b, loss, global_step, train_op = linear_model()
    with tf.train.MonitoredTrainingSession(summary_dir=str(tmp_path), save_summaries_steps=4,
                                           hooks=[tf.train.StopAtStepHook(last_step=12)]) as sess:
        while not sess.should_stop():
            sess.run(train_op, feed_dict=dict(zip((x, y), batch(0))))
    names = os.listdir(str(tmp_path))
    assert "metrics.csv" in names, names
    assert any(n.startswith("events.out.tfevents") for n in names), names
    with open(str(tmp_path / "metrics.csv")) as f:
        rows = f.read().strip().splitlines()
    assert len(rows) >= 3, rows      # a header and a row every 4 global steps
