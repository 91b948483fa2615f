"""tf.losses: losses made of graph ops, reduced as TF1's default (the mean over the elements)."""

from actorflow import ops as _ops
from actorflow import nn as _nn
from actorflow._missing import missing_names
from actorflow.framework import Tensor, Variable, _same_graph, convert_to_tensor
from actorflow.variable_scope import get_regularization_loss  # noqa: F401 - tf.losses' name


def _scalar_weight(weights, loss_name):
    if isinstance(weights, (Tensor, Variable)) or not isinstance(weights, (int, float)):
        raise ValueError("%s: weights other than a Python number are not supported yet" % loss_name)
    return float(weights)


def mean_squared_error(labels, predictions, weights=1.0, scope=None, loss_collection=None,
                       reduction=None):
    if reduction is not None:
        raise ValueError("mean_squared_error: only the default reduction is supported")
    weight = _scalar_weight(weights, "mean_squared_error")
    graph = _same_graph((labels, predictions), "mean_squared_error")
    predictions = convert_to_tensor(predictions, graph=graph)
    labels = convert_to_tensor(labels, dtype=predictions.dtype, graph=graph) \
        if not isinstance(labels, (Tensor, Variable)) else convert_to_tensor(labels)
    with graph.name_scope(scope or "mean_squared_error"):
        loss = _ops.reduce_mean(_ops.square(_ops.subtract(predictions, labels)), name="value")
        return loss if weight == 1.0 else _ops.multiply(loss, weight)


def softmax_cross_entropy(onehot_labels, logits, weights=1.0, label_smoothing=0, scope=None,
                          loss_collection=None, reduction=None):
    if reduction is not None or label_smoothing:
        raise ValueError("softmax_cross_entropy: only the default reduction, without label "
                         "smoothing, is supported")
    weight = _scalar_weight(weights, "softmax_cross_entropy")
    graph = _same_graph((onehot_labels, logits), "softmax_cross_entropy")
    with graph.name_scope(scope or "softmax_cross_entropy_loss"):
        per_example = _nn.softmax_cross_entropy_with_logits(labels=onehot_labels, logits=logits)
        loss = _ops.reduce_mean(per_example, name="value")
        return loss if weight == 1.0 else _ops.multiply(loss, weight)


def sparse_softmax_cross_entropy(labels, logits, weights=1.0, scope=None, loss_collection=None,
                                 reduction=None):
    if reduction is not None:
        raise ValueError("sparse_softmax_cross_entropy: only the default reduction is supported")
    weight = _scalar_weight(weights, "sparse_softmax_cross_entropy")
    graph = _same_graph((labels, logits), "sparse_softmax_cross_entropy")
    with graph.name_scope(scope or "sparse_softmax_cross_entropy_loss"):
        per_example = _nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)
        loss = _ops.reduce_mean(per_example, name="value")
        return loss if weight == 1.0 else _ops.multiply(loss, weight)


__getattr__ = missing_names(__name__)
