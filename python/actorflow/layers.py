"""tf.layers (TF 1.x's functional layers): dense, conv2d, the poolings, flatten and dropout,
their variables made with get_variable in a variable scope of the layer's name.

    h = tf.layers.dense(x, 256, activation=tf.nn.relu)   # dense/kernel, dense/bias
    y = tf.layers.dense(h, 10, name="logits")           # logits/kernel, logits/bias
    with tf.variable_scope("", reuse=True): ...          # or reuse=True: the same variables

An unnamed layer's scope is its kind made unique ("dense", "dense_1", ...), as TF names them;
`reuse=True` with a `name` shares an earlier layer's variables. Kernels default to TF's
glorot_uniform, biases to zeros; kernel_constraint and bias_constraint go to get_variable
(the optimizer applies them after each update). channels_last (NHWC) only, as actorflow's
convolutions are.
"""

from actorflow import dtypes
from actorflow import init_ops
from actorflow import nn
from actorflow import ops
from actorflow._missing import missing_names
from actorflow.framework import convert_to_tensor
from actorflow.variable_scope import get_variable, variable_scope


def _layer_scope(name, kind, reuse):
    return variable_scope(name, default_name=kind, reuse=True if reuse else None)


def _pair(value, what):
    if isinstance(value, int):
        return [value, value]
    values = [int(v) for v in value]
    if len(values) != 2:
        raise ValueError("%s must be an int or 2 ints, not %r" % (what, value))
    return values


def _padding(padding):
    text = str(padding).upper()
    if text not in ("VALID", "SAME"):
        raise ValueError("padding must be 'valid' or 'same', not %r" % (padding,))
    return text


def _channels_last(data_format, what):
    if data_format != "channels_last":
        raise ValueError("%s(data_format=%r): actorflow's convolutions are channels_last (NHWC)"
                         % (what, data_format))


def _refuse_unsupported(kind, activity_regularizer):
    if activity_regularizer is not None:
        raise ValueError("%s: activity_regularizer is not supported yet" % kind)


def _bias_and_activation(y, units, use_bias, bias_initializer, bias_regularizer,
                         bias_constraint, trainable, activation, dtype):
    if use_bias:
        bias = get_variable("bias", [units], dtype=dtype,
                            initializer=bias_initializer or init_ops.zeros_initializer(),
                            regularizer=bias_regularizer, trainable=trainable,
                            constraint=bias_constraint)
        y = nn.bias_add(y, bias)
    return activation(y) if activation is not None else y


def dense(inputs, units, activation=None, use_bias=True, kernel_initializer=None,
          bias_initializer=init_ops.zeros_initializer(), kernel_regularizer=None,
          bias_regularizer=None, activity_regularizer=None, kernel_constraint=None,
          bias_constraint=None, trainable=True, name=None, reuse=None):
    """activation(inputs @ kernel + bias), kernel [in, units]; inputs of rank 2."""
    _refuse_unsupported("dense", activity_regularizer)
    x = convert_to_tensor(inputs)
    if x.shape.ndims != 2 or x.shape[1] is None:
        raise ValueError("dense needs inputs [batch, features] with the features known, not %s "
                         "(%s): flatten them first (tf.layers.flatten)" % (x.shape, x.name))
    with _layer_scope(name, "dense", reuse):
        kernel = get_variable("kernel", [x.shape[1], int(units)], dtype=x.dtype,
                              initializer=kernel_initializer, regularizer=kernel_regularizer,
                              trainable=trainable, constraint=kernel_constraint)
        y = ops.matmul(x, kernel)
        return _bias_and_activation(y, int(units), use_bias, bias_initializer, bias_regularizer,
                                    bias_constraint, trainable, activation, x.dtype)


def conv2d(inputs, filters, kernel_size, strides=(1, 1), padding="valid",
           data_format="channels_last", dilation_rate=(1, 1), activation=None, use_bias=True,
           kernel_initializer=None, bias_initializer=init_ops.zeros_initializer(),
           kernel_regularizer=None, bias_regularizer=None, activity_regularizer=None,
           kernel_constraint=None, bias_constraint=None, trainable=True, name=None, reuse=None):
    """A 2-D convolution, kernel [kh, kw, in_channels, filters], NHWC."""
    _channels_last(data_format, "conv2d")
    if _pair(dilation_rate, "dilation_rate") != [1, 1]:
        raise ValueError("conv2d: dilation_rate other than 1 is not supported yet")
    _refuse_unsupported("conv2d", activity_regularizer)
    x = convert_to_tensor(inputs)
    if x.shape.ndims != 4 or x.shape[3] is None:
        raise ValueError("conv2d needs inputs [batch, height, width, channels] with the channels "
                         "known, not %s (%s)" % (x.shape, x.name))
    kh, kw = _pair(kernel_size, "kernel_size")
    with _layer_scope(name, "conv2d", reuse):
        kernel = get_variable("kernel", [kh, kw, x.shape[3], int(filters)], dtype=x.dtype,
                              initializer=kernel_initializer, regularizer=kernel_regularizer,
                              trainable=trainable, constraint=kernel_constraint)
        y = nn.conv2d(x, kernel, strides=_pair(strides, "strides"), padding=_padding(padding))
        return _bias_and_activation(y, int(filters), use_bias, bias_initializer,
                                    bias_regularizer, bias_constraint, trainable, activation,
                                    x.dtype)


def _pooling(native, kind):
    def layer(inputs, pool_size, strides, padding="valid", data_format="channels_last",
              name=None):
        _channels_last(data_format, kind)
        return native(inputs, _pair(pool_size, "pool_size"), _pair(strides, "strides"),
                      _padding(padding), name=name)
    layer.__name__ = kind
    return layer


max_pooling2d = _pooling(nn.max_pool, "max_pooling2d")
average_pooling2d = _pooling(nn.avg_pool, "average_pooling2d")


def flatten(inputs, name=None, data_format="channels_last"):
    """[batch, ...] as [batch, the product of the rest], which must be known."""
    _channels_last(data_format, "flatten")
    x = convert_to_tensor(inputs)
    dims = x.shape.as_list()
    if any(d is None for d in dims[1:]):
        raise ValueError("flatten needs every dimension but the batch known, not %s (%s)"
                         % (x.shape, x.name))
    size = 1
    for d in dims[1:]:
        size *= d
    return ops.reshape(x, [-1, size], name=name or "flatten")


def dropout(inputs, rate=0.5, noise_shape=None, seed=None, training=False, name=None):
    """inputs with each unit dropped with probability `rate` (kept ones scaled by 1 / (1 - rate))
    when `training` is true: a Python bool, or a bool tensor (a placeholder) chosen each step."""
    x = convert_to_tensor(inputs)
    if isinstance(training, bool):
        if not training:
            return ops.identity(x, name=name or "dropout")
        return nn.dropout(x, rate=rate, noise_shape=noise_shape, seed=seed, name=name)
    training = convert_to_tensor(training, dtype=dtypes.bool)
    from actorflow.control_flow import cond
    return cond(training,
                lambda: nn.dropout(x, rate=rate, noise_shape=noise_shape, seed=seed),
                lambda: ops.identity(x), name=name or "dropout")


__getattr__ = missing_names(__name__)
