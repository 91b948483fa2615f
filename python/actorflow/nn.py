"""tf.nn: activations and losses over graph/ops.hpp.

    logits = tf.nn.bias_add(tf.matmul(x, w), b)
    loss = tf.reduce_mean(tf.nn.softmax_cross_entropy_with_logits_v2(labels=y, logits=logits))
"""

import numpy as np

from actorflow import _actorflow as _c
from actorflow import ops as _ops
from actorflow._missing import missing_names
from actorflow import dtypes
from actorflow.framework import Variable, _same_graph, convert_to_tensor

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


def in_top_k(predictions, targets, k, name=None):
    """Whether each row's target class is among its k largest predictions (bool [batch]), as
    TF's InTopK: ties at the boundary count as in, a non-finite target prediction and a class out
    of range as out. The target's prediction is picked by a one-hot mask, so the classes must be
    known."""
    with _ops._scoped("in_top_k", name):
        p = convert_to_tensor(predictions)
        classes = p.shape.as_list()[-1] if p.shape.ndims == 2 else None
        if classes is None:
            raise ValueError("in_top_k needs predictions of shape [batch, classes] with the "
                             "classes known, got %s" % p.shape)
        t = convert_to_tensor(targets)
        if not t.dtype.is_integer:
            raise TypeError("in_top_k's targets are class ids (int32 or int64), not %s" % t.dtype.name)
        known = _ops.logical_and(t >= 0, t < classes)  # a class out of range is not in the top k
        pick = _ops.one_hot(_ops.where_v2(known, t, _ops.zeros_like(t)), classes, dtype=p.dtype)
        # where(pick) keeps an infinite target prediction out of 0 * inf.
        target = _ops.reduce_sum(_ops.where_v2(pick > 0, p, _ops.zeros_like(p)), axis=1,
                                 keepdims=True)
        above = _ops.reduce_sum(_ops.cast(p > target, dtypes.int32), axis=1)
        return _ops.logical_and(_ops.logical_and(above < int(k), _ops.is_finite(target[:, 0])),
                                known)


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


# --- large vocabularies: sparse lookups and sampled losses (graph/sparse_ops.hpp,
# graph/sampled_losses.hpp) ---------------------------------------------------------------------


def _one_variable(params, what):
    """The one Variable of `params` (a Variable or a list of one): the C++ lookups and sampled
    losses read a single table."""
    if isinstance(params, (list, tuple)) and len(params) == 1:
        params = params[0]
    if not isinstance(params, Variable):
        raise NotImplementedError("%s: actorflow takes one Variable here, not %r (a partitioned "
                                  "table works with tf.nn.embedding_lookup only)" % (what, params))
    return params


def _classes(labels, graph, what):
    labels = convert_to_tensor(labels, graph=graph)
    if labels.dtype == dtypes.int32:
        labels = _ops.cast(labels, dtypes.int64)
    if labels.dtype != dtypes.int64:
        raise TypeError("%s: labels are int64 class ids, not %s" % (what, labels.dtype.name))
    return labels


def log_uniform_candidate_sampler(true_classes, num_true, num_sampled, unique, range_max,
                                  seed=None, name=None):
    """(sampled_candidates, true_expected_count, sampled_expected_count): num_sampled classes
    of [0, range_max) drawn with P(k) = log((k + 2) / (k + 1)) / log(range_max + 1), TF's."""
    graph = convert_to_tensor(true_classes).graph
    true_classes = _classes(true_classes, graph, "log_uniform_candidate_sampler")
    drawn = _c.log_uniform_candidate_sampler(
        true_classes._output, int(num_true), int(num_sampled), bool(unique), int(range_max),
        None if seed is None else int(seed), name or "LogUniformCandidateSampler")
    return tuple(graph._tensor(graph._built(t)) for t in drawn)


def _sampled_loss(native, default_name, default_remove_hits):
    def loss(weights, biases, labels, inputs, num_sampled, num_classes, num_true=1,
             sampled_values=None, remove_accidental_hits=default_remove_hits,
             partition_strategy="mod", name=None, seed=None):
        weights = _one_variable(weights, default_name + "'s weights")
        biases = _one_variable(biases, default_name + "'s biases")
        if partition_strategy not in ("mod", "div"):
            raise ValueError("%s: partition_strategy is 'mod' or 'div', not %r"
                             % (default_name, partition_strategy))
        inputs = convert_to_tensor(inputs)
        graph = _same_graph((weights, biases, inputs), default_name)
        labels = _classes(labels, graph, default_name)
        sampled = None
        if sampled_values is not None:
            sampled = [convert_to_tensor(t)._output for t in sampled_values]
        return _ops._tensor_in(graph, native(
            weights._handle, biases._handle, labels._output, inputs._output, int(num_sampled),
            int(num_classes), int(num_true), sampled, bool(remove_accidental_hits),
            None if seed is None else int(seed), name or default_name))
    loss.__name__ = default_name
    loss.__doc__ = ("tf.nn.%s per example [batch]: weights [num_classes, dim] and biases "
                    "[num_classes] are Variables read by lookups (their gradients are "
                    "IndexedSlices of the true and sampled rows), labels [batch, num_true] "
                    "int64, inputs [batch, dim]." % default_name)
    return loss


nce_loss = _sampled_loss(_c.nce_loss, "nce_loss", False)
sampled_softmax_loss = _sampled_loss(_c.sampled_softmax_loss, "sampled_softmax_loss", True)


def embedding_lookup_sparse(params, sp_ids, sp_weights, partition_strategy="mod", name=None,
                            combiner=None, max_norm=None):
    """Per example (row of sp_ids) its ids' rows of `params` combined by `combiner` ("sum",
    "mean", "sqrtn"; TF1's default "mean"), weighted by sp_weights' values when given:
    [dense_shape[0], dim]. An example without ids gets zeros."""
    from actorflow.sparse import SparseTensor
    params = _one_variable(params, "embedding_lookup_sparse")
    if combiner is None:
        combiner = "mean"
    if combiner not in ("sum", "mean", "sqrtn"):
        raise ValueError("embedding_lookup_sparse: combiner is 'sum', 'mean' or 'sqrtn', not %r"
                         % (combiner,))
    if max_norm is not None:
        raise ValueError("embedding_lookup_sparse(max_norm=...) is not supported yet")
    if not isinstance(sp_ids, SparseTensor):
        raise TypeError("embedding_lookup_sparse: sp_ids must be a SparseTensor, not %r"
                        % (sp_ids,))
    if sp_weights is not None and not isinstance(sp_weights, SparseTensor):
        raise TypeError("embedding_lookup_sparse: sp_weights must be a SparseTensor or None, "
                        "not %r" % (sp_weights,))
    graph = _same_graph((params, sp_ids.values), "embedding_lookup_sparse")
    ids = _ops._int_ids(sp_ids.values, graph, "embedding_lookup_sparse's ids")
    segment_ids = sp_ids.indices[:, 0]
    num_segments = sp_ids.dense_shape[0]
    weights = None
    if sp_weights is not None:
        weights = convert_to_tensor(sp_weights.values)._output
    return _ops._tensor_in(graph, _c.embedding_lookup_sparse(
        params._handle, ids._output, segment_ids._output, num_segments._output, weights,
        combiner, name or "embedding_lookup_sparse"))
