"""TF1's learning-rate schedules (tf.train.exponential_decay and friends): scalar tensors of the
global step, built from the graph's ops, which any optimizer takes as its learning rate.
    step = tf.train.get_or_create_global_step()
    rate = tf.train.exponential_decay(0.1, step, decay_steps=1000, decay_rate=0.96)
    train = tf.train.GradientDescentOptimizer(rate).minimize(loss, global_step=step)
"""

from actorflow import dtypes
from actorflow import ops as _ops
from actorflow.framework import convert_to_tensor, name_scope


def _schedule_inputs(learning_rate, global_step, what):
    if global_step is None:
        raise ValueError("global_step is required for %s" % what)
    rate = convert_to_tensor(learning_rate, dtype=dtypes.float32)
    step = _ops.cast(global_step, rate.dtype)
    return rate, step


def _progress(step, decay_steps, staircase):
    """global_step / decay_steps, floored for a staircase."""
    progress = step / float(decay_steps)
    return _ops.floor(progress) if staircase else progress


def exponential_decay(learning_rate, global_step, decay_steps, decay_rate, staircase=False,
                      name=None):
    """learning_rate * decay_rate ^ (global_step / decay_steps)."""
    with name_scope(name or "ExponentialDecay"):
        rate, step = _schedule_inputs(learning_rate, global_step, "exponential decay")
        return rate * _ops.pow(convert_to_tensor(decay_rate, dtype=rate.dtype),
                               _progress(step, decay_steps, staircase))


def natural_exp_decay(learning_rate, global_step, decay_steps, decay_rate, staircase=False,
                      name=None):
    """learning_rate * exp(-decay_rate * global_step / decay_steps)."""
    with name_scope(name or "NaturalExpDecay"):
        rate, step = _schedule_inputs(learning_rate, global_step, "natural exp decay")
        return rate * _ops.exp(-float(decay_rate) * _progress(step, decay_steps, staircase))


def inverse_time_decay(learning_rate, global_step, decay_steps, decay_rate, staircase=False,
                       name=None):
    """learning_rate / (1 + decay_rate * global_step / decay_steps)."""
    with name_scope(name or "InverseTimeDecay"):
        rate, step = _schedule_inputs(learning_rate, global_step, "inverse time decay")
        return rate / (1.0 + float(decay_rate) * _progress(step, decay_steps, staircase))


def polynomial_decay(learning_rate, global_step, decay_steps, end_learning_rate=0.0001, power=1.0,
                     cycle=False, name=None):
    """(learning_rate - end) * (1 - step / decay_steps) ^ power + end, with step held at
    decay_steps; with cycle, decay_steps grows to the next multiple past the step instead."""
    with name_scope(name or "PolynomialDecay"):
        rate, step = _schedule_inputs(learning_rate, global_step, "polynomial decay")
        if cycle:
            # At step 0 the first cycle: a multiplier of at least 1.
            multiplier = _ops.maximum(_ops.ceil(step / float(decay_steps)), 1.0)
            steps = float(decay_steps) * multiplier
        else:
            steps = convert_to_tensor(float(decay_steps), dtype=rate.dtype)
            step = _ops.minimum(step, steps)
        end = float(end_learning_rate)
        return (rate - end) * _ops.pow(1.0 - step / steps, float(power)) + end


def piecewise_constant(x, boundaries, values, name=None):
    """values[0] while x <= boundaries[0], values[i] while boundaries[i-1] < x <= boundaries[i],
    values[-1] past the last boundary."""
    if len(values) != len(boundaries) + 1:
        raise ValueError("piecewise_constant takes one value more than boundaries, got %d "
                         "boundaries and %d values" % (len(boundaries), len(values)))
    with name_scope(name or "PiecewiseConstant"):
        x = convert_to_tensor(x)
        picked = [convert_to_tensor(v) for v in values]
        if any(v.dtype != picked[0].dtype for v in picked):
            raise ValueError("piecewise_constant's values must have one dtype, got %s"
                             % [v.dtype.name for v in picked])
        result = picked[-1]
        for boundary, value in reversed(list(zip(boundaries, picked))):
            result = _ops.where(x <= convert_to_tensor(boundary, dtype=x.dtype), value, result)
        return result
