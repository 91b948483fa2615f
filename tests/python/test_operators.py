"""Operators on tensors, Python scalars and numpy arrays in either order, TF1's dtype rules,
and indexing, each checked against numpy through a session."""

import operator

import numpy as np
import pytest

import actorflow.compat.v1 as tf

X = np.array([[1.5, -2.0, 3.25], [4.0, 0.5, -6.0]], np.float32)
Y = np.array([[2.0, 4.0, -1.0], [0.5, 8.0, 3.0]], np.float32)


@pytest.fixture(autouse=True)
def fresh_default_graph():
    tf.reset_default_graph()
    yield


def evaluate(t, feed=None):
    with tf.Session() as sess:
        return sess.run(t, feed)


@pytest.mark.parametrize("op", [operator.add, operator.sub, operator.mul, operator.truediv])
def test_arithmetic_matches_numpy_for_tensor_scalar_and_array_operands_in_either_order(op):
    x = tf.constant(X)
    cases = [(op(x, tf.constant(Y)), op(X, Y)),
             (op(x, 2.5), op(X, np.float32(2.5))),
             (op(2.5, x), op(np.float32(2.5), X)),
             (op(x, Y), op(X, Y)),
             (op(Y, x), op(Y, X)),
             (op(x, 3), op(X, np.float32(3)))]
    for tensor, expected in cases:
        assert isinstance(tensor, tf.Tensor), "numpy did not defer to the tensor"
        assert tensor.dtype == tf.float32
        np.testing.assert_allclose(evaluate(tensor), expected, rtol=1e-6)


def test_matmul_operator_unary_minus_and_comparisons():
    x, y = tf.constant(X), tf.constant(Y)
    np.testing.assert_allclose(evaluate(x @ Y.T), X @ Y.T, rtol=1e-6)
    np.testing.assert_allclose(evaluate(X.T @ x), X.T @ X, rtol=1e-6)
    np.testing.assert_array_equal(evaluate(-x), -X)
    for op in (operator.lt, operator.le, operator.gt, operator.ge):
        result = evaluate(op(x, y))
        assert result.dtype == np.bool_
        np.testing.assert_array_equal(result, op(X, Y))
    np.testing.assert_array_equal(evaluate(x > 1.0), X > 1.0)
    np.testing.assert_array_equal(evaluate(tf.equal(x, X)), np.ones_like(X, bool))
    b = tf.constant(X > 0)
    np.testing.assert_array_equal(evaluate(~b & (x < 4.0)), ~(X > 0) & (X < 4.0))


def test_tf1_dtype_rules():
    assert tf.constant(1.0).dtype == tf.float32
    assert tf.constant(1).dtype == tf.int32
    assert tf.constant(True).dtype == tf.bool
    assert tf.constant([1.5, 2.5]).dtype == tf.float32
    assert tf.constant(np.array([1.5, 2.5])).dtype == tf.float64
    assert tf.constant(np.arange(3)).dtype == tf.int64
    assert tf.constant(2**40).dtype == tf.int64
    i = tf.constant([7, -8, 9])
    assert (i * 2).dtype == tf.int32
    np.testing.assert_array_equal(evaluate(i * 2 + 1), [15, -15, 19])
    # TF1's truediv of integers gives float64.
    quotient = i / 2
    assert quotient.dtype == tf.float64
    np.testing.assert_allclose(evaluate(quotient), [3.5, -4.0, 4.5])
    d = tf.constant(np.array([1.0, 2.0]))        # float64
    assert (d * 2.0).dtype == tf.float64
    with pytest.raises(TypeError, match="int32"):
        i * 1.5
    with pytest.raises(TypeError, match="float64 .* float32|float32 .* float64"):
        tf.constant(1.0) + d


def test_floor_division_and_modulo_are_pythons_for_every_sign_and_either_order():
    ints = np.array([-7, -6, -1, 0, 1, 5, 7], np.int32)
    floats = np.array([-7.5, -2.25, 0.0, 2.25, 7.5], np.float32)
    i, f = tf.constant(ints), tf.constant(floats)
    cases = [(i // 2, ints // 2), (i % 2, ints % 2), (i // -3, ints // -3), (i % -3, ints % -3),
             (-7 // tf.constant([2, -2]), np.array([-4, 3])), (7 % tf.constant([-2, 3]), [-1, 1]),
             (f // 2.0, floats // 2.0), (f % -2.0, floats % -2.0), (9.0 % f[3:], 9.0 % floats[3:]),
             (tf.floordiv(i, 3), ints // 3), (tf.math.floormod(f, 0.5), floats % 0.5),
             (tf.div(i, 2), ints // 2), (tf.mod(i, 4), ints % 4)]
    values = evaluate([c[0] for c in cases])
    for (tensor, expected), value in zip(cases, values):
        np.testing.assert_array_equal(value, np.asarray(expected).astype(value.dtype),
                                      err_msg=tensor.name)
    assert (i // 2).op.type == "FloorDiv" and (i // 2).op.name.startswith("floordiv")
    assert (i % 2).op.type == "FloorMod" and (i % 2).op.name.startswith("mod")
    with pytest.raises(tf.errors.InvalidArgumentError, match="integer division by zero"):
        evaluate(i // tf.constant(0))


def test_indexing_and_slicing_match_numpy():
    m_np = np.arange(24, dtype=np.float32).reshape(4, 6)
    m = tf.constant(m_np)
    cases = [(m[1], m_np[1]), (m[-1], m_np[-1]), (m[1:3], m_np[1:3]), (m[:, 2], m_np[:, 2]),
             (m[::2, 1:5:2], m_np[::2, 1:5:2]), (m[2, -2], m_np[2, -2]),
             (m[tf.constant(3)], m_np[3]), (m[..., 1], m_np[..., 1]), (m[1, ...], m_np[1, ...]),
             (m[:, tf.newaxis], m_np[:, None]), (m[None, 1:3], m_np[None, 1:3]),
             (m[..., ::-2, None], m_np[..., ::-2, None]), (m[...], m_np)]
    for tensor, expected in cases:
        value = evaluate(tensor)
        np.testing.assert_array_equal(value, expected)
        assert tensor.shape.as_list() == list(expected.shape)
    with pytest.raises(ValueError, match="out of bounds"):
        m[4]
    with pytest.raises(IndexError, match="single ellipsis"):
        m[..., 1, ...]
    with pytest.raises(ValueError, match="slice step cannot be zero"):
        m[::0]
    with pytest.raises(TypeError, match="slice start must be a Python int"):
        m[tf.constant(1):]
    with pytest.raises(ValueError, match="stride 0"):
        tf.strided_slice(m, [0], [2], [0])


def test_a_subscript_is_one_strided_slice_and_matches_numpy_on_random_subscripts():
    rng = np.random.RandomState(7)
    x_np = np.arange(2 * 3 * 5 * 4, dtype=np.int32).reshape(2, 3, 5, 4)
    x = tf.constant(x_np)

    def random_entry():
        kind = rng.randint(6)
        if kind == 0:
            return int(rng.randint(-2, 2))
        if kind == 1:
            return None
        bound = lambda: None if rng.rand() < 0.3 else int(rng.randint(-7, 7))  # noqa: E731
        step = [None, 1, 2, 3, -1, -2][rng.randint(6)]
        return builtins_slice(bound(), bound(), step)

    builtins_slice = slice
    checked = 0
    while checked < 120:
        key = [random_entry() for _ in range(rng.randint(1, 5))]
        if rng.rand() < 0.4:
            key.insert(rng.randint(len(key) + 1), Ellipsis)
        key = tuple(key)
        try:
            expected = x_np[key]
        except IndexError:
            continue  # an int past its axis, or more indices than axes: numpy refuses too
        sliced = x[key]
        assert sliced.op.type == "StridedSlice", key
        assert sliced.shape.as_list() == list(expected.shape), key
        np.testing.assert_array_equal(evaluate(sliced), expected, err_msg=str(key))
        checked += 1


def test_slicing_needs_no_known_sizes_and_follows_the_run_time_shape():
    p = tf.placeholder(tf.float32, [None, None, 3])
    anything = tf.placeholder(tf.float32)
    value = np.arange(5 * 4 * 3, dtype=np.float32).reshape(5, 4, 3)
    cases = [(p[1:-1], value[1:-1], [None, None, 3]), (p[::-1, 2], value[::-1, 2], [None, 3]),
             (p[..., 1], value[..., 1], [None, None]), (p[-1, :, None], value[-1, :, None],
                                                       [None, 1, 3]),
             (anything[..., 0], value[..., 0], None), (anything[1:3, -1], value[1:3, -1], None)]
    with tf.Session() as sess:
        for tensor, expected, static in cases:
            assert tensor.shape.as_list() == static if static is not None \
                else tensor.shape.ndims is None
            feed = {p: value} if p in [i for i in tensor.op.inputs] else {anything: value}
            np.testing.assert_array_equal(sess.run(tensor, feed), expected)
        with pytest.raises(tf.errors.InvalidArgumentError, match="index 7 is out of bounds"):
            sess.run(p[7], {p: value})


def test_the_gradient_of_a_slice_puts_its_gradient_where_the_slice_came_from():
    x_np = np.arange(4 * 6, dtype=np.float32).reshape(4, 6)
    x = tf.constant(x_np)
    key = (slice(3, 0, -2), slice(1, None, 2))
    weights = np.arange(1, 7, dtype=np.float32).reshape(2, 3)
    loss = tf.reduce_sum(x[key] * weights)
    (grad,) = tf.gradients(loss, [x])
    assert grad.op.type == "StridedSliceGrad"
    expected = np.zeros_like(x_np)
    expected[key] = weights
    np.testing.assert_array_equal(evaluate(grad), expected)
    # Second order: the gradient's own gradient with respect to the incoming one slices back.
    dy = tf.placeholder(tf.float32, [2, 3])
    (scattered,) = tf.gradients(x[key], [x], grad_ys=dy)
    (back,) = tf.gradients(tf.reduce_sum(scattered * x_np), [dy])
    assert back.op.type == "StridedSlice"
    np.testing.assert_array_equal(evaluate(back, {dy: weights}), x_np[key])


def test_variables_take_part_in_operators_through_their_value():
    v = tf.Variable(X)
    with tf.Session() as sess:
        sess.run(v.initializer)
        np.testing.assert_allclose(sess.run(2.0 * v - Y), 2.0 * X - Y, rtol=1e-6)
        np.testing.assert_allclose(sess.run(Y * v), Y * X, rtol=1e-6)
        np.testing.assert_allclose(sess.run(v[1]), X[1])
