"""TF 1.x's initializers and partitioners, for get_variable and variable_scope.

    w = tf.get_variable("w", [784, 256], initializer=tf.glorot_uniform_initializer(seed=1),
                        partitioner=tf.fixed_size_partitioner(4))

An initializer is called as `init(shape, dtype=None, partition_info=None)` and returns a Tensor
of that shape, made from the ops actorflow has (zeros, fill, constants, the random ops). For a
shard of a partitioned variable, `partition_info` says where the shard lies: the fan-based
initializers then scale by the whole variable's shape (as TF's do), a constant_initializer of
the whole value gives each shard its own slice, and a seeded random initializer draws shard i
with seed + i (graph/partitioned_variable.hpp's rule), so that equal-sized shards differ.
A partitioner is called as `partitioner(shape=TensorShape, dtype=DType)` and returns the number
of parts per dimension: at most one above 1.
"""

import math

import numpy as np

from actorflow import dtypes


class _PartitionInfo:
    """Where one shard lies in its partitioned variable (TF's _PartitionInfo)."""

    def __init__(self, full_shape, var_offset, shard_index=0):
        self.full_shape = list(full_shape)
        self.var_offset = list(var_offset)
        self.shard_index = shard_index


def _shape_list(shape, what):
    dims = dtypes.TensorShape(shape).as_list()
    if any(d is None for d in dims):
        raise ValueError("%s needs a fully defined shape, not %r" % (what, shape))
    return dims


class Initializer:
    """The base of every initializer: get_config, and the dtype it was made with."""

    def __init__(self, dtype=dtypes.float32):
        self.dtype = dtypes.as_dtype(dtype)

    def _dtype(self, dtype):
        return dtypes.as_dtype(dtype) if dtype is not None else self.dtype

    def get_config(self):
        return {"dtype": self.dtype.name}


class Zeros(Initializer):
    def __call__(self, shape, dtype=None, partition_info=None):
        from actorflow import ops
        return ops.zeros(_shape_list(shape, "zeros_initializer"), self._dtype(dtype))


class Ones(Initializer):
    def __call__(self, shape, dtype=None, partition_info=None):
        from actorflow import ops
        return ops.ones(_shape_list(shape, "ones_initializer"), self._dtype(dtype))


class Constant(Initializer):
    """A scalar fills the shape; an array of the whole variable's shape gives each shard of a
    partitioned variable its own slice; any other array of the shape's element count is
    reshaped to it (TF's rule)."""

    def __init__(self, value=0, dtype=dtypes.float32, verify_shape=False):
        super().__init__(dtype)
        self.value = value
        self.verify_shape = verify_shape

    def __call__(self, shape, dtype=None, partition_info=None):
        from actorflow import ops
        dims = _shape_list(shape, "constant_initializer")
        dtype = self._dtype(dtype)
        value = np.asarray(self.value, dtype=dtype.as_numpy_dtype)
        if value.size == 1:
            return ops.fill(dims, ops.constant(value.reshape(()), dtype=dtype))
        if partition_info is not None and list(value.shape) == partition_info.full_shape:
            index = tuple(slice(o, o + d) for o, d in zip(partition_info.var_offset, dims))
            value = value[index]
        if self.verify_shape and list(value.shape) != dims:
            raise TypeError("Expected Tensor's shape: %s, got %s." % (tuple(dims), value.shape))
        if value.size != int(np.prod(dims)):
            raise ValueError("constant_initializer: %d values for shape %s (%d elements)"
                             % (value.size, dims, int(np.prod(dims))))
        return ops.constant(value.reshape(dims), dtype=dtype)

    def get_config(self):
        return {"value": self.value, "dtype": self.dtype.name, "verify_shape": self.verify_shape}


class _Random(Initializer):
    def __init__(self, a, b, seed, dtype):
        super().__init__(dtype)
        self._a, self._b, self.seed = a, b, seed

    def _draw(self, op, what, shape, dtype, partition_info, a=None, b=None):
        dims = _shape_list(shape, what)
        dtype = self._dtype(dtype)
        if not dtype.is_floating:
            raise TypeError("%s makes floating-point values, not %s" % (what, dtype.name))
        seed = self.seed
        if seed is not None and partition_info is not None:
            seed = int(seed) + partition_info.shard_index
        return op(dims, self._a if a is None else a, self._b if b is None else b, dtype=dtype,
                  seed=seed)


class RandomUniform(_Random):
    def __init__(self, minval=0, maxval=None, seed=None, dtype=dtypes.float32):
        super().__init__(minval, 1.0 if maxval is None else maxval, seed, dtype)
        self.minval, self.maxval = self._a, self._b

    def __call__(self, shape, dtype=None, partition_info=None):
        from actorflow import ops
        return self._draw(ops.random_uniform, "random_uniform_initializer", shape, dtype,
                          partition_info)


class _Normal(_Random):
    """A normal draw of `mean` and `stddev` by the op named `_op` (random_normal or
    truncated_normal, TF's two normal initializers)."""

    _op = None

    def __init__(self, mean=0.0, stddev=1.0, seed=None, dtype=dtypes.float32):
        super().__init__(mean, stddev, seed, dtype)
        self.mean, self.stddev = mean, stddev

    def __call__(self, shape, dtype=None, partition_info=None):
        from actorflow import ops
        return self._draw(getattr(ops, self._op), self._op + "_initializer", shape, dtype,
                          partition_info)


class RandomNormal(_Normal):
    _op = "random_normal"


class TruncatedNormal(_Normal):
    _op = "truncated_normal"


def _compute_fans(shape):
    """TF's fans: a matrix's rows and columns; a convolution kernel [h, w, in, out] counts its
    receptive field in both."""
    if len(shape) < 1:
        return 1, 1
    if len(shape) == 1:
        return shape[0], shape[0]
    if len(shape) == 2:
        return shape[0], shape[1]
    receptive = int(np.prod(shape[:-2]))
    return shape[-2] * receptive, shape[-1] * receptive


class VarianceScaling(_Random):
    """TF's variance_scaling_initializer: scale / fan (fan_in, fan_out or their mean), as a
    truncated normal (stddev corrected for the truncation), an untruncated normal or a uniform."""

    _TRUNCATION = 0.87962566103423978  # the stddev of a unit normal truncated at 2 stddevs

    def __init__(self, scale=1.0, mode="fan_in", distribution="truncated_normal", seed=None,
                 dtype=dtypes.float32):
        if scale <= 0.0:
            raise ValueError("`scale` must be positive float.")
        if mode not in ("fan_in", "fan_out", "fan_avg"):
            raise ValueError("Invalid `mode` argument: %r" % (mode,))
        distribution = distribution.lower()
        if distribution == "normal":
            distribution = "truncated_normal"
        if distribution not in ("uniform", "truncated_normal", "untruncated_normal"):
            raise ValueError("Invalid `distribution` argument: %r" % (distribution,))
        super().__init__(0.0, 0.0, seed, dtype)
        self.scale, self.mode, self.distribution = scale, mode, distribution

    def __call__(self, shape, dtype=None, partition_info=None):
        from actorflow import ops
        dims = _shape_list(shape, "variance_scaling_initializer")
        fan_in, fan_out = _compute_fans(partition_info.full_shape if partition_info else dims)
        fan = {"fan_in": fan_in, "fan_out": fan_out, "fan_avg": (fan_in + fan_out) / 2.0}[self.mode]
        scale = self.scale / max(1.0, fan)
        what = "variance_scaling_initializer"
        if self.distribution == "truncated_normal":
            return self._draw(ops.truncated_normal, what, dims, dtype, partition_info,
                              0.0, math.sqrt(scale) / self._TRUNCATION)
        if self.distribution == "untruncated_normal":
            return self._draw(ops.random_normal, what, dims, dtype, partition_info,
                              0.0, math.sqrt(scale))
        limit = math.sqrt(3.0 * scale)
        return self._draw(ops.random_uniform, what, dims, dtype, partition_info, -limit, limit)

    def get_config(self):
        return {"scale": self.scale, "mode": self.mode, "distribution": self.distribution,
                "seed": self.seed, "dtype": self.dtype.name}


def glorot_uniform_initializer(seed=None, dtype=dtypes.float32):
    return VarianceScaling(1.0, "fan_avg", "uniform", seed, dtype)


def glorot_normal_initializer(seed=None, dtype=dtypes.float32):
    return VarianceScaling(1.0, "fan_avg", "truncated_normal", seed, dtype)


def he_normal(seed=None):
    return VarianceScaling(2.0, "fan_in", "truncated_normal", seed)


def he_uniform(seed=None):
    return VarianceScaling(2.0, "fan_in", "uniform", seed)


def lecun_normal(seed=None):
    return VarianceScaling(1.0, "fan_in", "truncated_normal", seed)


def lecun_uniform(seed=None):
    return VarianceScaling(1.0, "fan_in", "uniform", seed)


# TF 1.x's lower-case names are the classes themselves.
zeros_initializer = Zeros
ones_initializer = Ones
constant_initializer = Constant
random_uniform_initializer = RandomUniform
random_normal_initializer = RandomNormal
truncated_normal_initializer = TruncatedNormal
variance_scaling_initializer = VarianceScaling


class initializers:  # noqa: N801 - TF's tf.initializers namespace
    zeros = Zeros
    ones = Ones
    constant = Constant
    random_uniform = RandomUniform
    random_normal = RandomNormal
    truncated_normal = TruncatedNormal
    variance_scaling = VarianceScaling
    glorot_uniform = staticmethod(glorot_uniform_initializer)
    glorot_normal = staticmethod(glorot_normal_initializer)
    he_normal = staticmethod(he_normal)
    he_uniform = staticmethod(he_uniform)
    lecun_normal = staticmethod(lecun_normal)
    lecun_uniform = staticmethod(lecun_uniform)


# --- partitioners ------------------------------------------------------------------------------


def _check_partition_axis(shape, axis, what):
    if not 0 <= axis < len(shape):
        raise ValueError("%s: axis %d is outside a variable of rank %d" % (what, axis, len(shape)))


def fixed_size_partitioner(num_shards, axis=0):
    """`num_shards` parts along `axis` (fewer when that dimension has fewer rows)."""
    if int(num_shards) < 1:
        raise ValueError("fixed_size_partitioner needs num_shards >= 1, not %r" % (num_shards,))

    def _partitioner(shape, **unused_args):
        dims = dtypes.TensorShape(shape).as_list()
        _check_partition_axis(dims, axis, "fixed_size_partitioner")
        partitions = [1] * len(dims)
        partitions[axis] = min(int(num_shards), dims[axis])
        return partitions
    return _partitioner


def variable_axis_size_partitioner(max_shard_bytes, axis=0, bytes_per_string_element=16,
                                   max_shards=None):
    """As many parts along `axis` as keep each part at most `max_shard_bytes` (at most
    `max_shards`)."""
    if max_shard_bytes < 1 or (max_shards is not None and max_shards < 1):
        raise ValueError("Both max_shard_bytes and max_shards (if provided) must be positive.")

    def _partitioner(shape, dtype):
        dims = dtypes.TensorShape(shape).as_list()
        _check_partition_axis(dims, axis, "variable_axis_size_partitioner")
        slice_bytes = int(np.prod(dims[:axis] + dims[axis + 1:])) * dtypes.as_dtype(dtype).size
        slices_per_shard = max(1, max_shard_bytes // max(1, slice_bytes))
        shards = int(math.ceil(dims[axis] / float(slices_per_shard)))
        if max_shards is not None:
            shards = min(shards, max_shards)
        partitions = [1] * len(dims)
        partitions[axis] = max(1, min(shards, dims[axis]))
        return partitions
    return _partitioner


def min_max_variable_partitioner(max_partitions=1, axis=0, min_slice_size=256 << 10,
                                 bytes_per_string_element=16):
    """Parts of at least `min_slice_size` bytes along `axis`, at most `max_partitions`."""
    if max_partitions < 1:
        raise ValueError("max_partitions must be at least 1, not %r" % (max_partitions,))

    def _partitioner(shape, dtype):
        dims = dtypes.TensorShape(shape).as_list()
        _check_partition_axis(dims, axis, "min_max_variable_partitioner")
        total_bytes = int(np.prod(dims)) * dtypes.as_dtype(dtype).size
        wanted = int(math.ceil(total_bytes / float(min_slice_size)))
        partitions = [1] * len(dims)
        partitions[axis] = max(1, min(dims[axis], max_partitions, wanted))
        return partitions
    return _partitioner
