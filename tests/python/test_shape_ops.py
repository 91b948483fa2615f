"""tf.transpose, tf.shape, tf.size and tf.rank (graph/shape_ops.hpp) against numpy, their
gradients against central finite differences, and the ops composed on top of them."""

import numpy as np
import pytest

import actorflow.compat.v1 as tf

RNG = np.random.RandomState(11)
X = RNG.randn(2, 3, 4).astype(np.float32)


@pytest.fixture(autouse=True)
def fresh_default_graph():
    tf.reset_default_graph()
    yield


def evaluate(fetches, feed=None):
    with tf.Session() as sess:
        return sess.run(fetches, feed)


def finite_difference(f, x, step=1e-6):
    grad = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        up, down = x.copy(), x.copy()
        up[i] += step
        down[i] -= step
        grad[i] = (f(up) - f(down)) / (2 * step)
    return grad


@pytest.mark.parametrize("perm", [None, [0, 1, 2], [2, 0, 1], [1, 2, 0], [0, 2, 1], (2, 1, 0),
                                  np.array([1, 0, 2])])
def test_transpose_matches_numpy_for_every_permutation(perm):
    x = tf.constant(X)
    t = tf.transpose(x, perm)
    want = np.transpose(X, None if perm is None else list(perm))
    assert t.op.type == "Transpose" and t.op.name == "transpose"
    assert t.shape.as_list() == list(want.shape)
    got = evaluate(t)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, want)


def test_transpose_of_other_dtypes_unknown_shapes_and_a_named_op():
    ints = np.arange(6, dtype=np.int64).reshape(2, 3)
    flags = np.array([[True, False, True]])
    p = tf.placeholder(tf.float64, [None, 3])
    u = tf.placeholder(tf.int32)
    tp = tf.transpose(p, name="flip")
    assert tp.op.name == "flip" and tp.shape.as_list() == [3, None]
    tu = tf.transpose(u)
    assert tu.shape.ndims is None
    batch = RNG.randn(5, 3)
    cube = np.arange(24, dtype=np.int32).reshape(2, 3, 4)
    got = evaluate([tf.transpose(ints), tf.transpose(flags), tp, tu],
                   {p: batch, u: cube})
    np.testing.assert_array_equal(got[0], ints.T)
    assert got[0].dtype == np.int64
    np.testing.assert_array_equal(got[1], flags.T)
    np.testing.assert_array_equal(got[2], batch.T)
    np.testing.assert_array_equal(got[3], np.transpose(cube))


def test_a_bad_perm_is_an_error_naming_the_node():
    x = tf.constant(X)
    with pytest.raises(ValueError, match="'bad'.*names axis 1 twice"):
        tf.transpose(x, [1, 1, 0], name="bad")
    tf.reset_default_graph()
    with pytest.raises(ValueError, match="3 entries for an input of rank 2|2 is out of range"):
        tf.transpose(tf.constant(np.eye(2)), [0, 2, 1])
    tf.reset_default_graph()
    with pytest.raises(TypeError, match="perm"):
        tf.transpose(tf.constant(X), tf.constant([0, 1, 2]))
    tf.reset_default_graph()
    # The perm of an input of unknown rank is checked when the step runs.
    u = tf.placeholder(tf.float32)
    t = tf.transpose(u, [1, 0], name="late")
    with pytest.raises(tf.errors.InvalidArgumentError, match="late.*rank 3"):
        evaluate(t, {u: X})


@pytest.mark.parametrize("perm", [None, [2, 0, 1], [0, 2, 1]])
def test_transpose_gradients_match_finite_differences(perm):
    x0 = RNG.randn(2, 3, 4)
    x = tf.placeholder(tf.float64, [2, 3, 4])
    weights = RNG.randn(*np.transpose(x0, perm).shape)
    loss = tf.reduce_sum(tf.square(tf.transpose(x, perm)) * weights)
    (grad,) = tf.gradients(loss, [x])
    assert grad.shape.as_list() == [2, 3, 4]
    with tf.Session() as sess:
        analytic = sess.run(grad, {x: x0})
        numeric = finite_difference(lambda v: sess.run(loss, {x: v}), x0)
    np.testing.assert_allclose(analytic, numeric, rtol=1e-5, atol=1e-7)


def test_shape_size_and_rank_read_the_fed_shape():
    x = tf.placeholder(tf.float32, [None, 4], name="x")
    s, n, r = tf.shape(x), tf.size(x), tf.rank(x)
    assert (s.op.type, n.op.type, r.op.type) == ("Shape", "Size", "Rank")
    assert (s.op.name, n.op.name, r.op.name) == ("Shape", "Size", "Rank")
    assert s.dtype == tf.int32 and n.dtype == tf.int32 and r.dtype == tf.int32
    assert s.shape.as_list() == [2] and n.shape.as_list() == [] and r.shape.as_list() == []
    wide = tf.shape(x, out_type=tf.int64)
    assert wide.dtype == tf.int64 and tf.size(x, out_type="int64").dtype == tf.int64
    with tf.Session() as sess:
        for batch in (1, 7):
            got = sess.run([s, n, r, wide, s[0]], {x: np.zeros((batch, 4), np.float32)})
            np.testing.assert_array_equal(got[0], [batch, 4])
            assert got[0].dtype == np.int32
            assert got[1] == 4 * batch and got[2] == 2
            assert got[3].dtype == np.int64
            np.testing.assert_array_equal(got[3], [batch, 4])
            assert got[4] == batch
    with pytest.raises(TypeError, match="out_type must be int32 or int64"):
        tf.shape(x, out_type=tf.float32)


def test_shape_of_any_dtype_and_of_a_scalar():
    values = [tf.constant(True), tf.constant([[1, 2]], dtype=tf.int64), tf.constant(np.zeros((0, 3)))]
    got = evaluate([[tf.shape(v), tf.size(v), tf.rank(v)] for v in values])
    np.testing.assert_array_equal(got[0][0], np.zeros(0, np.int32))
    assert list(got[0][1:]) == [1, 0]
    np.testing.assert_array_equal(got[1][0], [1, 2])
    assert list(got[1][1:]) == [2, 2]
    np.testing.assert_array_equal(got[2][0], [0, 3])
    assert list(got[2][1:]) == [0, 2]


def test_shape_stops_gradients():
    x = tf.placeholder(tf.float32, [None, 3])
    loss = tf.reduce_sum(x) + tf.cast(tf.size(x), tf.float32)
    (grad,) = tf.gradients(loss, [x])
    got = evaluate(grad, {x: np.ones((2, 3), np.float32)})
    np.testing.assert_array_equal(got, np.ones((2, 3), np.float32))
    assert tf.gradients(tf.shape(x), [x]) == [None]


# --- StridedSlices (split, slice, unstack) and Gathers, ConcatV2 and Fill (tile, pad) ---------


def test_unstack_and_split_match_numpy():
    x = tf.constant(X)
    pieces = tf.unstack(x, axis=1)
    assert len(pieces) == 3 and pieces[0].shape.as_list() == [2, 4]
    equal = tf.split(x, 2, axis=2)
    sized = tf.split(x, [1, -1, 1], axis=-1)
    got = evaluate([pieces, equal, sized])
    for value, want in zip(got[0], [X[:, i] for i in range(3)]):
        np.testing.assert_array_equal(value, want)
    for value, want in zip(got[1], np.split(X, 2, axis=2)):
        np.testing.assert_array_equal(value, want)
    for value, want in zip(got[2], [X[..., :1], X[..., 1:3], X[..., 3:]]):
        np.testing.assert_array_equal(value, want)
    with pytest.raises(ValueError, match="does not divide into 3 pieces"):
        tf.split(x, 3, axis=2)
    with pytest.raises(ValueError, match="do not add up"):
        tf.split(x, [1, 1], axis=2)
    with pytest.raises(ValueError, match="Cannot infer num"):
        tf.unstack(tf.placeholder(tf.float32, [None, 2]))


def test_slice_split_and_unstack_are_strided_slices_that_take_unknown_sizes():
    p = tf.placeholder(tf.float32, [None, 3])
    value = np.arange(12, dtype=np.float32).reshape(4, 3)
    rest = tf.slice(p, [1, 0], [-1, 2])
    first, others = tf.split(p, [1, 2], axis=1)
    rows = tf.unstack(tf.placeholder(tf.float32, [2, None]))
    assert rest.op.type == first.op.type == rows[0].op.type == "StridedSlice"
    assert rest.shape.as_list() == [None, 2] and others.shape.as_list() == [None, 2]
    assert rows[1].shape.as_list() == [None]
    with tf.Session() as sess:
        got_rest, got_first, got_others = sess.run([rest, first, others], {p: value})
    np.testing.assert_array_equal(got_rest, value[1:, :2])
    np.testing.assert_array_equal(got_first, value[:, :1])
    np.testing.assert_array_equal(got_others, value[:, 1:])


def test_slice_tile_and_pad_match_numpy():
    x = tf.constant(X)
    m = np.arange(6, dtype=np.int32).reshape(2, 3)
    cases = [(tf.slice(x, [0, 1, 1], [2, 2, -1]), X[:, 1:3, 1:]),
             (tf.slice(x, [1, 0, 0], [-1, -1, -1]), X[1:]),
             (tf.tile(tf.constant(m), [2, 3]), np.tile(m, [2, 3])),
             (tf.tile(x, [1, 1, 2]), np.tile(X, [1, 1, 2])),
             (tf.pad(tf.constant(m), [[1, 0], [2, 1]]), np.pad(m, [[1, 0], [2, 1]])),
             (tf.pad(x, [[0, 0], [1, 1], [0, 2]], constant_values=-1.0),
              np.pad(X, [[0, 0], [1, 1], [0, 2]], constant_values=-1)),
             (tf.pad(tf.constant(m), [[1, 1], [2, 2]], mode="REFLECT"),
              np.pad(m, [[1, 1], [2, 2]], mode="reflect")),
             (tf.pad(tf.constant(m), [[2, 1], [3, 0]], mode="SYMMETRIC"),
              np.pad(m, [[2, 1], [3, 0]], mode="symmetric"))]
    got = evaluate([t for t, _ in cases])
    for (tensor, want), value in zip(cases, got):
        assert tensor.shape.as_list() == list(want.shape)
        assert value.dtype == want.dtype
        np.testing.assert_array_equal(value, want)
    with pytest.raises(ValueError, match="out of range"):
        tf.slice(x, [0, 2, 0], [1, 2, 1])
    with pytest.raises(ValueError, match="too large"):
        tf.pad(tf.constant(m), [[2, 0], [0, 0]], mode="REFLECT")
    with pytest.raises(ValueError, match="needs dimension 0"):
        tf.tile(tf.placeholder(tf.float32, [None, 2]), [2, 1])


def test_gradients_through_split_slice_tile_and_pad_match_finite_differences():
    x0 = RNG.randn(3, 4)
    x = tf.placeholder(tf.float64, [3, 4])
    first, second = tf.split(x, [1, 3], axis=1)
    parts = [tf.reduce_sum(tf.square(first)) * 2.0, tf.reduce_sum(tf.exp(second)),
             tf.reduce_sum(tf.slice(x, [1, 1], [2, 2]) ** 3),
             tf.reduce_sum(tf.tile(x, [2, 1]) * np.arange(24.0).reshape(6, 4)),
             tf.reduce_sum(tf.square(tf.pad(x, [[1, 1], [1, 2]], mode="REFLECT"))),
             tf.reduce_sum(tf.tanh(tf.unstack(x)[2]))]
    loss = tf.add_n(parts)
    (grad,) = tf.gradients(loss, [x])
    with tf.Session() as sess:
        analytic = sess.run(grad, {x: x0})
        numeric = finite_difference(lambda v: sess.run(loss, {x: v}), x0)
    np.testing.assert_allclose(analytic, numeric, rtol=1e-5, atol=1e-7)


def test_dropout_keeps_about_keep_prob_of_the_elements_scaled_and_a_fed_one_keeps_all():
    x = tf.ones([4000])
    kept = tf.nn.dropout(x, keep_prob=0.25, seed=5)
    keep = tf.placeholder(tf.float32, [])
    fed = tf.nn.dropout(x, keep)
    by_rate = tf.nn.dropout(x, rate=0.5, seed=6)
    with tf.Session() as sess:
        values, all_kept, halved = sess.run([kept, fed, by_rate], {keep: 1.0})
    assert set(np.unique(values)) <= {0.0, 4.0}
    assert abs((values > 0).mean() - 0.25) < 0.03
    np.testing.assert_array_equal(all_kept, np.ones(4000, np.float32))
    assert abs((halved > 0).mean() - 0.5) < 0.04
    assert tf.nn.dropout(x, 1.0) is x
    with pytest.raises(ValueError, match="fully known shape"):
        tf.nn.dropout(tf.placeholder(tf.float32, [None, 3]), 0.5)
    with pytest.raises(ValueError, match="range"):
        tf.nn.dropout(x, 1.5)


def test_indexing_along_later_axes_is_differentiable():
    x0 = RNG.randn(3, 4, 2)
    x = tf.placeholder(tf.float64, [3, 4, 2])
    picked = x[:, 1]
    window = x[1:, 1:3, :]
    assert picked.shape.as_list() == [3, 2] and window.shape.as_list() == [2, 2, 2]
    loss = tf.reduce_sum(tf.square(picked)) + tf.reduce_sum(tf.exp(window) * 0.5) + \
        tf.reduce_sum(x[:, :, 1] * x[2, :, 0])
    (grad,) = tf.gradients(loss, [x])
    with tf.Session() as sess:
        np.testing.assert_array_equal(sess.run(window, {x: x0}), x0[1:, 1:3, :])
        np.testing.assert_array_equal(sess.run(picked, {x: x0}), x0[:, 1])
        analytic = sess.run(grad, {x: x0})
        numeric = finite_difference(lambda v: sess.run(loss, {x: v}), x0)
    np.testing.assert_allclose(analytic, numeric, rtol=1e-5, atol=1e-7)
