"""tf.variable_scope, tf.get_variable, the initializers, partitioned variables and
TFConfigClusterResolver, with TF 1.x's names, reuse rules and numbers."""

import json

import numpy as np
import pytest

import actorflow.compat.v1 as tf


@pytest.fixture(autouse=True)
def fresh_default_graph():
    tf.reset_default_graph()
    yield


def values_of(*tensors):
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        return sess.run(list(tensors))


# --- names and reuse -----------------------------------------------------------------------------


def test_a_variable_is_named_by_its_variable_scopes_not_by_name_scopes_inside_them():
    with tf.variable_scope("layer1"):
        with tf.name_scope("ops"):
            w = tf.get_variable("w", [3, 2])
            y = w * 2.0
        with tf.variable_scope("inner"):
            b = tf.get_variable("b", [2])
    assert w.name == "layer1/w:0" and b.name == "layer1/inner/b:0"
    assert y.name.startswith("layer1/ops/")
    assert w.initializer.name == "layer1/w/Assign"
    assert any(op.name.startswith("layer1/w/Initializer/") for op in
               tf.get_default_graph().get_operations())
    assert tf.get_variable_scope().name == ""


def test_reuse_gives_the_same_variable_and_each_mistake_is_a_value_error_naming_it():
    with tf.variable_scope("scope"):
        v = tf.get_variable("v", [2])
    with tf.variable_scope("scope", reuse=True):
        assert tf.get_variable("v") is v
        assert tf.get_variable("v", [2]) is v
        with pytest.raises(ValueError, match="Trying to share variable scope/v, but specified "
                                             "shape"):
            tf.get_variable("v", [3])
        with pytest.raises(ValueError, match="specified dtype float64"):
            tf.get_variable("v", [2], dtype=tf.float64)
        with pytest.raises(ValueError, match="Variable scope/missing does not exist"):
            tf.get_variable("missing", [1])
    with tf.variable_scope("scope"):
        with pytest.raises(ValueError, match="Variable scope/v already exists, disallowed"):
            tf.get_variable("v", [2])
    with tf.variable_scope("scope", reuse=tf.AUTO_REUSE):
        assert tf.get_variable("v", [2]) is v
        made = tf.get_variable("made", [4])
        assert tf.get_variable("made", [4]) is made
    with tf.variable_scope("fresh"):
        with pytest.raises(ValueError, match="must be fully defined"):
            tf.get_variable("no_shape")


def test_reuse_is_inherited_by_sub_scopes_and_reuse_variables_turns_it_on():
    with tf.variable_scope("outer"):
        with tf.variable_scope("inner"):
            v = tf.get_variable("v", [1])
    with tf.variable_scope("outer", reuse=True):
        with tf.variable_scope("inner"):  # reuse=None inherits True (False would too, in TF1)
            assert tf.get_variable_scope().reuse is True
            assert tf.get_variable("v") is v
    with tf.variable_scope("tower") as scope:
        w = tf.get_variable("w", [2])
        scope.reuse_variables()
        assert tf.get_variable("w") is w


def test_a_scope_object_reenters_its_name_and_first_name_scope():
    with tf.variable_scope("model") as model:
        w = tf.get_variable("w", [1])
    with tf.name_scope("elsewhere"):
        with tf.variable_scope(model, reuse=True) as again:
            assert again.name == "model"
            assert tf.get_variable("w") is w
            op = tf.identity(w, name="read_again")
        with tf.variable_scope(model, reuse=tf.AUTO_REUSE):
            b = tf.get_variable("b", [1])
    assert op.name == "model/read_again:0"
    assert b.name == "model/b:0"


def test_default_names_are_made_unique_and_name_scope_reenters_by_full_name():
    names = []
    for _ in range(3):
        with tf.variable_scope(None, default_name="dense"):
            names.append(tf.get_variable("kernel", [1]).name)
    assert names == ["dense/kernel:0", "dense_1/kernel:0", "dense_2/kernel:0"]
    with tf.name_scope("a"):
        with tf.name_scope("b"):
            pass
        with tf.name_scope("x/y/"):
            c = tf.constant(1.0, name="c")
    assert c.name == "x/y/c:0"
    with pytest.raises(TypeError, match="default_name is None"):
        with tf.variable_scope(None):
            pass


def test_scope_defaults_custom_getters_and_regularizers_apply():
    calls = []

    def doubling_getter(getter, name, *args, **kwargs):
        calls.append(name)
        return getter(name, *args, **kwargs) * 2.0

    with tf.variable_scope("s", initializer=tf.constant_initializer(3.0), dtype=tf.float64,
                           custom_getter=doubling_getter,
                           regularizer=lambda v: tf.reduce_sum(v) * 0.5):
        doubled = tf.get_variable("v", [2])
        assert tf.get_variable_scope().dtype == tf.float64
    assert calls == ["s/v"]
    losses = tf.get_collection(tf.GraphKeys.REGULARIZATION_LOSSES)
    assert len(losses) == 1
    (v,) = tf.global_variables()
    assert v.dtype == tf.float64
    value, twice, regularization = values_of(v, doubled, tf.losses.get_regularization_loss())
    np.testing.assert_array_equal(value, [3.0, 3.0])
    np.testing.assert_array_equal(twice, [6.0, 6.0])
    assert regularization == 3.0
    assert tf.get_collection(tf.GraphKeys.TRAINABLE_VARIABLES, scope="s") == [v]


def test_an_initializer_value_gives_the_shape_and_int_variables_start_at_zero():
    v = tf.get_variable("from_list", initializer=[[1.0, 2.0], [3.0, 4.0]])
    t = tf.get_variable("from_tensor", initializer=tf.ones([3]) * 5.0)
    n = tf.get_variable("count", [2], dtype=tf.int64)
    assert v.shape.as_list() == [2, 2] and t.shape.as_list() == [3]
    a, b, c = values_of(v, t, n)
    np.testing.assert_array_equal(a, [[1, 2], [3, 4]])
    np.testing.assert_array_equal(b, [5, 5, 5])
    np.testing.assert_array_equal(c, [0, 0])
    assert c.dtype == np.int64


# --- initializers --------------------------------------------------------------------------------


def test_the_initializers_draw_what_tf_draws():
    fan_in, fan_out = 400, 100
    glorot = tf.get_variable("glorot", [fan_in, fan_out])  # TF's default initializer
    uniform = tf.get_variable("uniform", [1000], initializer=tf.random_uniform_initializer(-2, 3, seed=1))
    normal = tf.get_variable("normal", [20000], initializer=tf.random_normal_initializer(1.0, 0.5, seed=2))
    truncated = tf.get_variable("truncated", [20000],
                                initializer=tf.truncated_normal_initializer(0.0, 2.0, seed=3))
    he = tf.get_variable("he", [fan_in, fan_out],
                         initializer=tf.variance_scaling_initializer(2.0, "fan_in",
                                                                     "untruncated_normal", seed=4))
    conv = tf.get_variable("conv", [3, 3, 16, 32],
                           initializer=tf.initializers.glorot_normal(seed=5))
    ones = tf.get_variable("ones", [2, 2], initializer=tf.ones_initializer())
    g, u, n, t, h, c, o = values_of(glorot, uniform, normal, truncated, he, conv, ones)
    limit = np.sqrt(6.0 / (fan_in + fan_out))
    assert np.abs(g).max() <= limit and np.abs(g).max() > 0.95 * limit
    assert abs(np.std(g) - limit / np.sqrt(3.0)) < 0.02 * limit
    assert u.min() >= -2 and u.max() < 3 and u.min() < -1.9 and u.max() > 2.9
    assert abs(n.mean() - 1.0) < 0.02 and abs(n.std() - 0.5) < 0.02
    assert np.abs(t).max() <= 4.0 and abs(t.std() - 0.88 * 2.0) < 0.05
    assert abs(h.std() - np.sqrt(2.0 / fan_in)) < 0.05 * np.sqrt(2.0 / fan_in)
    # A kernel's fans count its receptive field: (9 * 16 + 9 * 32) / 2, truncation corrected.
    assert abs(c.std() - np.sqrt(1.0 / (9 * 24))) < 0.05 * np.sqrt(1.0 / (9 * 24))
    np.testing.assert_array_equal(o, np.ones((2, 2)))
    with pytest.raises(ValueError, match="Invalid `mode`"):
        tf.variance_scaling_initializer(mode="fan_sideways")


# --- partitioned variables -----------------------------------------------------------------------


def test_a_partitioned_variable_is_shards_named_part_i_with_tfs_row_split():
    whole = np.arange(40, dtype=np.float32).reshape(10, 4)
    with tf.variable_scope("emb", partitioner=tf.fixed_size_partitioner(3)):
        table = tf.get_variable("table", initializer=tf.constant_initializer(whole),
                                shape=[10, 4])
    shards = list(table)
    assert [s.name for s in shards] == ["emb/table/part_%d:0" % i for i in range(3)]
    assert [s.shape.as_list() for s in shards] == [[4, 4], [3, 4], [3, 4]]
    assert table.shape.as_list() == [10, 4] and table.name == "emb/table"
    assert tf.trainable_variables() == shards
    with tf.variable_scope("emb", reuse=True):
        assert tf.get_variable("table") is table
    (value,) = values_of(tf.convert_to_tensor(table))
    np.testing.assert_array_equal(value, whole)
    with pytest.raises(ValueError, match="partitioner gave"):
        tf.get_variable("bad", [4, 4], partitioner=lambda shape, dtype: [2, 2])


def test_each_shard_of_a_seeded_random_partitioned_variable_draws_its_own_numbers():
    v = tf.get_variable("v", [6, 5], partitioner=tf.fixed_size_partitioner(2),
                        initializer=tf.random_normal_initializer(seed=7))
    a, b = values_of(*list(v))
    assert not np.allclose(a, b)


def test_training_a_partitioned_variable_updates_every_shard_as_the_whole_would_be():
    rng = np.random.RandomState(0)
    x_value = rng.randn(8, 5).astype(np.float32)
    w0 = rng.randn(5, 3).astype(np.float32)
    x = tf.placeholder(tf.float32, [None, 5])
    w = tf.get_variable("w", [5, 3], initializer=tf.constant_initializer(w0),
                        partitioner=tf.fixed_size_partitioner(2))
    loss = tf.reduce_sum(tf.square(tf.matmul(x, w)))
    train = tf.train.GradientDescentOptimizer(0.01).minimize(loss, var_list=[w])
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        sess.run(train, {x: x_value})
        after = sess.run(w.as_tensor())
    expected = w0 - 0.01 * (2.0 * x_value.T @ (x_value @ w0))
    np.testing.assert_allclose(after, expected, rtol=1e-5, atol=1e-5)


def test_replica_device_setter_spreads_the_shards_over_the_ps_tasks():
    cluster = tf.train.ClusterSpec({"ps": ["127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"],
                                    "worker": ["127.0.0.1:4"]})
    with tf.device(tf.train.replica_device_setter(cluster=cluster)):
        table = tf.get_variable("table", [9, 2], partitioner=tf.fixed_size_partitioner(3))
    assert [s.device for s in table] == ["/job:ps/task:%d" % i for i in range(3)]


@pytest.mark.parametrize("strategy", ["mod", "div"])
def test_embedding_lookup_of_a_partitioned_table_gathers_the_whole_tables_rows(strategy):
    whole = np.arange(33, dtype=np.float32).reshape(11, 3)
    ids_value = np.array([[0, 10, 4], [7, 7, 1]], np.int64)
    table = tf.get_variable("table", [11, 3], partitioner=tf.fixed_size_partitioner(3),
                            initializer=tf.zeros_initializer())
    ids = tf.placeholder(tf.int64, [None, 3])
    rows = tf.nn.embedding_lookup(table, ids, partition_strategy=strategy)
    as_list = tf.nn.embedding_lookup(list(table), ids, partition_strategy=strategy)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        # Each shard holds the rows the strategy puts there (TF's mod and div rules).
        shard_rows = [s.shape.as_list()[0] for s in table]
        if strategy == "mod":
            parts = [whole[i::3] for i in range(3)]
        else:
            parts = np.split(whole, np.cumsum(shard_rows)[:-1])
        for shard, part in zip(table, parts):
            sess.run(shard.assign(part))
        got, got_list = sess.run([rows, as_list], {ids: ids_value})
    np.testing.assert_array_equal(got, whole[ids_value])
    np.testing.assert_array_equal(got_list, whole[ids_value])


def test_the_size_partitioners_count_as_tfs_do():
    shape = tf.TensorShape([1000, 64])  # 256,000 bytes of float32
    assert tf.min_max_variable_partitioner(max_partitions=8, min_slice_size=64 << 10)(
        shape=shape, dtype=tf.float32) == [4, 1]
    assert tf.min_max_variable_partitioner(max_partitions=2, min_slice_size=64 << 10)(
        shape=shape, dtype=tf.float32) == [2, 1]
    assert tf.variable_axis_size_partitioner(max_shard_bytes=100 << 10)(
        shape=shape, dtype=tf.float32) == [3, 1]
    assert tf.fixed_size_partitioner(5, axis=1)(shape=shape, dtype=tf.float32) == [1, 5]
    with pytest.raises(ValueError, match="axis 2 is outside"):
        tf.fixed_size_partitioner(2, axis=2)(shape=shape, dtype=tf.float32)


# --- TF_CONFIG -----------------------------------------------------------------------------------


def test_tf_config_cluster_resolver_reads_the_cluster_and_this_task(monkeypatch):
    config = {"cluster": {"ps": ["127.0.0.1:2222"], "worker": ["127.0.0.1:2223", "127.0.0.1:2224"]},
              "task": {"type": "worker", "index": 1}, "rpc_layer": "grpc"}
    monkeypatch.setenv("TF_CONFIG", json.dumps(config))
    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    assert resolver.cluster_spec().as_dict() == config["cluster"]
    assert (resolver.task_type, resolver.task_id, resolver.rpc_layer) == ("worker", 1, "grpc")
    assert resolver.master() == "grpc://127.0.0.1:2224"
    assert resolver.master("ps", 0, rpc_layer="caf") == "caf://127.0.0.1:2222"
    resolver.task_id = 0
    assert resolver.master() == "grpc://127.0.0.1:2223"
    monkeypatch.setenv("TF_CONFIG", "{not json")
    with pytest.raises(ValueError, match="TF_CONFIG is not JSON"):
        resolver.cluster_spec()
    monkeypatch.delenv("TF_CONFIG")
    empty = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    assert empty.cluster_spec().as_dict() == {} and empty.master() == ""


# --- constraints and failed calls --------------------------------------------------------------


def one_step_with_a_big_gradient(constraint):
    """w starts at zeros; one step of gradient descent on -10 * sum(w) moves each entry to 10."""
    w = tf.get_variable("w", [3], initializer=tf.zeros_initializer(), constraint=constraint)
    step = tf.train.get_or_create_global_step()
    train_op = tf.train.GradientDescentOptimizer(1.0).minimize(-10.0 * tf.reduce_sum(w),
                                                               global_step=step)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        sess.run(train_op)
        return w, sess.run(w), sess.run(step)


def test_the_optimizer_applies_a_variables_constraint_to_the_updated_value():
    w, value, step = one_step_with_a_big_gradient(lambda v: tf.clip_by_value(v, -0.1, 0.1))
    assert w.constraint is not None
    # Clipped after the update: 0.1, not the value before it (0.0), not the update (10.0).
    # (tf.minimum is x - relu(x - y) here: 10 - 9.9 in float32 is 0.1 within 4e-6.)
    np.testing.assert_allclose(value, [0.1, 0.1, 0.1], rtol=1e-5)
    assert step == 1   # the global step still counts, after the constraint's assign


def test_without_a_constraint_the_update_is_left_as_it_is():
    w, value, _ = one_step_with_a_big_gradient(None)
    assert w.constraint is None
    np.testing.assert_allclose(value, [10.0, 10.0, 10.0], rtol=1e-6)


def test_a_constraint_sees_the_updated_value_not_the_one_before():
    # 0 + 10 then halved: 5 (a constraint reading the value before the update would give 0).
    _, value, _ = one_step_with_a_big_gradient(lambda v: v * 0.5)
    np.testing.assert_allclose(value, [5.0, 5.0, 5.0], rtol=1e-6)


def test_tf_variable_takes_a_constraint_too_and_refuses_one_that_is_not_callable():
    v = tf.Variable([0.0, 0.0], constraint=lambda t: tf.maximum(t, -1.0))
    train_op = tf.train.GradientDescentOptimizer(1.0).minimize(10.0 * tf.reduce_sum(v))
    with tf.Session() as sess:
        sess.run(v.initializer)
        sess.run(train_op)
        np.testing.assert_allclose(sess.run(v), [-1.0, -1.0])
    with pytest.raises(ValueError, match="constraint must be callable"):
        tf.Variable(1.0, constraint=0.5)
    with pytest.raises(ValueError, match="'c': constraint must be callable"):
        tf.get_variable("c", [1], constraint="clip")


def test_sync_replicas_refuses_a_constrained_variable_naming_it():
    w = tf.get_variable("w", [1], constraint=lambda v: v)
    step = tf.train.get_or_create_global_step()
    opt = tf.train.SyncReplicasOptimizer(tf.train.GradientDescentOptimizer(0.1), 1)
    with pytest.raises(ValueError, match="'w:0' has a constraint"):
        opt.minimize(tf.reduce_sum(w), global_step=step)


def graph_contents():
    graph = tf.get_default_graph()
    return [v.name for v in tf.global_variables()], [op.name for op in graph.get_operations()]


@pytest.mark.parametrize("call", [
    lambda: tf.get_variable("v", [2]),                               # tf.Variable's name
    lambda: tf.get_variable("fresh", [2], collections=5),
    lambda: tf.get_variable("fresh", [2], collections=["ok", 7]),
    lambda: tf.get_variable("fresh", [2], constraint=3.0),
    lambda: tf.get_variable("v", [4], partitioner=tf.fixed_size_partitioner(2)),
], ids=["name_clash", "collections_not_a_list", "collection_not_a_name",
        "constraint_not_callable", "partitioned_shard_clash"])
def test_a_failing_get_variable_leaves_the_graph_as_it_was(call):
    tf.Variable(1.0, name="v")
    tf.Variable(2.0, name="v/part_1")
    before = graph_contents()
    with pytest.raises(ValueError, match="'(v|fresh|v/part_1)'"):
        call()
    assert graph_contents() == before
    # The name is still free for a get_variable that works.
    assert tf.get_variable("fresh", [2]).name == "fresh:0"
