"""tf.nn: activations and losses over graph/ops.hpp.

    logits = tf.nn.bias_add(tf.matmul(x, w), b)
    loss = tf.reduce_mean(tf.nn.softmax_cross_entropy_with_logits_v2(labels=y, logits=logits))
"""

import numpy as np

from actorflow import _actorflow as _c
from actorflow import ops as _ops
from actorflow._missing import missing_names
from actorflow.framework import _same_graph, convert_to_tensor

relu = _ops._unary(_c.relu, "Relu")
sigmoid = _ops.sigmoid
tanh = _ops.tanh
embedding_lookup = _ops.embedding_lookup


# Composed of existing ops (actorflow has no kernel of their own).
def relu6(features, name=None):
    with _ops._scoped("Relu6", name):
        return _ops.minimum(relu(features), 6.0)


def leaky_relu(features, alpha=0.2, name=None):
    with _ops._scoped("LeakyRelu", name):
        x = convert_to_tensor(features)
        return _ops.subtract(relu(x), _ops.multiply(relu(_ops.negative(x)), alpha))


def elu(features, name=None):
    with _ops._scoped("Elu", name):
        x = convert_to_tensor(features)
        return _ops.add(relu(x), _ops.subtract(_ops.exp(_ops.minimum(x, 0.0)), 1.0))


def softplus(features, name=None):
    """log(1 + exp(x)) as relu(x) + log(1 + exp(-|x|)), which does not overflow."""
    with _ops._scoped("Softplus", name):
        x = convert_to_tensor(features)
        return _ops.add(relu(x), _ops.log(_ops.add(_ops.exp(_ops.negative(_ops.abs(x))), 1.0)))


def l2_loss(t, name=None):
    """sum(t ** 2) / 2."""
    with _ops._scoped("L2Loss", name):
        return _ops.multiply(_ops.reduce_sum(_ops.square(t)), 0.5)


def softmax(logits, axis=None, name=None, dim=None):
    logits = convert_to_tensor(logits)
    axis = axis if axis is not None else dim
    rank = logits.shape.ndims
    if axis is not None and axis != -1 and (rank is None or axis != rank - 1):
        raise ValueError("softmax over axis %r: actorflow's Softmax is over the last axis only"
                         % (axis,))
    return _ops._tensor_in(logits.graph, _c.softmax(logits._output, name or "Softmax"))


def bias_add(value, bias, data_format=None, name=None):
    """value + bias along the last axis (NHWC; numpy broadcasting gives exactly that)."""
    if data_format not in (None, "NHWC", "N...C"):
        raise ValueError("bias_add(data_format=%r): only NHWC is supported" % data_format)
    graph, value, bias = _ops._operands(value, bias, "BiasAdd")
    if bias.shape.ndims not in (None, 1):
        raise ValueError("Shape must be rank 1 but is rank %d for bias %r"
                         % (bias.shape.ndims, bias))
    if value.shape.ndims is not None and value.shape.ndims < 2:
        raise ValueError("Shape must be at least rank 2 but is rank %d for value %r"
                         % (value.shape.ndims, value))
    return _ops._tensor_in(graph, _c.add(value._output, bias._output, name or "BiasAdd"))


def _xent(labels, logits, dim, name):
    if labels is None or logits is None:
        raise ValueError("Both labels and logits must be provided.")
    if dim != -1:
        raise ValueError("softmax_cross_entropy_with_logits over dim %r: only the last axis" % dim)
    graph, logits, labels = _ops._operands(logits, labels, "SoftmaxCrossEntropyWithLogits")
    return _ops._tensor_in(graph, _c.softmax_cross_entropy_with_logits(
        logits._output, labels._output, name or "SoftmaxCrossEntropyWithLogits"))


def softmax_cross_entropy_with_logits(_sentinel=None, labels=None, logits=None, dim=-1, name=None,
                                      axis=None):
    if _sentinel is not None:
        raise ValueError("Only call `softmax_cross_entropy_with_logits` with named arguments "
                         "(labels=..., logits=..., ...)")
    return _xent(labels, logits, axis if axis is not None else dim, name)


def softmax_cross_entropy_with_logits_v2(_sentinel=None, labels=None, logits=None, dim=-1,
                                         name=None, axis=None):
    return softmax_cross_entropy_with_logits(_sentinel, labels, logits, dim, name, axis)


def sparse_softmax_cross_entropy_with_logits(_sentinel=None, labels=None, logits=None, name=None):
    """The dense loss of one-hot labels, made from Equal against the class indices (actorflow
    has no SparseSoftmaxCrossEntropyWithLogits op)."""
    if _sentinel is not None:
        raise ValueError("Only call `sparse_softmax_cross_entropy_with_logits` with named "
                         "arguments (labels=..., logits=..., ...)")
    if labels is None or logits is None:
        raise ValueError("Both labels and logits must be provided.")
    graph = _same_graph((labels, logits), "SparseSoftmaxCrossEntropyWithLogits")
    logits = convert_to_tensor(logits, graph=graph)
    labels = convert_to_tensor(labels, graph=graph)
    if not labels.dtype.is_integer:
        raise ValueError("sparse labels must be int32 or int64, not %s" % labels.dtype.name)
    classes = logits.shape[-1] if logits.shape.ndims else None
    if classes is None:
        raise ValueError("sparse_softmax_cross_entropy_with_logits needs the number of classes "
                         "(the last dimension of %r) to be known" % (logits,))
    with graph.name_scope(name or "SparseSoftmaxCrossEntropyWithLogits"):
        column = _ops.reshape(labels, [-1, 1])
        indices = _ops.constant(np.arange(classes).reshape(1, -1), dtype=labels.dtype)
        one_hot = _ops.cast(_ops.equal(column, indices), logits.dtype)
        return _xent(one_hot, logits, -1, "xentropy")


def conv2d(input, filter=None, strides=None, padding=None, use_cudnn_on_gpu=True,  # noqa: A002
           data_format="NHWC", dilations=None, name=None, filters=None):
    filter = filter if filter is not None else filters  # noqa: A001
    if data_format != "NHWC":
        raise ValueError("conv2d(data_format=%r): only NHWC is supported" % data_format)
    if dilations not in (None, [1, 1, 1, 1], (1, 1, 1, 1)):
        raise ValueError("conv2d: dilations are not supported yet")
    graph, x, f = _ops._operands(input, filter, "Conv2D")
    return _ops._tensor_in(graph, _c.conv2d(x._output, f._output, _spatial(strides, "strides"),
                                            padding, name or "Conv2D"))


def _spatial(values, what):
    values = _ops._int_list(values, what)
    if len(values) == 4:
        if values[0] != 1 or values[3] != 1:
            raise ValueError("%s %r: only the spatial dimensions may be other than 1" % (what, values))
        return values[1:3]
    if len(values) == 2:
        return values
    raise ValueError("%s must have 2 or 4 elements, not %r" % (what, values))


def _pool(native, default_name):
    def op(value, ksize, strides, padding, data_format="NHWC", name=None, input=None):  # noqa: A002
        if data_format != "NHWC":
            raise ValueError("%s(data_format=%r): only NHWC is supported" % (default_name, data_format))
        x = convert_to_tensor(value if value is not None else input)
        return _ops._tensor_in(x.graph, native(x._output, _spatial(ksize, "ksize"),
                                               _spatial(strides, "strides"), padding,
                                               name or default_name))
    return op


max_pool = _pool(_c.max_pool, "MaxPool")
avg_pool = _pool(_c.avg_pool, "AvgPool")

__getattr__ = missing_names(__name__)


def sigmoid_cross_entropy_with_logits(_sentinel=None, labels=None, logits=None, name=None):
    """max(x, 0) - x z + log(1 + exp(-|x|)), TF's stable form (the C++ op)."""
    if _sentinel is not None:
        raise ValueError("Only call `sigmoid_cross_entropy_with_logits` with named arguments "
                         "(labels=..., logits=..., ...)")
    if labels is None or logits is None:
        raise ValueError("Both labels and logits must be provided.")
    graph, logits, labels = _ops._operands(logits, labels, "logistic_loss")
    return _ops._tensor_in(graph, _c.sigmoid_cross_entropy_with_logits(
        logits._output, labels._output, name or "logistic_loss"))


def log_softmax(logits, axis=None, name=None):
    """x - max - log(sum(exp(x - max))) over the last axis."""
    if axis not in (None, -1):
        raise ValueError("log_softmax over axis %r: the last axis only" % (axis,))
    with _ops._scoped("LogSoftmax", name):
        x = convert_to_tensor(logits)
        shifted = _ops.subtract(x, _ops.reduce_max(x, axis=-1, keepdims=True))
        return _ops.subtract(shifted, _ops.log(_ops.reduce_sum(_ops.exp(shifted), axis=-1,
                                                               keepdims=True)))


def moments(x, axes, shift=None, name=None, keep_dims=None, keepdims=None):
    """(mean, variance) over `axes`."""
    keep = bool(keepdims if keepdims is not None else keep_dims)
    with _ops._scoped("moments", name):
        x = convert_to_tensor(x)
        mean = _ops.reduce_mean(x, axis=axes, keepdims=True)
        variance = _ops.reduce_mean(_ops.square(_ops.subtract(x, mean)), axis=axes,
                                    keepdims=keep)
        if not keep:
            mean = _ops.reduce_mean(x, axis=axes)
        return mean, variance


def l2_normalize(x, axis=None, epsilon=1e-12, name=None, dim=None):
    """x / sqrt(max(sum(x ** 2, axis), epsilon))."""
    axis = axis if axis is not None else dim
    with _ops._scoped("l2_normalize", name):
        x = convert_to_tensor(x)
        squares = _ops.reduce_sum(_ops.square(x), axis=axis, keepdims=True)
        return _ops.multiply(x, _ops.rsqrt(_ops.maximum(squares, epsilon)))


def dropout(x, keep_prob=None, noise_shape=None, seed=None, name=None, rate=None):
    """x / keep_prob where a uniform draw is at least 1 - keep_prob, else 0 (TF's
    floor(keep_prob + uniform)); keep_prob may be a tensor (a placeholder fed 1.0 to evaluate).
    The draw has noise_shape, by default x's shape, which must be fully known: actorflow's
    RandomUniform takes its shape as an attribute."""
    if (keep_prob is None) == (rate is None):
        raise ValueError("dropout needs exactly one of keep_prob and rate")
    with _ops._scoped("dropout", name):
        x = convert_to_tensor(x)
        if not x.dtype.is_floating:
            raise ValueError("dropout of %r: x must be a floating tensor, not %s"
                             % (x.name, x.dtype.name))
        if keep_prob is None:
            keep_prob = (1 - rate) if not _ops._is_tensor_like(rate) else _ops.subtract(1.0, rate)
        if not _ops._is_tensor_like(keep_prob):
            keep_prob = float(keep_prob)
            if not 0 < keep_prob <= 1:
                raise ValueError("keep_prob must be a scalar tensor or a float in the range "
                                 "(0, 1], got %g" % keep_prob)
            if keep_prob == 1:
                return x
        keep = convert_to_tensor(keep_prob, dtype=None if _ops._is_tensor_like(keep_prob)
                                 else x.dtype, graph=x.graph)
        shape = noise_shape if noise_shape is not None else \
            (x.shape.as_list() if x.shape.ndims is not None else None)
        if shape is None or any(d is None or d < 0 for d in _ops._int_list_or_none(shape)):
            raise ValueError("dropout of %r needs a fully known shape (or noise_shape), got %s: "
                             "actorflow's RandomUniform takes its shape as an attribute"
                             % (x.name, x.shape))
        draw = _ops.random_uniform(_ops._int_list(shape, "dropout's noise_shape"),
                                   dtype=x.dtype, seed=seed)
        kept = _ops.cast(_ops.greater_equal(draw, _ops.subtract(1.0, keep)), x.dtype)
        return _ops.multiply(_ops.truediv(x, keep), kept)
