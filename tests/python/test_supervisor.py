"""tf.train.Supervisor (and its SessionManager and Coordinator): in one process, the chief
restores or initialises and checkpoints into logdir, timed checkpoints on a fake clock, stopping,
exceptions, the graph finalized, a worker that is not the chief waiting for the chief (a local
server) or timing out; then as processes on loopback (programs/supervisor_worker.py): a ps, a
worker that waits, and the chief that initialises. Ports are picked free, every wait is bounded,
and only the processes started here are killed."""

import json
import os
import re
import subprocess
import threading
import time

import numpy as np
import pytest

import actorflow.compat.v1 as tf
from actorflow import supervisor as supervisor_module
from linear_model import batch, linear_model
from seed_processes import PYTHON, free_ports

PROGRAMS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "programs")


@pytest.fixture(autouse=True)
def fresh_default_graph():
    tf.reset_default_graph()
    yield


def checkpoint_steps(directory):
    return sorted(int(m.group(1)) for m in
                  (re.match(r"ckpt-(\d+)\.afckpt$", n) for n in os.listdir(directory)) if m)


def train(sess, x, y, train_op, steps, seed=0):
    for i in range(steps):
        xs, ys = batch(seed + i)
        sess.run(train_op, feed_dict={x: xs, y: ys})


# --- the chief: initialise, checkpoint, restore ------------------------------------------------


def test_the_chief_initialises_checkpoints_on_a_clean_exit_and_a_second_supervisor_restores(
        tmp_path):
    logdir = str(tmp_path / "train")
    x, y, w, _, loss, global_step, train_op = linear_model()
    sv = tf.train.Supervisor(logdir=logdir, save_model_secs=0)
    assert sv.is_chief and sv.global_step is global_step and sv.logdir == logdir
    assert sv.save_path == os.path.join(logdir, "model.ckpt")
    assert isinstance(sv.saver, tf.train.Saver) and sv.save_model_secs == 0
    assert tf.get_default_graph().finalized
    with sv.managed_session() as sess:
        assert sess.run(global_step) == 0 and sess.run(w) == 0.0   # initialised
        first_loss = sess.run(loss, feed_dict=dict(zip((x, y), batch(0))))
        train(sess, x, y, train_op, 30)
        trained_w = sess.run(w)
    assert sess._c.closed
    # save_model_secs=0: no timed checkpoints, only the last one, at the step training ended.
    assert checkpoint_steps(logdir) == [30]

    tf.reset_default_graph()
    x, y, w, _, loss, global_step, train_op = linear_model()
    initialised = []
    sv = tf.train.Supervisor(logdir=logdir, save_model_secs=0,
                             init_fn=lambda sess: initialised.append(sess))
    with sv.managed_session() as sess:
        assert sess.run(global_step) == 30                 # restored, not initialised
        assert sess.run(w) == pytest.approx(trained_w, rel=1e-6) and trained_w > 0.5
        assert sess.run(loss, feed_dict=dict(zip((x, y), batch(0)))) < 0.5 * first_loss
        train(sess, x, y, train_op, 5, seed=100)
    assert initialised == []                               # init_fn only when initialising
    assert checkpoint_steps(logdir) == [30, 35]


def test_init_op_init_feed_dict_and_init_fn_initialise_when_there_is_no_checkpoint(tmp_path):
    start = tf.placeholder(tf.float32, [], name="start")
    v = tf.Variable(start, name="v")
    u = tf.Variable(1.0, name="u")
    set_u = u.assign(5.0)          # made before the Supervisor finalizes the graph
    calls = []

    def init_fn(sess):
        calls.append(sess.run(v))
        sess.run(set_u)

    sv = tf.train.Supervisor(logdir=str(tmp_path), init_op=tf.global_variables_initializer(),
                             init_feed_dict={start: 3.0}, init_fn=init_fn, save_model_secs=0)
    assert sv.init_feed_dict is not None
    with sv.managed_session() as sess:
        assert sess.run([v, u]) == [3.0, 5.0]
    assert calls == [3.0]                                  # after init_op, with its feed


def test_without_an_init_op_or_init_fn_an_uninitialised_model_is_a_runtime_error():
    tf.Variable(1.0, name="v")
    sv = tf.train.Supervisor(init_op=None)
    with pytest.raises(RuntimeError, match="no init_op or init_fn"):
        with sv.managed_session():
            pass


def test_an_init_op_that_leaves_a_variable_uninitialised_names_it():
    tf.Variable(1.0, name="done")
    left = tf.Variable(2.0, name="left_out")
    sv = tf.train.Supervisor(init_op=tf.variables_initializer(
        [v for v in tf.global_variables() if v is not left]))
    with pytest.raises(RuntimeError, match="did not make model ready.*left_out"):
        sv.prepare_or_wait_for_session()


# --- timed checkpoints ---------------------------------------------------------------------------


class FakeClock:
    """time as the supervisor module sees it: monotonic() moves only when the test says."""

    def __init__(self):
        self.now = 1000.0

    def monotonic(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds


def test_the_chief_saves_when_save_model_secs_passed_after_a_run(tmp_path, monkeypatch):
    clock = FakeClock()
    monkeypatch.setattr(supervisor_module, "time", clock)
    x, y, w, _, loss, global_step, train_op = linear_model()
    sv = tf.train.Supervisor(logdir=str(tmp_path), save_model_secs=10)
    with sv.managed_session() as sess:
        assert checkpoint_steps(str(tmp_path)) == [0]      # one when the services start (TF's)
        train(sess, x, y, train_op, 3)
        clock.now += 9.5
        train(sess, x, y, train_op, 1)                     # not due yet
        assert checkpoint_steps(str(tmp_path)) == [0]
        clock.now += 0.5
        train(sess, x, y, train_op, 1)                     # due: saved after this run
        assert checkpoint_steps(str(tmp_path)) == [0, 5]
        train(sess, x, y, train_op, 2)
        assert checkpoint_steps(str(tmp_path)) == [0, 5]   # the next one 10 s after that
        clock.now += 10
        train(sess, x, y, train_op, 1)
        assert checkpoint_steps(str(tmp_path)) == [0, 5, 8]
        train(sess, x, y, train_op, 1)
    assert checkpoint_steps(str(tmp_path)) == [0, 5, 8, 9]  # and the last, at the clean end


def test_wait_for_checkpoint_waits_max_wait_secs_for_one_then_initialises(tmp_path,
                                                                          monkeypatch):
    clock = FakeClock()
    monkeypatch.setattr(supervisor_module, "time", clock)
    x, y, w, _, loss, global_step, train_op = linear_model()
    sv = tf.train.Supervisor(logdir=str(tmp_path), save_model_secs=0, recovery_wait_secs=7)
    sess = sv.prepare_or_wait_for_session(wait_for_checkpoint=True, max_wait_secs=30)
    assert 30 <= clock.now - 1000.0 < 37                   # looked every 7 s for 30 s
    assert sess.run(global_step) == 0                      # none came: initialised
    sv.stop()
    sess.close()


def test_without_start_standard_services_nothing_is_saved(tmp_path):
    x, y, w, _, loss, global_step, train_op = linear_model()
    sv = tf.train.Supervisor(logdir=str(tmp_path), save_model_secs=1)
    with sv.managed_session(start_standard_services=False) as sess:
        train(sess, x, y, train_op, 2)
    assert checkpoint_steps(str(tmp_path)) == []


# --- stopping -------------------------------------------------------------------------------------


def test_request_stop_makes_should_stop_true_and_the_loop_ends_cleanly(tmp_path):
    x, y, w, _, loss, global_step, train_op = linear_model()
    sv = tf.train.Supervisor(logdir=str(tmp_path), save_model_secs=0)
    steps = 0
    with sv.managed_session() as sess:
        assert not sv.should_stop() and not sv.coord.should_stop()
        while not sv.should_stop():
            train(sess, x, y, train_op, 1, seed=steps)
            steps += 1
            if steps == 4:
                sv.request_stop()
            assert steps <= 10, "request_stop did not stop the loop"
    assert steps == 4 and sv.should_stop()
    assert checkpoint_steps(str(tmp_path)) == [4]


def test_an_exception_in_the_body_is_raised_after_the_session_closes_and_saves_nothing(
        tmp_path):
    x, y, w, _, loss, global_step, train_op = linear_model()
    sv = tf.train.Supervisor(logdir=str(tmp_path), save_model_secs=0)
    with pytest.raises(KeyError, match="from the body"):
        with sv.managed_session() as sess:
            train(sess, x, y, train_op, 3)
            raise KeyError("from the body")
    assert sess._c.closed
    with pytest.raises(RuntimeError, match="closed Session"):
        sess.run(loss, feed_dict=dict(zip((x, y), batch(0))))
    assert sv.should_stop()
    assert checkpoint_steps(str(tmp_path)) == []
    # A failing step (an op's error) propagates the same way.
    sv = tf.train.Supervisor(save_model_secs=0)
    with pytest.raises(tf.errors.InvalidArgumentError):
        with sv.managed_session() as sess:
            sess.run(train_op, feed_dict={x: np.ones(3, np.float32), y: np.ones(2, np.float32)})


def test_out_of_range_ends_the_body_quietly_and_the_chief_still_saves(tmp_path):
    x, y, w, _, loss, global_step, train_op = linear_model()
    sv = tf.train.Supervisor(logdir=str(tmp_path), save_model_secs=0)
    with sv.managed_session() as sess:
        train(sess, x, y, train_op, 2)
        raise tf.errors.OutOfRangeError(None, None, "the input is done")
    assert sess._c.closed and sv.should_stop()
    assert checkpoint_steps(str(tmp_path)) == [2]


def test_prepare_or_wait_for_session_and_stop_by_hand(tmp_path):
    x, y, w, _, loss, global_step, train_op = linear_model()
    sv = tf.train.Supervisor(logdir=str(tmp_path), save_model_secs=0)
    sess = sv.prepare_or_wait_for_session("")
    train(sess, x, y, train_op, 3)
    sv.stop()
    assert checkpoint_steps(str(tmp_path)) == [3]
    assert sess.run(global_step) == 3                      # stop leaves the session open
    sess.close()


def test_the_coordinator_joins_threads_and_raises_the_exception_a_stop_was_requested_with():
    coord = tf.train.Coordinator()
    ran = []

    def worker(n):
        with coord.stop_on_exception():
            while not coord.should_stop():
                ran.append(n)
                if n == 1 and len(ran) > 3:
                    raise ValueError("worker 1 failed")
                time.sleep(0.001)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(2)]
    for t in threads:
        t.start()
    with pytest.raises(ValueError, match="worker 1 failed"):
        coord.join(threads, stop_grace_period_secs=10)
    assert coord.should_stop() and coord.joined and not any(t.is_alive() for t in threads)
    coord.clear_stop()
    assert not coord.should_stop()
    coord.request_stop(tf.errors.OutOfRangeError(None, None, "end of input"))
    coord.join()                                           # a clean stop: nothing raised


# --- the graph and the arguments ----------------------------------------------------------------


def test_the_graph_is_finalized_and_a_second_supervisor_reuses_what_the_first_made():
    x, y, w, _, loss, global_step, train_op = linear_model()
    sv = tf.train.Supervisor()
    graph = tf.get_default_graph()
    with pytest.raises(RuntimeError, match="Graph is finalized"):
        tf.constant(1.0)
    with pytest.raises(RuntimeError, match="Graph is finalized"):
        tf.add_to_collection("mine", 1)
    again = tf.train.Supervisor(graph=graph)
    assert again.init_op is sv.init_op and again.saver is sv.saver
    assert graph.get_collection(tf.GraphKeys.INIT_OP) == [sv.init_op]


@pytest.mark.parametrize("arguments, named", [
    (dict(save_summaries_secs=-1), "save_summaries_secs"),
    (dict(checkpoint_basename="sub/model.ckpt"), "checkpoint_basename"),
    (dict(save_model_secs=-1), "save_model_secs"),
    (dict(session_manager=tf.train.SessionManager(), local_init_run_options=tf.RunOptions()),
     "local_init_run_options"),
], ids=lambda v: v if isinstance(v, str) else None)
def test_an_argument_actorflow_cannot_honour_is_a_value_error_naming_it(arguments, named):
    tf.Variable(1.0)
    graph = tf.get_default_graph()
    before = [op.name for op in graph.get_operations()]
    with pytest.raises(ValueError, match=named):
        tf.train.Supervisor(**arguments)
    # Refused before anything was made: no init op, no saver, not finalized.
    assert [op.name for op in graph.get_operations()] == before
    assert graph.get_collection(tf.GraphKeys.INIT_OP) == [] and not graph.finalized


@pytest.mark.parametrize("arguments", [dict(saver="saver"), dict(init_op=3),
                                       dict(ready_op="ready"), dict(init_fn=5),
                                       dict(summary_op="merged"), dict(summary_writer=object())])
def test_an_argument_of_the_wrong_kind_is_a_type_error_before_anything_is_made(arguments):
    tf.Variable(1.0)
    graph = tf.get_default_graph()
    before = [op.name for op in graph.get_operations()]
    with pytest.raises(TypeError, match=list(arguments)[0]):
        tf.train.Supervisor(**arguments)
    assert [op.name for op in graph.get_operations()] == before


def test_the_defaults_and_summaries_off_are_taken():
    tf.Variable(1.0)
    sv = tf.train.Supervisor(summary_op=None, summary_writer=None, save_summaries_secs=0,
                             global_step=None, saver=None)
    assert sv.summary_op is None and sv.summary_writer is None and sv.saver is None
    assert sv.global_step is None and sv.USE_DEFAULT == tf.train.Supervisor.USE_DEFAULT
    assert isinstance(sv.session_manager, tf.train.SessionManager)


def test_the_chief_writes_the_graph_and_its_summaries_every_save_summaries_secs(tmp_path):
    from test_summary import events, summary_values
    logdir = str(tmp_path / "train")
    x, y, w, _, loss, global_step, train_op = linear_model()
    tf.summary.scalar("loss", loss)
    tf.summary.scalar("w", w)
    # The default summary op needs the feeds of its loss: a summary op of w alone here.
    sv = tf.train.Supervisor(logdir=logdir, save_model_secs=0, save_summaries_secs=0.2,
                             summary_op=tf.summary.merge([tf.get_collection(tf.GraphKeys.SUMMARIES)[1]]))
    assert sv.summary_writer.get_logdir() == logdir and sv.save_summaries_secs == 0.2
    with sv.managed_session() as sess:
        began = time.monotonic()
        for i in range(6):
            train(sess, x, y, train_op, 5, seed=5 * i)
            time.sleep(0.1)
        elapsed = time.monotonic() - began
        sv.summary_computed(sess, sess.run(tf.summary.merge_all(), dict(zip((x, y), batch(0)))))
    records = [r for f in os.listdir(logdir) if f.startswith("events.out.tfevents.")
               for r in events(os.path.join(logdir, f))]
    assert any(4 in r for r in records)                          # the graph
    written = [(r.get(2, 0), summary_values(r[5])) for r in records if 5 in r]
    # One at the start (step 0), then one after the first run at least 0.2 s after the last,
    # each at the global step of its run; the last one, summary_computed's, at the final step.
    assert written[0] == (0, {"w_1": 0.0})   # the tag is the summary op's unique name
    timed = written[:-1]
    assert 2 <= len(timed) <= 1 + elapsed / 0.2
    assert [s for s, _ in timed] == sorted(s for s, _ in timed) and timed[-1][0] > 0
    assert written[-1][0] == 30 and set(written[-1][1]) == {"loss_1", "w_1"}


# --- workers that are not the chief ---------------------------------------------------------------


def test_a_worker_that_is_not_the_chief_needs_its_variables_placed():
    linear_model()
    with pytest.raises(ValueError, match="must have their device set: w"):
        tf.train.Supervisor(is_chief=False)


def test_a_worker_that_is_not_the_chief_times_out_naming_what_is_not_ready():
    linear_model(device="/cpu:0")
    sv = tf.train.Supervisor(is_chief=False, recovery_wait_secs=0.05)
    started = time.monotonic()
    with pytest.raises(tf.errors.DeadlineExceededError,
                       match=r"not ready after waiting 0\.5 secs.*(w|b|global_step)"):
        sv.prepare_or_wait_for_session("", max_wait_secs=0.5)
    assert 0.5 <= time.monotonic() - started < 20


def test_a_worker_that_is_not_the_chief_waits_for_the_chiefs_initialisation():
    server = tf.train.Server.create_local_server()
    try:
        x, y, w, _, loss, global_step, train_op = linear_model(
            device="/job:localhost/replica:0/task:0/cpu:0")
        chief = tf.train.Supervisor(is_chief=True, save_model_secs=0)
        worker = tf.train.Supervisor(is_chief=False, recovery_wait_secs=0.05)
        waited = {}

        def wait():
            started = time.monotonic()
            with worker.managed_session(server.target) as sess:
                waited["seconds"] = time.monotonic() - started
                waited["step"] = sess.run(global_step)
                train(sess, x, y, train_op, 2)

        waiter = threading.Thread(target=wait)
        waiter.start()
        time.sleep(0.5)
        assert waiter.is_alive()                           # still waiting: nothing initialised
        with chief.managed_session(server.target) as sess:
            train(sess, x, y, train_op, 3)
            waiter.join(timeout=30)
            assert not waiter.is_alive()
            assert sess.run(global_step) == 5               # both workers' steps, one variable
        assert waited["seconds"] >= 0.5 and 0 <= waited["step"] <= 3
    finally:
        server.stop()


# --- as processes ------------------------------------------------------------------------------


def wait_for_line(path, text, process, timeout):
    """Waits until the log at `path` has a line containing `text`; the log so far otherwise."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with open(path) as f:   # opened anew: reading never moves the offset the child writes at
            output = f.read()
        if text in output:
            return output
        if process.poll() is not None:
            break
        time.sleep(0.05)
    with open(path) as f:
        raise AssertionError("%r not in the output of %s (exit %s) within %d s:\n%s"
                             % (text, path, process.poll(), timeout, f.read()))


def test_across_processes_the_worker_waits_for_the_chief_which_initialises_and_checkpoints(
        tmp_path):
    ports = free_ports(3)
    spec = json.dumps({"ps": ["127.0.0.1:%d" % ports[0]],
                       "worker": ["127.0.0.1:%d" % p for p in ports[1:]]})
    logdir = str(tmp_path / "train")
    started, logs = [], {}

    def start(name, command):
        logs[name] = str(tmp_path / (name + ".log"))
        with open(logs[name], "w") as log:   # the child has its own copy of the descriptor
            started.append(subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT,
                                            env=dict(os.environ, PYTHONUNBUFFERED="1")))
        return started[-1]

    def worker(task):
        return [PYTHON, os.path.join(PROGRAMS, "supervisor_worker.py"), "--cluster", spec,
                "--task", str(task), "--steps", "50", "--logdir", logdir]

    def result_of(name, process):
        try:
            code = process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            code = "timed out"
        with open(logs[name]) as f:
            output = f.read()
        assert code == 0, "%s exited %s:\n%s" % (name, code, output)
        return json.loads(output.strip().splitlines()[-1])

    try:
        ps = start("ps", [PYTHON, os.path.join(PROGRAMS, "ps_server.py"), spec, "0"])
        wait_for_line(logs["ps"], "Started server with target", ps, 30)
        other = start("worker1", worker(1))
        # The worker that is not the chief finds the variables uninitialised and waits ...
        waiting = wait_for_line(logs["worker1"], "Waiting for model to be ready", other, 30)
        assert re.search(r"Waiting for model to be ready: .*uninitiali[sz]ed value "
                         r"'(w|b|global_step)'", waiting), waiting
        assert other.poll() is None
        # ... until the chief, started only now, has initialised them.
        chief = start("worker0", worker(0))
        results = {"chief": result_of("worker0", chief), "other": result_of("worker1", other)}
    finally:
        for process in started:
            if process.poll() is None:
                process.kill()
            process.wait(timeout=30)
    chief, other = results["chief"], results["other"]
    assert chief["first_w"] == 0.25                        # initialised by init_op, not restored
    # The chief's first step is on the untrained model; the other worker may start only after
    # the chief's last (it looks every recovery_wait_secs): both end far below that loss.
    for r in results.values():
        assert r["last_loss"] < 0.2 * chief["first_loss"], results
    # One global step on the ps counts both workers' 50 steps; the later read sees them all.
    assert 98 <= max(chief["global_step"], other["global_step"]) <= 100, results
    saved = checkpoint_steps(logdir)                       # the chief's last checkpoint
    assert saved and saved[-1] >= chief["global_step"], (saved, results)
