"""tf.layers: dense, conv2d, the poolings, flatten and dropout, with TF 1.x's variable names,
defaults and sharing, checked against numpy."""

import numpy as np
import pytest

import actorflow.compat.v1 as tf


@pytest.fixture(autouse=True)
def fresh_default_graph():
    tf.reset_default_graph()
    yield


def test_dense_layers_name_their_variables_as_tf_and_share_them_by_name():
    x = tf.placeholder(tf.float32, [None, 4])
    h = tf.layers.dense(x, 3, activation=tf.nn.relu)
    y = tf.layers.dense(h, 2)
    logits = tf.layers.dense(h, 2, name="logits")
    again = tf.layers.dense(h, 2, name="logits", reuse=True)
    assert [v.name for v in tf.trainable_variables()] == [
        "dense/kernel:0", "dense/bias:0", "dense_1/kernel:0", "dense_1/bias:0",
        "logits/kernel:0", "logits/bias:0"]
    assert y.shape.as_list() == [None, 2]
    with pytest.raises(ValueError, match="logits/kernel already exists"):
        tf.layers.dense(h, 2, name="logits")
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        a, b = sess.run([logits, again], {x: np.ones((5, 4), np.float32)})
    np.testing.assert_array_equal(a, b)


def test_dense_computes_activation_of_inputs_times_kernel_plus_bias():
    rng = np.random.RandomState(3)
    kernel = rng.randn(4, 3).astype(np.float32)
    bias = rng.randn(3).astype(np.float32)
    x_value = rng.randn(6, 4).astype(np.float32)
    x = tf.placeholder(tf.float32, [None, 4])
    y = tf.layers.dense(x, 3, activation=tf.nn.relu,
                        kernel_initializer=tf.constant_initializer(kernel),
                        bias_initializer=tf.constant_initializer(bias))
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        got = sess.run(y, {x: x_value})
    np.testing.assert_allclose(got, np.maximum(x_value @ kernel + bias, 0), rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="flatten them first"):
        tf.layers.dense(tf.placeholder(tf.float32, [None, 2, 2]), 3)


def test_a_small_cnn_of_layers_has_tfs_shapes_and_trains():
    rng = np.random.RandomState(0)
    images = rng.rand(16, 8, 8, 1).astype(np.float32)
    labels = np.eye(2, dtype=np.float32)[(images.mean(axis=(1, 2, 3)) > 0.5).astype(int)]
    x = tf.placeholder(tf.float32, [None, 8, 8, 1])
    y = tf.placeholder(tf.float32, [None, 2])
    # Seeded: from some unseeded starts 30 steps did not lower this loss.
    conv = tf.layers.conv2d(x, 4, 3, padding="same", activation=tf.nn.relu,
                            kernel_initializer=tf.glorot_uniform_initializer(seed=1))
    pooled = tf.layers.max_pooling2d(conv, 2, 2)
    averaged = tf.layers.average_pooling2d(pooled, 2, 2, padding="valid")
    flat = tf.layers.flatten(averaged)
    logits = tf.layers.dense(flat, 2, kernel_initializer=tf.glorot_uniform_initializer(seed=2))
    assert conv.shape.as_list() == [None, 8, 8, 4]
    assert pooled.shape.as_list() == [None, 4, 4, 4]
    assert flat.shape.as_list() == [None, 16]
    assert tf.trainable_variables()[0].name == "conv2d/kernel:0"
    assert tf.trainable_variables()[0].shape.as_list() == [3, 3, 1, 4]
    loss = tf.reduce_mean(tf.nn.softmax_cross_entropy_with_logits_v2(labels=y, logits=logits))
    train = tf.train.GradientDescentOptimizer(0.5).minimize(loss)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        first = sess.run(loss, {x: images, y: labels})
        for _ in range(30):
            sess.run(train, {x: images, y: labels})
        last = sess.run(loss, {x: images, y: labels})
    assert last < first


def test_dropout_drops_only_while_training():
    x = tf.ones([1000])
    training = tf.placeholder(tf.bool, [])
    dropped = tf.layers.dropout(x, rate=0.25, training=training, seed=1)
    never = tf.layers.dropout(x, rate=0.25)
    with tf.Session() as sess:
        on = sess.run(dropped, {training: True})
        off, plain = sess.run([dropped, never], {training: False})
    np.testing.assert_array_equal(off, np.ones(1000))
    np.testing.assert_array_equal(plain, np.ones(1000))
    kept = on[on != 0]
    np.testing.assert_allclose(kept, 1 / 0.75, rtol=1e-6)
    assert 0.18 < 1 - kept.size / 1000.0 < 0.32


def test_kernel_and_bias_constraints_are_applied_after_each_update():
    x = tf.placeholder(tf.float32, [None, 2])
    nonnegative = lambda t: tf.maximum(t, 0.0)  # noqa: E731
    clipped = tf.layers.dense(x, 1, kernel_initializer=tf.zeros_initializer(),
                              kernel_constraint=nonnegative, bias_constraint=nonnegative,
                              name="clipped")
    free = tf.layers.dense(x, 1, kernel_initializer=tf.zeros_initializer(), name="free")
    # Minimising the outputs pushes every weight below zero.
    loss = tf.reduce_sum(clipped) + tf.reduce_sum(free)
    train_op = tf.train.GradientDescentOptimizer(0.5).minimize(loss)
    feed = {x: np.ones((4, 2), np.float32)}
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        for _ in range(3):
            sess.run(train_op, feed)
        kernel, bias = sess.run(["clipped/kernel:0", "clipped/bias:0"])
        free_kernel, free_bias = sess.run(["free/kernel:0", "free/bias:0"])
    np.testing.assert_array_equal(kernel, np.zeros((2, 1), np.float32))
    np.testing.assert_array_equal(bias, [0.0])
    np.testing.assert_allclose(free_kernel, np.full((2, 1), -6.0), rtol=1e-6)
    np.testing.assert_allclose(free_bias, [-6.0], rtol=1e-6)


def test_conv2d_passes_its_kernel_constraint_and_refuses_an_activity_regularizer():
    x = tf.placeholder(tf.float32, [None, 4, 4, 1])
    tf.layers.conv2d(x, 2, 3, kernel_constraint=lambda t: t * 0.0, name="conv")
    kernel = [v for v in tf.global_variables() if v.name == "conv/kernel:0"][0]
    assert kernel.constraint is not None
    with pytest.raises(ValueError, match="conv2d: activity_regularizer"):
        tf.layers.conv2d(x, 2, 3, activity_regularizer=lambda t: t)
    with pytest.raises(ValueError, match="dense: activity_regularizer"):
        tf.layers.dense(tf.placeholder(tf.float32, [None, 2]), 1, activity_regularizer=lambda t: t)
