"""Sessions: fetch structures, feeds and their checks, default sessions, targets, config and
errors."""

import collections
import gc
import os
import signal
import threading
import time

import numpy as np
import pytest

import actorflow.compat.v1 as tf


@pytest.fixture(autouse=True)
def fresh_default_graph():
    tf.reset_default_graph()
    yield


def test_nested_fetches_come_back_in_their_structure():
    a = tf.constant(1.0)
    b = tf.constant(np.array([2, 3], np.int32))
    v = tf.Variable(4.0)
    Pair = collections.namedtuple("Pair", "first second")
    with tf.Session() as sess:
        assert sess.run(v.initializer) is None
        result = sess.run({"list": [a, (b, v)], "pair": Pair(a, v.initializer), "name": "Const:0"})
    assert set(result) == {"list", "pair", "name"}
    first, (second, third) = result["list"]
    assert isinstance(result["list"], list) and isinstance(result["list"][1], tuple)
    assert first == 1.0 and isinstance(first, np.float32)
    np.testing.assert_array_equal(second, [2, 3])
    assert second.dtype == np.int32
    assert third == 4.0
    assert isinstance(result["pair"], Pair) and result["pair"].first == 1.0
    assert result["pair"].second is None
    assert result["name"] == 1.0


def test_feeds_from_numpy_lists_and_scalars():
    x = tf.placeholder(tf.float32, [None, 2], name="x")
    k = tf.placeholder(tf.int32, [], name="k")
    y = tf.reduce_sum(x, axis=1) * tf.cast(k, tf.float32)
    with tf.Session() as sess:
        np.testing.assert_allclose(sess.run(y, {x: [[1, 2], [3, 4]], k: 2}), [6.0, 14.0])
        np.testing.assert_allclose(sess.run(y, {x: np.ones((1, 2)), k: np.int64(3)}), [6.0])
        np.testing.assert_allclose(sess.run(y, feed_dict={"x:0": [[0.5, 0.5]], "k:0": 1}), [1.0])
        # Any tensor may be fed, not only placeholders.
        assert sess.run(y, {x: [[1.0, 1.0]], k: 1, y: [9.0]}) == [9.0]


def test_a_steps_results_come_back_without_a_copy_and_stored_values_as_copies():
    v = tf.Variable(np.arange(4, dtype=np.float32))
    doubled = v * 2.0
    with tf.Session() as sess:
        sess.run(v.initializer)
        fresh = sess.run(doubled)
        stored = sess.run(v)
        # The step's own result: the array is the tensor's buffer, which its base keeps alive.
        assert not fresh.flags.owndata and fresh.base is not None
        # The variable's value: writing the fetched array changes nothing in the session.
        stored[0] = 100.0
        np.testing.assert_array_equal(sess.run(v), [0, 1, 2, 3])
        fresh[1] = -1.0
        np.testing.assert_array_equal(sess.run(doubled), [0, 2, 4, 6])
    del sess
    gc.collect()
    # The buffer outlives the session that made it.
    np.testing.assert_array_equal(fresh, [0, -1, 4, 6])


def test_a_feed_of_the_wrong_dtype_or_shape_names_the_placeholder():
    x = tf.placeholder(tf.int32, [2], name="counts")
    y = x * 2
    with tf.Session() as sess:
        with pytest.raises(TypeError, match="'counts:0'.*int32"):
            sess.run(y, {x: [1.5, 2.5]})
        with pytest.raises(TypeError, match="'counts:0'"):
            sess.run(y, {x: [True, False]})
        with pytest.raises(ValueError, match="shape \\(3,\\) for Tensor 'counts:0'"):
            sess.run(y, {x: [1, 2, 3]})
        with pytest.raises(TypeError, match="feed_dict key"):
            sess.run(y, {y.op: [1, 2]})
        np.testing.assert_array_equal(sess.run(y, {x: [1, 2]}), [2, 4])


def test_an_unfed_placeholder_and_an_uninitialised_variable_name_themselves():
    x = tf.placeholder(tf.float32, name="needed")
    v = tf.Variable(1.0, name="weights")
    with tf.Session() as sess:
        with pytest.raises(tf.errors.InvalidArgumentError, match="needed") as raised:
            sess.run(x + 1.0)
        assert "needed" in raised.value.message
        assert isinstance(raised.value, tf.errors.OpError)
        assert raised.value.error_code == tf.errors.INVALID_ARGUMENT
        with pytest.raises(tf.errors.FailedPreconditionError, match="uninitialized value 'weights'"):
            sess.run(v)


def test_bad_fetches_are_type_and_value_errors():
    a = tf.constant(1.0)
    with tf.Session() as sess:
        with pytest.raises(TypeError, match="None"):
            sess.run(None)
        with pytest.raises(TypeError, match="invalid type"):
            sess.run(3.0)
        with pytest.raises(ValueError, match="nothing:0"):
            sess.run("nothing:0")
        with tf.Graph().as_default():
            other = tf.constant(2.0)
        with pytest.raises(ValueError, match="not an element of this graph"):
            sess.run(other)
        assert sess.run(a) == 1.0


def test_a_closed_session_refuses_to_run():
    a = tf.constant(1.0)
    sess = tf.Session()
    assert sess.run(a) == 1.0
    sess.close()
    sess.close()                     # closing twice is harmless
    with pytest.raises(RuntimeError, match="closed Session"):
        sess.run(a)


def test_eval_and_run_use_the_default_session():
    a = tf.Variable(2.0)
    b = a * 3.0
    with pytest.raises(ValueError, match="No default session"):
        b.eval()
    with tf.Session() as sess:
        assert tf.get_default_session() is sess
        a.initializer.run()
        assert b.eval() == 6.0
    assert tf.get_default_session() is None
    sess = tf.Session()
    a.initializer.run(session=sess)
    assert b.eval(session=sess) == 6.0
    with sess.as_default():
        assert b.eval() == 6.0
    sess.close()
    interactive = tf.InteractiveSession()
    a.initializer.run()
    assert b.eval() == 6.0
    interactive.close()
    assert tf.get_default_session() is None


def test_a_session_on_another_graph_runs_that_graph():
    g = tf.Graph()
    with g.as_default():
        c = tf.constant(5.0) * 2.0
    with tf.Session(graph=g) as sess:
        assert sess.graph is g
        assert sess.run(c) == 10.0
        assert c.eval() == 10.0


def test_config_proto_fields_reach_the_session(capfd):
    with tf.device("/gpu:0"):
        a = tf.constant(3.0, name="pinned")
    config = tf.ConfigProto(log_device_placement=True, intra_op_parallelism_threads=1,
                            inter_op_parallelism_threads=1)
    with pytest.raises(tf.errors.InvalidArgumentError, match="pinned"):
        with tf.Session(config=config) as sess:
            sess.run(a)
    config.allow_soft_placement = True
    with tf.Session(config=config) as sess:
        assert sess.run(a) == 3.0
    assert "pinned: /job:localhost/replica:0/task:0/device:CPU:0" in capfd.readouterr().err
    with pytest.raises(AttributeError, match="no field 'gpu_memory'"):
        tf.ConfigProto(gpu_memory=1)


def test_device_count_makes_cpu_devices_and_caps_gpus():
    with tf.device("/cpu:1"):
        a = tf.constant(3.0, name="on_cpu1") * 2.0
    config = tf.ConfigProto(device_count={"CPU": 2, "GPU": 0}, log_device_placement=True)
    with tf.Session(config=config) as sess:
        assert sess.run(a) == 6.0
        assert any(line.startswith("on_cpu1: ") and line.endswith("/device:CPU:1")
                   for line in sess._c.placement_log())
        assert not any("GPU" in name for name in sess._c.device_names())
    with pytest.raises(ValueError, match="not 'TPU'"):
        tf.Session(config=tf.ConfigProto(device_count={"TPU": 1}))
    with pytest.raises(ValueError, match="CPU needs a count of at least 1"):
        tf.Session(config=tf.ConfigProto(device_count={"CPU": 0}))


def test_gpu_options_reach_the_sessions_devices(monkeypatch):
    # A test device (devices/test_device.hpp, a 256 MiB card) takes a GPU's path on any machine.
    monkeypatch.setenv("ACTORFLOW_TEST_DEVICES", "1")
    with tf.device("/device:TEST:0"):
        big = tf.fill([1024, 1024], 1.0, name="big")
        small = tf.fill([4], 3.0, name="small")
    config = tf.ConfigProto(use_per_session_threads=True)
    assert config.gpu_options is not tf.ConfigProto().gpu_options
    config.gpu_options.per_process_gpu_memory_fraction = 0.004  # about 1 MiB of it
    config.gpu_options.allow_growth = True
    with tf.Session(config=config) as sess:
        with pytest.raises(tf.errors.ResourceExhaustedError, match="node 'big'"):
            sess.run(big)
        np.testing.assert_array_equal(sess.run(small), [3, 3, 3, 3])
    with tf.Session(config=tf.ConfigProto(
            gpu_options=tf.GPUOptions(per_process_gpu_memory_fraction=0.5))) as sess:
        assert sess.run(big).shape == (1024, 1024)
    with pytest.raises(ValueError, match="CUDA_VISIBLE_DEVICES=1"):
        tf.Session(config=tf.ConfigProto(gpu_options=tf.GPUOptions(visible_device_list="1")))


@pytest.mark.parametrize("target", ["http://127.0.0.1:1", "grpc://no-port", "localhost:2222"])
def test_a_target_actorflow_cannot_use_is_an_error_quoting_it(target):
    with pytest.raises((ValueError, tf.errors.InvalidArgumentError), match=target.split("//")[-1]):
        tf.Session(target)


def test_run_options_it_cannot_honour_are_refused_rather_than_ignored():
    a = tf.constant(1.0)
    with tf.Session() as sess:
        with pytest.raises(TypeError, match="options"):
            sess.run(a, options=object())
        with pytest.raises(TypeError, match="run_metadata"):
            sess.run(a, run_metadata={})
        for field, value in [("output_partition_graphs", True), ("inter_op_thread_pool", 1)]:
            with pytest.raises(ValueError, match=field):
                sess.run(a, options=tf.RunOptions(**{field: value}))
        # A refused step leaves the session usable.
        assert sess.run(a, options=tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE)) == 1.0
    with pytest.raises(AttributeError, match="no field 'timeout'"):
        tf.RunOptions(timeout=5)


def test_a_step_past_its_timeout_is_aborted_and_the_session_goes_on():
    # About 50 s of loop (some 5 us an iteration) unless the timeout stops it.
    i = tf.constant(0)
    final = tf.while_loop(lambda i: i < 10000000, lambda i: i + 1, [i])
    small = tf.while_loop(lambda i: i < 100, lambda i: i + 1, [i])
    with tf.Session() as sess:
        started = time.monotonic()
        with pytest.raises(tf.errors.DeadlineExceededError, match="100 ms timeout"):
            sess.run(final, options=tf.RunOptions(timeout_in_ms=100))
        assert time.monotonic() - started < 10
        assert sess.run(small, options=tf.RunOptions(timeout_in_ms=60000)) == [100]
        assert sess.run(small) == [100]


@pytest.mark.parametrize("on_server", [False, True])
def test_ctrl_c_interrupts_a_long_step_and_the_session_goes_on(on_server):
    i = tf.constant(0)
    final = tf.while_loop(lambda i: i < 10000000, lambda i: i + 1, [i])  # about 50 s
    small = tf.constant(2.0) * 3.0
    ctrl_c = threading.Timer(0.3, lambda: os.kill(os.getpid(), signal.SIGINT))
    # On a server (its master a task service, as for "grpc://..."): the cancel goes through it.
    server = tf.train.Server.create_local_server() if on_server else None
    with tf.Session(server.target if server else "") as sess:
        assert sess.run(small) == 6.0
        started = time.monotonic()
        ctrl_c.start()
        with pytest.raises(KeyboardInterrupt):
            sess.run(final)
        ctrl_c.join()
        assert time.monotonic() - started < 10
        assert sess.run(small) == 6.0
    # Between steps a Ctrl-C is Python's KeyboardInterrupt, as ever.
    with pytest.raises(KeyboardInterrupt):
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(5)


def test_run_metadata_gets_the_steps_times():
    x = tf.constant(np.ones((300, 300), np.float32))
    product = tf.matmul(x, x)
    metadata = tf.RunMetadata()
    assert metadata.step_stats.total_seconds == 0.0
    with tf.Session() as sess:
        value = sess.run(product, options=tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE),
                         run_metadata=metadata)
        stats = metadata.step_stats
        assert value[0, 0] == 300.0
        assert stats.total_seconds >= stats.execution_seconds > 0.0
        assert stats.dev_stats == [] and metadata.partition_graphs == []
        # Without options too; each step overwrites the times.
        sess.run(tf.constant(2.0), run_metadata=metadata)
        assert 0.0 < metadata.step_stats.total_seconds
    metadata.Clear()
    assert metadata.step_stats.total_seconds == 0.0


def test_steps_release_the_gil():
    # While one thread runs steps, another keeps counting; with the GIL held in the steps the
    # counter would stand still for their whole length.
    x = tf.constant(np.ones((300, 300), np.float32))
    y = tf.reduce_sum(tf.matmul(tf.matmul(x, x), x))
    with tf.Session(config=tf.ConfigProto(intra_op_parallelism_threads=1)) as sess:
        sess.run(y)
        counted = []
        done = threading.Event()

        def count():
            n = 0
            while not done.is_set():
                n += 1
            counted.append(n)

        counter = threading.Thread(target=count)
        counter.start()
        for _ in range(20):
            sess.run(y)
        done.set()
        counter.join()
    assert counted[0] > 1000


def test_an_op_that_fails_to_build_leaves_the_graph_which_stays_usable():
    a = tf.constant(1.0)
    ops_before = len(tf.get_default_graph().get_operations())
    with pytest.raises(ValueError, match="MatMul"):
        tf.matmul(tf.constant([1.0]), tf.constant([2.0]), name="bad_product")
    with pytest.raises(ValueError, match="index 3 is out of bounds"):
        a[tf.newaxis][3]
    names = [op.name for op in tf.get_default_graph().get_operations()]
    assert "bad_product" not in names
    # The operands made before the failure stay, as in TF; the failed ops do not.
    assert len(names) == ops_before + 3
    with tf.Session() as sess:
        assert sess.run(a + 1.0) == 2.0


def test_a_graph_with_a_failure_inside_a_while_loop_is_refused_saying_why():
    a = tf.constant(1.0)
    with pytest.raises(ValueError, match="MatMul"):
        tf.while_loop(lambda i: i < 3.0,
                      lambda i: tf.reduce_sum(tf.matmul(tf.reshape(i, [1]), [2.0])), [a])
    with tf.Session() as sess:
        with pytest.raises(tf.errors.FailedPreconditionError, match="build a new graph.*MatMul"):
            sess.run(a)
    tf.reset_default_graph()
    with tf.Session() as sess:
        assert sess.run(tf.constant(2.0)) == 2.0
