"""tf.cond and tf.while_loop (graph/control_flow.hpp, the branches and bodies Python callables),
the sparse ops and IndexedSlices (graph/sparse_ops.hpp), and the ops composed of existing ones."""

import collections

import numpy as np
import pytest

import actorflow.compat.v1 as tf

X = np.array([[1.5, -2.0, 3.25], [4.0, 0.5, -6.0]], np.float32)


@pytest.fixture(autouse=True)
def fresh_default_graph():
    tf.reset_default_graph()
    yield


def evaluate(t, feed=None):
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        return sess.run(t, feed)


# --- cond ---------------------------------------------------------------------------------------


def test_cond_runs_only_the_taken_branch():
    x = tf.placeholder(tf.float32, [], name="x")
    counter = tf.Variable(0.0, name="counter")

    def true_fn():
        # Only when taken does the branch's assign run.
        return tf.assign_add(counter, 1.0) * 0.0 + x * 2.0

    y = tf.cond(x > 0.0, true_fn, lambda: -x)
    with tf.Session() as sess:
        sess.run(counter.initializer)
        assert sess.run(y, {x: 3.0}) == 6.0
        assert sess.run(y, {x: -4.0}) == 4.0
        assert sess.run(y, {x: -1.0}) == 1.0
        assert sess.run(counter) == 1.0


def test_cond_returns_the_branches_structure_and_has_gradients():
    x = tf.placeholder(tf.float32, [], name="x")
    Pair = collections.namedtuple("Pair", ["a", "b"])
    out = tf.cond(x < 1.0, lambda: Pair(x * x, [x + 1.0]), lambda: Pair(x * 3.0, [x]))
    assert isinstance(out, Pair) and isinstance(out.b, list)
    grad, = tf.gradients(out.a, [x])
    with tf.Session() as sess:
        a, b, g = sess.run([out.a, out.b[0], grad], {x: 0.5})
        assert (a, b, g) == (0.25, 1.5, 1.0)
        a, g = sess.run([out.a, grad], {x: 2.0})
        assert (a, g) == (6.0, 3.0)
    # A single value in a list comes back bare unless strict.
    single = tf.cond(x < 1.0, lambda: [x], lambda: [x * 2.0])
    assert isinstance(single, tf.Tensor)
    assert isinstance(tf.cond(x < 1.0, lambda: [x], lambda: [x], strict=True), list)


def test_cond_errors_name_what_is_wrong():
    x = tf.constant(1.0)
    with pytest.raises(TypeError, match="callable"):
        tf.cond(x > 0.0, x, lambda: x)
    with tf.Graph().as_default():
        y = tf.constant(1.0)
        with pytest.raises(ValueError, match="bool scalar"):
            tf.cond(y, lambda: y, lambda: y)
    with tf.Graph().as_default():
        y = tf.constant(1.0)
        with pytest.raises(ValueError, match="structure|values"):
            tf.cond(y > 0.0, lambda: [y, y], lambda: [y])

    class Raised(Exception):
        pass

    def failing():
        raise Raised("from the branch")

    with tf.Graph().as_default():
        y = tf.constant(1.0)
        with pytest.raises(Raised, match="from the branch"):
            tf.cond(y > 0.0, failing, lambda: y)
        # The builder left the branch's context: later ops are outside it and run.
        z = y * 3.0
        with tf.Session() as sess:
            assert sess.run(z) == 3.0


# --- while_loop ------------------------------------------------------------------------------------


def test_while_loop_counts_and_carries_several_variables():
    i, acc = tf.while_loop(lambda i, acc: i < 10, lambda i, acc: (i + 1, acc * 2.0),
                           (0, tf.constant(1.0)))
    assert evaluate([i, acc]) == [10, 1024.0]
    single = tf.while_loop(lambda v: v < 100.0, lambda v: v * 3.0, tf.constant(1.0))
    assert isinstance(single, tf.Tensor)
    assert evaluate(single) == 243.0
    capped = tf.while_loop(lambda v: v > -1, lambda v: v + 1, [tf.constant(0)],
                           maximum_iterations=7)
    assert evaluate(capped) == [7]


def test_while_loop_gradient_and_outside_values():
    x = tf.placeholder(tf.float32, [], name="x")
    # tanh applied 5 times to v * x, x read from outside the loop.
    _, y = tf.while_loop(lambda k, v: k < 5, lambda k, v: (k + 1, tf.tanh(v * x)),
                         (0, tf.constant(0.5)))
    grad, = tf.gradients(y, [x])
    value = 0.5
    for _ in range(5):
        value = np.tanh(value * 0.9)
    eps = 1e-3
    with tf.Session() as sess:
        got, g = sess.run([y, grad], {x: 0.9})
        up = sess.run(y, {x: 0.9 + eps})
        down = sess.run(y, {x: 0.9 - eps})
    np.testing.assert_allclose(got, value, rtol=1e-5)
    np.testing.assert_allclose(g, (up - down) / (2 * eps), rtol=1e-2)


def test_while_loop_shape_invariants_and_errors():
    grow = tf.while_loop(lambda k, m: k < 3, lambda k, m: (k + 1, tf.concat([m, m], 0)),
                         (0, tf.ones([1, 2])),
                         shape_invariants=(tf.TensorShape([]), tf.TensorShape([None, 2])))
    assert evaluate(grow[1]).shape == (8, 2)
    with tf.Graph().as_default():
        with pytest.raises(ValueError, match="shape"):
            tf.while_loop(lambda k, m: k < 3, lambda k, m: (k + 1, tf.concat([m, m], 0)),
                          (0, tf.ones([1, 2])))
    with tf.Graph().as_default():
        with pytest.raises(TypeError, match="bool"):
            tf.while_loop(lambda v: v * 2.0, lambda v: v, [tf.constant(1.0)])
    with tf.Graph().as_default():
        with pytest.raises(ValueError, match="structure of loop_vars"):
            tf.while_loop(lambda a, b: a < 3, lambda a, b: [a + 1], (0, 1))
    with pytest.raises(ValueError, match="No loop variables"):
        tf.while_loop(lambda: True, lambda: [], [])


# --- sparse ops -------------------------------------------------------------------------------------


def test_embedding_lookup_and_its_indexed_slices_gradient():
    table_np = np.arange(20, dtype=np.float32).reshape(5, 4)
    table = tf.Variable(table_np, name="table")
    ids = tf.placeholder(tf.int64, [None], name="ids")
    rows = tf.nn.embedding_lookup(table, ids)
    assert rows.shape.as_list() == [None, 4]
    loss = tf.reduce_sum(rows * 2.0)
    grad, = tf.gradients(loss, [table])
    assert isinstance(grad, tf.IndexedSlices)
    assert grad.values.dtype == tf.float32 and grad.indices.dtype in (tf.int32, tf.int64)
    step = tf.train.GradientDescentOptimizer(0.5).minimize(loss)
    with tf.Session() as sess:
        sess.run(table.initializer)
        got = sess.run(rows, {ids: [3, 1, 3]})
        np.testing.assert_array_equal(got, table_np[[3, 1, 3]])
        values, indices, dense_shape = sess.run([grad.values, grad.indices, grad.dense_shape],
                                                {ids: [3, 1, 3]})
        assert list(dense_shape) == [5, 4]
        dense = np.zeros([5, 4], np.float32)
        np.add.at(dense, indices, values)
        expected = np.zeros([5, 4], np.float32)
        expected[3] = 4.0
        expected[1] = 2.0
        np.testing.assert_array_equal(dense, expected)
        # Where a dense tensor is expected, it is the dense gradient.
        np.testing.assert_array_equal(sess.run(grad, {ids: [3, 1, 3]}), expected)
        np.testing.assert_array_equal(sess.run(grad * 1.0, {ids: [3, 1, 3]}), expected)
        sess.run(step, {ids: [3, 1, 3]})
        updated = sess.run(table)
    np.testing.assert_array_equal(updated, table_np - 0.5 * expected)
    with pytest.raises(NotImplementedError, match="a list of Variables"):
        tf.nn.embedding_lookup([table.value(), table.value()], ids)
    with pytest.raises(TypeError, match="int32 or int64"):
        tf.nn.embedding_lookup(table, tf.constant([1.0]))


def test_indexed_slices_made_by_hand_is_its_dense_tensor():
    slices = tf.IndexedSlices(tf.constant([[1.0, 2.0], [3.0, 4.0]]), tf.constant([2, 0]),
                              dense_shape=[3, 2])
    np.testing.assert_array_equal(evaluate(tf.convert_to_tensor(slices)),
                                  [[3.0, 4.0], [0.0, 0.0], [1.0, 2.0]])
    assert slices.dtype == tf.float32


def test_unique_unsorted_segment_sum_and_scatter():
    y, idx = tf.unique(tf.constant([4, 7, 4, 1, 7]))
    v = tf.Variable(np.zeros([4, 2], np.float32), name="v")
    summed = tf.unsorted_segment_sum(tf.constant([[1.0, 1.0], [2.0, 2.0], [3.0, 3.0]]),
                                     tf.constant([2, 0, 2]), 3)
    with tf.Session() as sess:
        sess.run(v.initializer)
        got_y, got_idx = sess.run([y, idx])
        np.testing.assert_array_equal(got_y, [4, 7, 1])
        np.testing.assert_array_equal(got_idx, [0, 1, 0, 2, 1])
        np.testing.assert_array_equal(sess.run(summed), [[2, 2], [0, 0], [4, 4]])
        sess.run(tf.scatter_add(v, [1, 3, 1], [[1.0, 1.0], [2.0, 2.0], [3.0, 3.0]]))
        sess.run(tf.scatter_sub(v, [3], [[0.5, 0.5]]))
        after = sess.run(tf.scatter_update(v, [0], [[9.0, 8.0]]))
        np.testing.assert_array_equal(after, [[9, 8], [4, 4], [0, 0], [1.5, 1.5]])
        with pytest.raises(tf.errors.OpError):
            sess.run(tf.unsorted_segment_sum(tf.constant([1.0]), tf.constant([5]), 3))
    with pytest.raises(TypeError, match="Variable"):
        tf.scatter_add(tf.constant([1.0]), [0], [1.0])


# --- math ops and composed ops -------------------------------------------------------------------------


def test_elementwise_math_ops_match_numpy():
    x = tf.constant(X)
    y = tf.constant(np.full_like(X, 0.75))
    positive = tf.constant(np.abs(X) + 0.5)
    cases = [
        (tf.maximum(x, y), np.maximum(X, 0.75)), (tf.minimum(x, y), np.minimum(X, 0.75)),
        (tf.abs(x), np.abs(X)), (abs(x), np.abs(X)),
        (tf.squared_difference(x, y), (X - 0.75) ** 2),
        (tf.reciprocal(positive), 1.0 / (np.abs(X) + 0.5)),
        (tf.rsqrt(positive), 1.0 / np.sqrt(np.abs(X) + 0.5)),
        (x ** 3, X ** 3), (tf.pow(x, 0), np.ones_like(X)), (positive ** 0.5, np.sqrt(np.abs(X) + 0.5)),
        (positive ** 1.7, (np.abs(X) + 0.5) ** 1.7), (2.0 ** x, 2.0 ** X),
        (tf.reduce_min(x, axis=1), X.min(axis=1)), (tf.reduce_min(x), X.min()),
        (tf.reduce_prod(x, axis=0), X.prod(axis=0)), (tf.reduce_prod(x, 1, keepdims=True),
                                                      X.prod(axis=1, keepdims=True)),
        (tf.sign(x), np.sign(X)), (tf.floor(x * 3.0), np.floor(X * 3)),
        (tf.argmin(x, 1), X.argmin(1)), (tf.math.argmin(x, axis=0), X.argmin(0)),
        (tf.cumsum(x, axis=1), X.cumsum(1)), (tf.math.cumsum(x, 0, reverse=True), X[::-1].cumsum(0)[::-1]),
        (tf.cumsum(x, 1, exclusive=True), X.cumsum(1) - X),
        (tf.arg_min(x, 1, output_type=tf.int32), X.argmin(1).astype(np.int32)),
        (tf.ceil(x * 3.0), np.ceil(X * 3)), (tf.round(x * 4.0), np.round(X * 4)),
        (tf.where(x > y, x, -y), np.where(X > 0.75, X, -0.75)),
        (tf.where(tf.constant([True, False] * (len(X) // 2)), x, y),
         np.where(np.array([True, False] * (len(X) // 2))[:, None], X, 0.75)),
        (tf.where_v2(x > 0.0, x, 0.0), np.where(X > 0, X, 0.0)),
        (tf.clip_by_value(x, -1.0, 2.0), np.clip(X, -1.0, 2.0)),
        (tf.nn.relu6(x * 2.0), np.clip(X * 2.0, 0.0, 6.0)),
        (tf.nn.leaky_relu(x, 0.1), np.where(X > 0, X, 0.1 * X)),
        (tf.nn.elu(x), np.where(X > 0, X, np.exp(np.minimum(X, 0)) - 1)),
        (tf.nn.softplus(x), np.log1p(np.exp(X))), (tf.nn.l2_loss(x), (X ** 2).sum() / 2),
        (tf.expand_dims(x, 1), X[:, None, :]), (tf.expand_dims(x, -1), X[:, :, None]),
        (tf.squeeze(tf.constant(X[:, None, :])), X), (tf.stack([x, y], axis=1),
                                                       np.stack([X, np.full_like(X, 0.75)], 1)),
    ]
    values = evaluate([c[0] for c in cases])
    for (tensor, expected), value in zip(cases, values):
        np.testing.assert_allclose(value, expected, rtol=1e-5, atol=1e-6, err_msg=tensor.name)
        assert tensor.shape.as_list() == list(np.shape(expected)), tensor.name
    a = tf.constant([True, True, False, False])
    b = tf.constant([True, False, True, False])
    got = evaluate([a | b, a ^ b, tf.not_equal(tf.constant([1, 2]), tf.constant([1, 3]))])
    np.testing.assert_array_equal(got[0], [True, True, True, False])
    np.testing.assert_array_equal(got[1], [False, True, True, False])
    np.testing.assert_array_equal(got[2], [False, True])
    # Native Maximum and Minimum: exact, where relu-built ones rounded (0.10000038).
    assert evaluate(tf.minimum(10.0, 0.1)) == np.float32(0.1)
    assert evaluate(tf.maximum(-10.0, 0.1)) == np.float32(0.1)


def test_math_and_composed_ops_have_gradients_and_shape_errors():
    x = tf.constant(np.array([-2.0, 0.5, 3.0], np.float32))
    g = tf.gradients(tf.reduce_sum(tf.maximum(x, 1.0) + tf.abs(x) + x ** 2), [x])[0]
    np.testing.assert_allclose(evaluate(g), [0 - 1 - 4, 0 + 1 + 1, 1 + 1 + 6])
    # tf.where sends each branch its own elements' gradient; Prod's is exact at a zero.
    t, e = tf.constant([1.0, 2.0, 3.0]), tf.constant([4.0, 5.0, 6.0])
    pick = tf.constant([True, False, True])
    gt, ge = tf.gradients(tf.reduce_sum(tf.where(pick, t, e) * tf.constant([1.0, 10.0, 100.0])),
                          [t, e])
    np.testing.assert_array_equal(evaluate([gt, ge]), [[1, 0, 100], [0, 10, 0]])
    z = tf.constant([[0.0, 2.0, 3.0], [1.0, 2.0, 3.0]])
    np.testing.assert_array_equal(evaluate(tf.gradients(tf.reduce_prod(z), [z])[0]),
                                  [[36, 0, 0], [0, 0, 0]])
    # The gradient of pow in its exponent is 0 where the base is not positive, as in TF.
    base, power = tf.constant([-2.0, 0.0, 2.0]), tf.constant(2.0)
    dbase, dpower = tf.gradients(tf.reduce_sum(tf.pow(base, power)), [base, power])
    got_base, got_power = evaluate([dbase, dpower])
    np.testing.assert_allclose(got_base, [-4, 0, 4])
    np.testing.assert_allclose(got_power, 4 * np.log(2), rtol=1e-6)
    assert evaluate(tf.pow(base, power)).tolist() == [4, 0, 4]
    # Where: the coordinates of the true elements; boolean_mask gathers at them, with gradients.
    mask_np = np.array([[True, False, True], [False, False, True]])
    m = tf.constant(mask_np)
    data = tf.constant(X)
    masked = tf.boolean_mask(data, m)
    rows = tf.boolean_mask(data, tf.constant([False, True]))
    cols = tf.boolean_mask(data, tf.constant([True, False, True]), axis=1)
    coords, coords_v2, got_masked, got_rows, got_cols, grad = evaluate(
        [tf.where(m), tf.where_v2(m), masked, rows, cols,
         tf.gradients(tf.reduce_sum(masked * 2.0), [data])[0]])
    np.testing.assert_array_equal(coords, np.argwhere(mask_np))
    np.testing.assert_array_equal(coords_v2, np.argwhere(mask_np))
    assert coords.dtype == np.int64
    np.testing.assert_array_equal(got_masked, X[mask_np])
    np.testing.assert_array_equal(got_rows, X[[False, True]])
    np.testing.assert_array_equal(got_cols, X[:, [True, False, True]])
    np.testing.assert_array_equal(grad, 2.0 * mask_np)
    assert tf.where(m).shape.as_list() == [None, 2]
    with pytest.raises(TypeError, match="bool"):
        tf.where(tf.constant([1, 2]))
    with pytest.raises(ValueError, match="does not fit"):
        tf.boolean_mask(data, tf.constant([True, False, True]))
    unknown = tf.placeholder(tf.float32, [None, None])
    with pytest.raises(ValueError, match="known but for one dimension"):
        tf.expand_dims(unknown, 0)
    with pytest.raises(ValueError, match="not 1"):
        tf.squeeze(tf.constant(X), axis=0)


def test_more_composed_ops_match_numpy():
    logits_np = np.array([[0.5, -1.0, 2.0], [3.0, 0.0, -2.5]], np.float32)
    labels_np = np.array([[1.0, 0.0, 1.0], [0.0, 1.0, 0.0]], np.float32)
    logits = tf.constant(logits_np)
    mean, variance = tf.nn.moments(logits, axes=[0])
    flags = tf.constant([[True, False], [False, False]])
    cases = [
        (tf.one_hot([2, 0], 3), np.eye(3, dtype=np.float32)[[2, 0]]),
        (tf.one_hot(tf.constant([1]), 2, on_value=5.0, off_value=-1.0), [[-1.0, 5.0]]),
        (tf.range(5), np.arange(5)), (tf.range(1.0, 2.0, 0.25), np.arange(1.0, 2.0, 0.25)),
        (tf.reduce_any(flags, axis=1), [True, False]), (tf.reduce_all(tf.logical_not(flags)),
                                                        False),
        (tf.nn.sigmoid_cross_entropy_with_logits(labels=labels_np, logits=logits),
         np.maximum(logits_np, 0) - logits_np * labels_np + np.log1p(np.exp(-np.abs(logits_np)))),
        (tf.nn.log_softmax(logits), logits_np - logits_np.max(1, keepdims=True) -
         np.log(np.exp(logits_np - logits_np.max(1, keepdims=True)).sum(1, keepdims=True))),
        (mean, logits_np.mean(0)), (variance, logits_np.var(0)),
        (tf.nn.l2_normalize(logits, axis=1),
         logits_np / np.sqrt((logits_np ** 2).sum(1, keepdims=True))),
    ]
    values = evaluate([c[0] for c in cases])
    for (tensor, expected), value in zip(cases, values):
        np.testing.assert_allclose(value, expected, rtol=1e-5, atol=1e-6, err_msg=tensor.name)
    # in_top_k: ties at the boundary are in, a non-finite target prediction and a bad class out.
    scores = np.array([[0.1, 0.5, 0.5, 0.2], [3.0, 1.0, 2.0, 0.0], [np.inf, 1.0, 0.0, 0.0],
                       [0.0, 1.0, 2.0, 3.0]], np.float32)
    targets = np.array([2, 2, 0, 7])
    got = evaluate([tf.nn.in_top_k(scores, targets, k) for k in (1, 2, 3)])
    np.testing.assert_array_equal(got[0], [True, False, False, False])
    np.testing.assert_array_equal(got[1], [True, True, False, False])
    np.testing.assert_array_equal(got[2], [True, True, False, False])
    with pytest.raises(ValueError, match="classes known"):
        tf.nn.in_top_k(tf.placeholder(tf.float32, [None, None]), [0], 1)
    with pytest.raises(ValueError, match="Cumsum axis 0 is out of range"):
        tf.cumsum(tf.constant(1.0))  # a scalar has no axis, as in TF
    with pytest.raises(TypeError, match="Range"):
        tf.range(tf.constant(3))
    with pytest.raises(ValueError, match="depth"):
        tf.one_hot([1], 0)


def test_sin_cos_log1p_expm1_and_the_finiteness_tests_match_numpy():
    small = np.array([1e-7, -3e-6, 0.25, -0.75, 2.0], np.float64)
    odd = np.array([1.0, np.nan, np.inf, -np.inf, 0.0], np.float32)
    x, s, o = tf.constant(X), tf.constant(small), tf.constant(odd)
    cases = [(tf.sin(x), np.sin(X)), (tf.cos(x), np.cos(X)), (tf.math.sin(s), np.sin(small)),
             # Exact near 0, where log(1 + x) and exp(x) - 1 lose every digit.
             (tf.log1p(s), np.log1p(small)), (tf.expm1(s), np.expm1(small)),
             (tf.is_nan(o), np.isnan(odd)), (tf.is_inf(o), np.isinf(odd)),
             (tf.math.is_finite(o), np.isfinite(odd))]
    values = evaluate([c[0] for c in cases])
    for (tensor, expected), value in zip(cases, values):
        assert value.dtype == np.asarray(expected).dtype, tensor.name
        np.testing.assert_allclose(value, expected, rtol=1e-6, atol=0, err_msg=tensor.name)
    grads = tf.gradients(tf.reduce_sum(tf.sin(s) + tf.cos(s) + tf.log1p(s) + tf.expm1(s)), [s])[0]
    np.testing.assert_allclose(evaluate(grads),
                               np.cos(small) - np.sin(small) + 1 / (1 + small) + np.exp(small),
                               rtol=1e-12)
    with pytest.raises(ValueError, match="IsNan"):
        tf.is_nan(tf.constant([1, 2]))


def test_stop_gradient_and_reduce_logsumexp():
    x = tf.constant([1.0, 2.0, 3.0])
    y = tf.reduce_sum(x * tf.stop_gradient(x * 2.0))
    np.testing.assert_array_equal(evaluate(tf.gradients(y, [x])[0]), [2, 4, 6])
    assert tf.gradients(tf.reduce_sum(tf.stop_gradient(x)), [x]) == [None]
    big = np.array([[1000.0, 1001.0, 999.0], [-2.0, 0.5, 1.0]], np.float32)
    b = tf.constant(big)
    expected = np.log(np.exp(big - big.max(1, keepdims=True)).sum(1)) + big.max(1)
    got, kept, whole, grad = evaluate([tf.reduce_logsumexp(b, axis=1),
                                       tf.reduce_logsumexp(b, 1, keepdims=True),
                                       tf.math.reduce_logsumexp(tf.constant([-np.inf, -np.inf])),
                                       tf.gradients(tf.reduce_logsumexp(b, axis=1), [b])[0]])
    np.testing.assert_allclose(got, expected, rtol=1e-6)
    assert kept.shape == (2, 1)
    assert whole == -np.inf  # an all -inf row: the shift is 0, not NaN
    softmax = np.exp(big - big.max(1, keepdims=True))
    np.testing.assert_allclose(grad, softmax / softmax.sum(1, keepdims=True), rtol=1e-5, atol=1e-7)


def test_clip_by_global_norm_and_clip_by_norm_as_tf_defines_them():
    a_np = np.array([3.0, 4.0], np.float32)
    b_np = np.array([[12.0]], np.float32)
    a, b = tf.constant(a_np), tf.constant(b_np)
    (ca, none, cb), norm = tf.clip_by_global_norm([a, None, b], 6.5)
    assert none is None
    got_a, got_b, got_norm, unclipped = evaluate([ca, cb, norm, tf.clip_by_global_norm([a], 10.0)[0][0]])
    assert got_norm == pytest.approx(13.0)
    np.testing.assert_allclose(got_a, a_np * 0.5, rtol=1e-6)
    np.testing.assert_allclose(got_b, b_np * 0.5, rtol=1e-6)
    np.testing.assert_array_equal(unclipped, a_np)  # a norm under clip_norm leaves it alone
    (nan_a,), inf_norm = tf.clip_by_global_norm([tf.constant([np.inf, 1.0])], 1.0)
    got_nan, got_inf = evaluate([nan_a, inf_norm])
    assert np.isnan(got_nan).all() and np.isinf(got_inf)
    # clip_by_norm per row; a zero row stays zero (no 0/0).
    rows_np = np.array([[3.0, 4.0], [0.0, 0.0], [0.3, 0.4]], np.float32)
    got_rows = evaluate(tf.clip_by_norm(tf.constant(rows_np), 1.0, axes=[1]))
    np.testing.assert_allclose(got_rows, [[0.6, 0.8], [0.0, 0.0], [0.3, 0.4]], rtol=1e-6)
    # An embedding's sparse gradient stays an IndexedSlices, its rows scaled.
    table = tf.Variable(np.ones((4, 2), np.float32))
    grad = tf.gradients(tf.reduce_sum(tf.nn.embedding_lookup(table, [1, 3]) * 10.0), [table])[0]
    assert isinstance(grad, tf.IndexedSlices)
    (clipped,), gnorm = tf.clip_by_global_norm([grad], 1.0)
    assert isinstance(clipped, tf.IndexedSlices)
    dense, values, gn = evaluate([clipped, clipped.values, gnorm])
    assert gn == pytest.approx(20.0)
    np.testing.assert_allclose(values, np.full((2, 2), 0.5), rtol=1e-6)
    np.testing.assert_allclose(dense, [[0, 0], [0.5, 0.5], [0, 0], [0.5, 0.5]], rtol=1e-6)
    with pytest.raises(TypeError, match="sequence"):
        tf.clip_by_global_norm(a, 1.0)
