"""tf.SparseTensor and tf.SparseTensorValue: the sparse ids (and weights) that
tf.nn.embedding_lookup_sparse combines per example.

    sp_ids = tf.SparseTensor(indices=[[0, 0], [0, 1], [1, 0]], values=[3, 7, 3], dense_shape=[2, 2])
    rows = tf.nn.embedding_lookup_sparse(table, sp_ids, None, combiner="mean")   # [2, dim]

actorflow has no sparse kernels beyond the embedding lookups: a SparseTensor holds its three
tensors (indices int64 [n, rank], values [n], dense_shape int64 [rank]) and is fetched as a
SparseTensorValue; it cannot be fed as one (feed its three tensors' placeholders instead).
"""

import collections

from actorflow import dtypes
from actorflow.framework import Tensor, Variable, _same_graph, convert_to_tensor

SparseTensorValue = collections.namedtuple("SparseTensorValue",
                                           ["indices", "values", "dense_shape"])


class SparseTensor:
    def __init__(self, indices, values, dense_shape):
        tensors = [x for x in (indices, values, dense_shape) if isinstance(x, (Tensor, Variable))]
        graph = _same_graph(tensors, "SparseTensor") if tensors else None
        self._indices = convert_to_tensor(indices, dtype=dtypes.int64, graph=graph)
        self._values = convert_to_tensor(values, graph=graph)
        self._dense_shape = convert_to_tensor(dense_shape, dtype=dtypes.int64, graph=graph)
        for name, t, want in (("indices", self._indices, 2), ("dense_shape", self._dense_shape, 1)):
            if t.dtype != dtypes.int64:
                raise TypeError("SparseTensor: %s must be int64, not %s" % (name, t.dtype.name))
            if t.shape.ndims is not None and t.shape.ndims != want:
                raise ValueError("SparseTensor: %s has rank %d, not %d"
                                 % (name, t.shape.ndims, want))
        if self._values.shape.ndims is not None and self._values.shape.ndims != 1:
            raise ValueError("SparseTensor: values has rank %d, not 1" % self._values.shape.ndims)

    indices = property(lambda self: self._indices)
    values = property(lambda self: self._values)
    dense_shape = property(lambda self: self._dense_shape)
    dtype = property(lambda self: self._values.dtype)
    graph = property(lambda self: self._values.graph)

    def get_shape(self):
        return dtypes.TensorShape(None)

    shape = property(get_shape)

    def __repr__(self):
        return "SparseTensor(indices=%r, values=%r, dense_shape=%r)" % (
            self._indices, self._values, self._dense_shape)
