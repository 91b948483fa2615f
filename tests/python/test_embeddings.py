"""Embeddings from Python under TF1's names (issue 29): tf.SparseTensor,
tf.nn.embedding_lookup_sparse, tf.nn.log_uniform_candidate_sampler, tf.nn.nce_loss and
tf.nn.sampled_softmax_loss (graph/sparse_ops.hpp, graph/sampled_losses.hpp) against numpy, their
table gradients sparse, and TF1's word2vec_basic as a script (tests/python/programs)."""

import os
import subprocess
import sys

import numpy as np
import pytest

import actorflow.compat.v1 as tf

HERE = os.path.dirname(os.path.abspath(__file__))
TABLE = np.arange(24, dtype=np.float32).reshape(6, 4) / 10.0


@pytest.fixture(autouse=True)
def fresh_default_graph():
    tf.reset_default_graph()
    yield


def run(fetches, feed=None):
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        return sess.run(fetches, feed)


def test_sparse_tensor_holds_its_parts_and_fetches_as_a_value():
    sp = tf.SparseTensor(indices=[[0, 0], [1, 2]], values=[1.5, 2.5], dense_shape=[2, 3])
    assert sp.indices.dtype == tf.int64 and sp.dense_shape.dtype == tf.int64
    value = run(sp)
    assert isinstance(value, tf.SparseTensorValue)
    np.testing.assert_array_equal(value.indices, [[0, 0], [1, 2]])
    np.testing.assert_array_equal(value.values, [1.5, 2.5])
    np.testing.assert_array_equal(value.dense_shape, [2, 3])
    with pytest.raises(ValueError, match="indices has rank 1"):
        tf.SparseTensor(indices=[0, 1], values=[1.0, 2.0], dense_shape=[2])


@pytest.mark.parametrize("combiner", ["sum", "mean", "sqrtn"])
def test_embedding_lookup_sparse_combines_each_examples_rows(combiner):
    table = tf.Variable(TABLE)
    # Example 0: ids 1, 3, 3; example 1: none; example 2: id 5.
    indices = [[0, 0], [0, 1], [0, 2], [2, 0]]
    ids = [1, 3, 3, 5]
    weights = np.array([0.5, 2.0, 1.0, 3.0], np.float32)
    sp_ids = tf.SparseTensor(indices, np.array(ids, np.int64), [3, 3])
    sp_weights = tf.SparseTensor(indices, weights, [3, 3])
    got = run(tf.nn.embedding_lookup_sparse(table, sp_ids, sp_weights, combiner=combiner))
    expected = np.zeros((3, 4), np.float32)
    for example, members in ((0, [0, 1, 2]), (2, [3])):
        rows = sum(weights[i] * TABLE[ids[i]] for i in members)
        w = weights[members]
        scale = {"sum": 1.0, "mean": 1.0 / w.sum(), "sqrtn": 1.0 / np.sqrt((w ** 2).sum())}[combiner]
        expected[example] = rows * scale
    np.testing.assert_allclose(got, expected, rtol=1e-6)


def test_embedding_lookup_sparse_without_weights_is_the_mean_and_its_gradient_sparse():
    table = tf.Variable(TABLE)
    sp_ids = tf.SparseTensor([[0, 0], [0, 1], [1, 0]], np.array([2, 4, 2], np.int64), [2, 2])
    combined = tf.nn.embedding_lookup_sparse(table, sp_ids, None)
    got = run(combined)
    np.testing.assert_allclose(got, [(TABLE[2] + TABLE[4]) / 2, TABLE[2]], rtol=1e-6)
    (gradient,) = tf.gradients(tf.reduce_sum(combined), [table])
    assert isinstance(gradient, tf.IndexedSlices)
    dense = run(gradient)
    expected = np.zeros_like(TABLE)
    expected[2] = 1.5
    expected[4] = 0.5
    np.testing.assert_allclose(dense, expected, rtol=1e-6)
    with pytest.raises(ValueError, match="combiner"):
        tf.nn.embedding_lookup_sparse(table, sp_ids, None, combiner="max")
    with pytest.raises(TypeError, match="SparseTensor"):
        tf.nn.embedding_lookup_sparse(table, [1, 2], None)


def test_log_uniform_candidate_sampler_draws_in_range_with_tfs_expected_counts():
    true_classes = tf.constant([[0], [7]], tf.int64)
    candidates, true_count, sampled_count = tf.nn.log_uniform_candidate_sampler(
        true_classes, num_true=1, num_sampled=5, unique=False, range_max=100, seed=4)
    c, t, s = run([candidates, true_count, sampled_count])
    assert c.shape == (5,) and c.dtype == np.int64 and ((0 <= c) & (c < 100)).all()

    def p(k):
        return np.log((k + 2.0) / (k + 1.0)) / np.log(101.0)
    np.testing.assert_allclose(t, [[5 * p(0)], [5 * p(7)]], rtol=1e-5)
    np.testing.assert_allclose(s, 5 * p(c.astype(np.float64)), rtol=1e-5)


def sampled_setup():
    weights = tf.Variable(TABLE)
    biases = tf.Variable(np.array([0.1, -0.2, 0.3, 0.0, 0.5, -0.1], np.float32))
    inputs = np.array([[0.2, -0.1, 0.4, 0.3], [-0.5, 0.2, 0.1, 0.0]], np.float32)
    labels = np.array([[1], [4]], np.int64)
    candidates = np.array([0, 2, 5], np.int64)
    true_count = np.array([[0.3], [0.2]], np.float32)
    sampled_count = np.array([0.4, 0.25, 0.1], np.float32)
    sampled = (tf.constant(candidates), tf.constant(true_count), tf.constant(sampled_count))
    w, b = TABLE, np.array([0.1, -0.2, 0.3, 0.0, 0.5, -0.1], np.float32)
    true_logits = (inputs * w[labels[:, 0]]).sum(1) + b[labels[:, 0]] - np.log(true_count[:, 0])
    sampled_logits = inputs @ w[candidates].T + b[candidates] - np.log(sampled_count)
    return weights, biases, inputs, labels, sampled, true_logits, sampled_logits


def test_nce_loss_is_tfs_sigmoid_cross_entropy_of_true_and_sampled_logits():
    weights, biases, inputs, labels, sampled, true_logits, sampled_logits = sampled_setup()
    loss = tf.nn.nce_loss(weights, biases, labels, inputs, num_sampled=3, num_classes=6,
                          sampled_values=sampled)

    def xent(x, z):
        return np.maximum(x, 0) - x * z + np.log1p(np.exp(-np.abs(x)))
    expected = xent(true_logits, 1.0) + xent(sampled_logits, 0.0).sum(1)
    np.testing.assert_allclose(run(loss), expected, rtol=1e-5)
    (gradient,) = tf.gradients(tf.reduce_sum(loss), [weights])
    assert isinstance(gradient, tf.IndexedSlices)
    dense = run(gradient)
    # Only the true and sampled rows (1, 4; 0, 2, 5) get a gradient; row 3 none.
    assert np.abs(dense[[0, 1, 2, 4, 5]]).sum(1).min() > 0
    np.testing.assert_array_equal(dense[3], 0)


def test_sampled_softmax_loss_is_the_softmax_over_true_and_sampled_logits():
    weights, biases, inputs, labels, sampled, true_logits, sampled_logits = sampled_setup()
    loss = tf.nn.sampled_softmax_loss(weights, biases, labels, inputs, num_sampled=3,
                                      num_classes=6, sampled_values=sampled)
    logits = np.concatenate([true_logits[:, None], sampled_logits], axis=1)
    shifted = logits - logits.max(1, keepdims=True)
    expected = -(shifted[:, 0] - np.log(np.exp(shifted).sum(1)))
    np.testing.assert_allclose(run(loss), expected, rtol=1e-5)


def test_training_through_nce_loss_moves_only_the_rows_it_touched():
    weights, biases, inputs, labels, sampled, _, _ = sampled_setup()
    embeddings = tf.Variable(TABLE * 0.5)
    ids = tf.constant([0, 3], tf.int32)
    loss = tf.reduce_mean(tf.nn.nce_loss(weights, biases, labels,
                                         tf.nn.embedding_lookup(embeddings, ids),
                                         num_sampled=3, num_classes=6, sampled_values=sampled))
    train = tf.train.GradientDescentOptimizer(0.5).minimize(loss)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        before = sess.run(loss)
        for _ in range(20):
            sess.run(train)
        after, table, w = sess.run([loss, embeddings, weights])
    assert after < before * 0.8
    np.testing.assert_array_equal(table[[1, 2, 4, 5]], (TABLE * 0.5)[[1, 2, 4, 5]])
    assert not np.allclose(table[[0, 3]], (TABLE * 0.5)[[0, 3]])
    np.testing.assert_array_equal(w[3], TABLE[3])


def test_sampled_losses_refuse_what_they_cannot_take():
    weights, biases, inputs, labels, sampled, _, _ = sampled_setup()
    with pytest.raises(NotImplementedError, match="one Variable"):
        tf.nn.nce_loss(tf.constant(TABLE), biases, labels, inputs, 3, 6)
    with pytest.raises(TypeError, match="int64 class ids"):
        tf.nn.nce_loss(weights, biases, np.array([[1.0], [4.0]], np.float32), inputs, 3, 6)


def test_tf1s_word2vec_basic_runs_as_written_and_learns_the_topics():
    script = os.path.join(HERE, "programs", "word2vec_basic.py")
    done = subprocess.run([sys.executable, script, "1500"], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    losses = done.stdout.split("\n")[0].split()
    first, last = float(losses[2]), float(losses[4])
    within, across = (float(x) for x in done.stdout.split("\n")[1].split()[1::2])
    assert last < first / 2
    # Untrained, both are about 0: words of one topic came to share directions.
    assert within > across + 0.2
