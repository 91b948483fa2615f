"""The tests' small training model: y = w x + b fitted to y = 2x + 1, its train op counting
the global step; under tf.device(`device`) when one is given."""

import contextlib

import numpy as np

import actorflow.compat.v1 as tf


def linear_model(device=None):
    """(x, y, w, b, loss, global_step, train_op) in the default graph."""
    with tf.device(device) if device else contextlib.nullcontext():
        x = tf.placeholder(tf.float32, [None], name="x")
        y = tf.placeholder(tf.float32, [None], name="y")
        w = tf.Variable(0.0, name="w")
        b = tf.Variable(0.0, name="b")
        loss = tf.reduce_mean(tf.square(w * x + b - y), name="loss")
        global_step = tf.train.get_or_create_global_step()
        train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=global_step)
    return x, y, w, b, loss, global_step, train_op


def batch(seed):
    """16 points of y = 2x + 1, x uniform in [0, 1) drawn with `seed`."""
    xs = np.random.RandomState(seed).rand(16).astype(np.float32)
    return xs, 2.0 * xs + 1.0
