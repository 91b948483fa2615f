"""Gradients against central finite differences, and the optimizers' updates against their
formulas."""

import numpy as np
import pytest

import actorflow.compat.v1 as tf

RNG = np.random.RandomState(3)


@pytest.fixture(autouse=True)
def fresh_default_graph():
    tf.reset_default_graph()
    yield


def finite_difference(f, x, step=1e-6):
    """d f / d x of a scalar function of a float64 array, by central differences."""
    grad = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        up, down = x.copy(), x.copy()
        up[i] += step
        down[i] -= step
        grad[i] = (f(up) - f(down)) / (2 * step)
    return grad


LOSSES = {
    "square": lambda x: tf.reduce_sum(tf.square(x) * 3.0),
    "matmul": lambda x: tf.reduce_mean(tf.matmul(x, np.arange(12.0).reshape(4, 3))),
    "sigmoid_tanh": lambda x: tf.reduce_sum(tf.sigmoid(x) * tf.tanh(x)),
    "softmax_xent": lambda x: tf.reduce_mean(tf.nn.softmax_cross_entropy_with_logits(
        labels=np.eye(3, 4), logits=x)),
    "relu_div": lambda x: tf.reduce_max(tf.nn.relu(x) / (tf.exp(x) + 1.0)),
}


@pytest.mark.parametrize("name", sorted(LOSSES))
def test_gradients_match_finite_differences(name):
    x0 = RNG.randn(3, 4)        # float64, so the differences are exact enough
    x = tf.placeholder(tf.float64, [3, 4])
    loss = LOSSES[name](x)
    (grad,) = tf.gradients(loss, [x])
    assert grad.shape.as_list() == [3, 4]
    with tf.Session() as sess:
        analytic = sess.run(grad, {x: x0})
        numeric = finite_difference(lambda v: sess.run(loss, {x: v}), x0)
    np.testing.assert_allclose(analytic, numeric, rtol=1e-5, atol=1e-7)


def test_gradients_of_variables_and_none_where_the_loss_does_not_depend():
    w = tf.Variable(np.array([1.0, -2.0], np.float32))
    unused = tf.Variable(0.0)
    loss = tf.reduce_sum(w * w)
    grad_w, grad_unused = tf.gradients(loss, [w, unused])
    assert grad_unused is None
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        np.testing.assert_allclose(sess.run(grad_w), [2.0, -4.0])


def quadratic():
    w = tf.Variable(np.array([1.0, -3.0], np.float32), name="w")
    loss = tf.reduce_sum(tf.square(w - np.array([0.5, 0.5], np.float32)))
    return w, loss


def run_steps(train_op, w, steps):
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        for _ in range(steps):
            sess.run(train_op)
        return sess.run(w)


def test_gradient_descent_takes_the_steps_its_formula_gives():
    w, loss = quadratic()
    step = tf.train.GradientDescentOptimizer(0.1).minimize(loss)
    assert isinstance(step, tf.Operation)
    expected = np.array([1.0, -3.0])
    for _ in range(3):
        expected = expected - 0.1 * 2 * (expected - 0.5)
    np.testing.assert_allclose(run_steps(step, w, 3), expected, rtol=1e-6)


def test_momentum_and_adam_take_the_steps_their_formulas_give():
    w, loss = quadratic()
    momentum = tf.train.MomentumOptimizer(0.1, 0.9).minimize(loss)
    expected, accumulator = np.array([1.0, -3.0]), np.zeros(2)
    for _ in range(3):
        accumulator = 0.9 * accumulator + 2 * (expected - 0.5)
        expected = expected - 0.1 * accumulator
    np.testing.assert_allclose(run_steps(momentum, w, 3), expected, rtol=1e-5)

    tf.reset_default_graph()
    w, loss = quadratic()
    adam = tf.train.AdamOptimizer(0.01).minimize(loss)
    expected, m, v = np.array([1.0, -3.0]), np.zeros(2), np.zeros(2)
    for t in range(1, 4):
        g = 2 * (expected - 0.5)
        m = 0.9 * m + 0.1 * g
        v = 0.999 * v + 0.001 * g * g
        rate = 0.01 * np.sqrt(1 - 0.999 ** t) / (1 - 0.9 ** t)
        expected = expected - rate * m / (np.sqrt(v) + 1e-8)
    np.testing.assert_allclose(run_steps(adam, w, 3), expected, rtol=1e-5)
    # Adam's slots are variables too, not trainable.
    assert len(tf.global_variables()) > len(tf.trainable_variables()) == 1


def test_adagrad_and_ftrl_take_the_steps_their_formulas_give():
    w, loss = quadratic()
    adagrad = tf.train.AdagradOptimizer(0.1, initial_accumulator_value=0.2).minimize(loss)
    expected, accum = np.array([1.0, -3.0]), np.full(2, 0.2)
    for _ in range(3):
        g = 2 * (expected - 0.5)
        accum = accum + g * g
        expected = expected - 0.1 * g / np.sqrt(accum)
    np.testing.assert_allclose(run_steps(adagrad, w, 3), expected, rtol=1e-5)

    tf.reset_default_graph()
    w, loss = quadratic()
    lr, l1, l2 = 0.5, 0.05, 0.1
    ftrl = tf.train.FtrlOptimizer(lr, l1_regularization_strength=l1,
                                  l2_regularization_strength=l2).minimize(loss)
    # TF's FTRL-Proximal update with learning_rate_power -0.5.
    expected, accum, linear = np.array([1.0, -3.0]), np.full(2, 0.1), np.zeros(2)
    for _ in range(3):
        g = 2 * (expected - 0.5)
        new_accum = accum + g * g
        linear = linear + g - (np.sqrt(new_accum) - np.sqrt(accum)) / lr * expected
        quadratic_term = np.sqrt(new_accum) / lr + 2 * l2
        expected = np.where(np.abs(linear) > l1, (np.sign(linear) * l1 - linear) / quadratic_term,
                            0.0)
        accum = new_accum
    np.testing.assert_allclose(run_steps(ftrl, w, 3), expected, rtol=1e-5)
    with pytest.raises(ValueError, match="initial_accumulator_value must be positive"):
        tf.train.AdagradOptimizer(0.1, initial_accumulator_value=0.0)


def test_a_tensor_learning_rate_is_read_every_step():
    w, loss = quadratic()
    rate = tf.placeholder(tf.float32, [])
    train = tf.train.GradientDescentOptimizer(rate).minimize(loss)
    expected = np.array([1.0, -3.0])
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        for r in [0.1, 0.0, 0.25]:
            sess.run(train, {rate: r})
            expected = expected - r * 2 * (expected - 0.5)
            np.testing.assert_allclose(sess.run(w), expected, rtol=1e-6)
    with pytest.raises(TypeError, match="learning_rate must be a float tensor"):
        tf.train.MomentumOptimizer(tf.constant(1), 0.9)
    with pytest.raises(ValueError, match="must be a scalar"):
        tf.train.AdamOptimizer(tf.constant([0.1, 0.2])).minimize(loss)


def test_a_decaying_learning_rate_follows_the_global_step():
    w, loss = quadratic()
    step = tf.train.get_or_create_global_step()
    rate = tf.train.exponential_decay(0.2, step, decay_steps=2, decay_rate=0.5, staircase=True)
    train = tf.train.MomentumOptimizer(rate, 0.5).minimize(loss, global_step=step)
    expected, accumulator = np.array([1.0, -3.0]), np.zeros(2)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        for t in range(5):
            sess.run(train)
            accumulator = 0.5 * accumulator + 2 * (expected - 0.5)
            expected = expected - 0.2 * 0.5 ** (t // 2) * accumulator
        np.testing.assert_allclose(sess.run(w), expected, rtol=1e-5)


def test_learning_rate_schedules_match_their_formulas():
    step = tf.placeholder(tf.int64, [])
    schedules = {
        "exponential": (tf.train.exponential_decay(0.1, step, 10, 0.9),
                        lambda t: 0.1 * 0.9 ** (t / 10)),
        "exponential staircase": (tf.train.exponential_decay(0.1, step, 10, 0.9, staircase=True),
                                  lambda t: 0.1 * 0.9 ** (t // 10)),
        "natural exp": (tf.train.natural_exp_decay(0.1, step, 10, 0.5),
                        lambda t: 0.1 * np.exp(-0.5 * t / 10)),
        "inverse time": (tf.train.inverse_time_decay(0.1, step, 10, 0.5, staircase=True),
                         lambda t: 0.1 / (1 + 0.5 * (t // 10))),
        "polynomial": (tf.train.polynomial_decay(0.1, step, 20, 0.01, power=2.0),
                       lambda t: (0.1 - 0.01) * (1 - min(t, 20) / 20) ** 2 + 0.01),
        "polynomial cycle": (tf.train.polynomial_decay(0.1, step, 20, 0.01, cycle=True),
                             lambda t: (0.1 - 0.01) * (1 - t / (20 * max(1, np.ceil(t / 20))))
                             + 0.01),
        "piecewise": (tf.train.piecewise_constant(step, [5, 15], [1.0, 0.5, 0.1]),
                      lambda t: 1.0 if t <= 5 else 0.5 if t <= 15 else 0.1),
    }
    with tf.Session() as sess:
        for name, (tensor, formula) in sorted(schedules.items()):
            for t in [0, 1, 5, 6, 10, 15, 19, 20, 27, 45]:
                np.testing.assert_allclose(sess.run(tensor, {step: t}), formula(t), rtol=1e-5,
                                           err_msg="%s at step %d" % (name, t))
    with pytest.raises(ValueError, match="global_step is required"):
        tf.train.exponential_decay(0.1, None, 10, 0.9)
    with pytest.raises(ValueError, match="one value more than boundaries"):
        tf.train.piecewise_constant(step, [5], [1.0])


def test_set_random_seed_makes_the_random_ops_repeat():
    def draw(seed):
        with tf.Graph().as_default():
            tf.set_random_seed(seed)
            values = [tf.random_uniform([4]), tf.random_normal([3])]
            with tf.Session() as sess:
                return np.concatenate(sess.run(values))
    first, again, other = draw(5), draw(5), draw(6)
    np.testing.assert_array_equal(first, again)
    assert not np.allclose(first, other)


def test_minimize_counts_the_global_step_and_takes_a_var_list():
    w, loss = quadratic()
    b = tf.Variable(5.0, name="b")
    total = loss + tf.square(b)
    step = tf.train.get_or_create_global_step()
    train = tf.train.GradientDescentOptimizer(0.1).minimize(total, global_step=step, var_list=[w])
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        for _ in range(4):
            sess.run(train)
        assert sess.run(step) == 4
        assert sess.run(b) == 5.0           # not in var_list: untouched
        assert not np.allclose(sess.run(w), [1.0, -3.0])


def test_compute_and_apply_gradients():
    w, loss = quadratic()
    sgd = tf.train.GradientDescentOptimizer(0.5)
    pairs = sgd.compute_gradients(loss)
    assert [v for _, v in pairs] == [w]
    np.testing.assert_allclose(run_steps(sgd.apply_gradients(pairs), w, 1), [0.5, 0.5])


def test_a_loss_without_trainable_variables_is_a_value_error_naming_the_loss():
    loss = tf.reduce_sum(tf.constant([1.0, 2.0]))
    with pytest.raises(ValueError, match="no variables to optimize for loss .Sum:0."):
        tf.train.GradientDescentOptimizer(0.1).minimize(loss)


def test_variables_of_another_graph_are_a_value_error():
    loss = tf.reduce_sum(tf.square(tf.Variable([1.0])))
    with tf.Graph().as_default():
        other = tf.Variable([2.0])
    with pytest.raises(ValueError, match="same graph"):
        tf.train.GradientDescentOptimizer(0.1).minimize(loss, var_list=[other])
    with pytest.raises(ValueError, match="same graph"):
        tf.gradients(loss, [other])
