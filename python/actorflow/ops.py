"""The ops (tf.constant, tf.matmul, tf.reduce_mean, tf.transpose, ...) over graph/ops.hpp and
graph/shape_ops.hpp (the sparse ones over graph/sparse_ops.hpp).

    x = tf.placeholder(tf.float32, [None, 3], name="x")
    w = tf.Variable(tf.random_normal([3, 1]))
    y = tf.reduce_mean(tf.matmul(x, w), axis=0, keepdims=True)

Each function converts its arguments by TF1's rules (framework.convert_to_tensor), makes the
node through the extension and raises what went wrong making it (a ValueError with the C++
graph's message, which names the node). Ops the C++ side does not have are absent, and asking
the module for one raises AttributeError naming it; a few are composed of those it has (below).
"""

import builtins

import numpy as np

from actorflow import _actorflow as _c
from actorflow import dtypes
from actorflow.framework import (IndexedSlices, Tensor, Variable, _same_graph, convert_to_tensor,
                                 get_default_graph, name_scope, numpy_value)


def _tensor_in(graph, output):
    return graph._tensor(graph._built(output))


def _operation_in(graph, output):
    return graph._operation(graph._built(output).node_id)


def _is_tensor_like(x):
    return isinstance(x, (Tensor, Variable, IndexedSlices))


def _operands(x, y, op_name):
    """x and y as tensors of one graph and dtype: a Python or numpy value takes the dtype of
    the tensor beside it (TF1's binary-op rule); two tensors must already agree."""
    graph = _same_graph((x, y), op_name)
    if _is_tensor_like(x) or not _is_tensor_like(y):
        x = convert_to_tensor(x, graph=graph)
        y = y if _is_tensor_like(y) else convert_to_tensor(y, dtype=x.dtype, graph=graph)
    else:
        y = convert_to_tensor(y)
        x = convert_to_tensor(x, dtype=y.dtype, graph=graph)
    x, y = convert_to_tensor(x), convert_to_tensor(y)
    if x.dtype != y.dtype:
        raise TypeError("Input 'y' of '%s' Op has type %s that does not match type %s of "
                        "argument 'x'." % (op_name, y.dtype.name, x.dtype.name))
    return graph, x, y


def _binary(native, op_name, default_name):
    def op(x, y, name=None):
        graph, x, y = _operands(x, y, op_name)
        return _tensor_in(graph, native(x._output, y._output, name or default_name))
    op.__name__ = default_name
    return op


def _unary(native, default_name):
    def op(x, name=None):
        x = convert_to_tensor(x)
        return _tensor_in(x.graph, native(x._output, name or default_name))
    op.__name__ = default_name
    return op


# --- sources -------------------------------------------------------------------------------------


def constant(value, dtype=None, shape=None, name="Const", verify_shape=False, graph=None):
    """A Const node holding `value` (numpy arrays keep their dtype, Python floats are float32,
    ints int32), optionally filled out or reshaped to `shape`."""
    array = numpy_value(value, dtype)
    if shape is not None:
        shape = [int(d) for d in shape]
        if array.size == 1 and not verify_shape:
            array = np.full(shape, array.reshape(()), dtype=array.dtype)
        elif array.size == int(np.prod(shape, dtype=np.int64)) and not verify_shape:
            array = array.reshape(shape)
        elif list(array.shape) != shape:
            raise TypeError("Expected Tensor's shape: %s, got %s." % (tuple(shape), array.shape))
    graph = graph or get_default_graph()
    return _tensor_in(graph, _c.constant(graph._c, np.require(array, requirements="C"), name or "Const"))


def placeholder(dtype, shape=None, name=None):
    graph = get_default_graph()
    dims = None if shape is None else dtypes.TensorShape(shape).dims
    return _tensor_in(graph, _c.placeholder(graph._c, dtypes.as_dtype(dtype).name, dims,
                                            name or "Placeholder"))


def _int_list(values, what):
    if isinstance(values, (Tensor, Variable)):
        raise TypeError("%s must be Python ints here (actorflow takes it as an attribute), not "
                        "the tensor %r" % (what, values))
    if isinstance(values, dtypes.TensorShape):
        values = values.as_list()
    if isinstance(values, (int, np.integer)):
        values = [values]
    try:
        return [int(v) for v in values]
    except (TypeError, ValueError):
        raise TypeError("%s must be a list of ints, not %r" % (what, values)) from None


def _int_list_or_none(values):
    """A shape's entries as ints, None for an unknown one (a TensorShape's or a list's)."""
    if isinstance(values, dtypes.TensorShape):
        values = values.as_list()
    return [None if v is None else int(v) for v in values]


def _dims(shape, what):
    """A fully known shape as a list of sizes; a ValueError for a negative (unknown) one."""
    dims = _int_list(shape, what)
    if any(d < 0 for d in dims):
        raise ValueError("%s must be non-negative sizes, got %r" % (what, dims))
    return dims


def fill(dims, value, name=None):
    value = convert_to_tensor(value)
    return _tensor_in(value.graph, _c.fill(value.graph._c, _dims(dims, "fill's dims"),
                                           value._output, name or "Fill"))


def zeros(shape, dtype=dtypes.float32, name=None):
    graph = get_default_graph()
    return _tensor_in(graph, _c.zeros(graph._c, _dims(shape, "zeros' shape"),
                                      dtypes.as_dtype(dtype).name, name or "zeros"))


def ones(shape, dtype=dtypes.float32, name=None):
    graph = get_default_graph()
    return _tensor_in(graph, _c.ones(graph._c, _dims(shape, "ones' shape"),
                                     dtypes.as_dtype(dtype).name, name or "ones"))


def _like(op, tensor, dtype, name):
    tensor = convert_to_tensor(tensor)
    made = _tensor_in(tensor.graph, _c.make_op(tensor.graph._c, op, name, [tensor._output]))
    return made if dtype is None else cast(made, dtype)


def zeros_like(tensor, dtype=None, name=None, optimize=True):
    return _like("ZerosLike", tensor, dtype, name or "zeros_like")


def ones_like(tensor, dtype=None, name=None, optimize=True):
    return _like("OnesLike", tensor, dtype, name or "ones_like")


def _random(native, default_name, shape, a, b, dtype, seed, name):
    for value in (a, b):
        if _is_tensor_like(value):
            raise TypeError("%s takes Python numbers for its bounds here, not the tensor %r"
                            % (default_name, value))
    graph = get_default_graph()
    return _tensor_in(graph, native(graph._c, _dims(shape, default_name + "'s shape"),
                                    float(a), float(b), dtypes.as_dtype(dtype).name,
                                    None if seed is None else int(seed), name or default_name))


def random_uniform(shape, minval=0, maxval=None, dtype=dtypes.float32, seed=None, name=None):
    if not dtypes.as_dtype(dtype).is_floating:
        raise TypeError("random_uniform of %s: actorflow's RandomUniform makes float32 or float64"
                        % dtypes.as_dtype(dtype).name)
    return _random(_c.random_uniform, "random_uniform", shape, minval,
                   1.0 if maxval is None else maxval, dtype, seed, name)


def random_normal(shape, mean=0.0, stddev=1.0, dtype=dtypes.float32, seed=None, name=None):
    return _random(_c.random_normal, "random_normal", shape, mean, stddev, dtype, seed, name)


def truncated_normal(shape, mean=0.0, stddev=1.0, dtype=dtypes.float32, seed=None, name=None):
    return _random(_c.truncated_normal, "truncated_normal", shape, mean, stddev, dtype, seed, name)


# --- variables -------------------------------------------------------------------------------------


def _variable_handle(ref, op_name):
    if not isinstance(ref, Variable):
        raise TypeError("%s needs a Variable as its first argument, not %r" % (op_name, ref))
    return ref._handle


def _assign_like(native, op_name, default_name):
    def op(ref, value, use_locking=None, name=None, validate_shape=None):
        handle = _variable_handle(ref, op_name)
        _same_graph((ref, value), op_name)
        value = convert_to_tensor(value, dtype=None if _is_tensor_like(value) else ref.dtype,
                                  graph=ref.graph)
        return _tensor_in(ref.graph, native(handle, value._output, name or default_name))
    op.__name__ = default_name
    return op


assign = _assign_like(_c.assign, "assign", "Assign")
assign_add = _assign_like(_c.assign_add, "assign_add", "AssignAdd")
assign_sub = _assign_like(_c.assign_sub, "assign_sub", "AssignSub")


def global_variables(scope=None):
    graph = get_default_graph()
    variables = [graph._variable(h) for h in graph._c.global_variables()]
    return [v for v in variables if scope is None or v.op.name.startswith(scope)]


def trainable_variables(scope=None):
    graph = get_default_graph()
    variables = [graph._variable(h) for h in graph._c.trainable_variables()]
    return [v for v in variables if scope is None or v.op.name.startswith(scope)]


all_variables = global_variables


def global_variables_initializer():
    graph = get_default_graph()
    return _operation_in(graph, _c.global_variables_initializer(graph._c, "init"))


initialize_all_variables = global_variables_initializer


def variables_initializer(var_list, name="init"):
    return group(*[v.initializer for v in var_list], name=name)


def no_op(name=None):
    graph = get_default_graph()
    return _operation_in(graph, _c.no_op(graph._c, name or "NoOp"))


def group(*inputs, **kwargs):
    name = kwargs.pop("name", None)
    if kwargs:
        raise TypeError("group() got unexpected keyword arguments %s" % sorted(kwargs))
    graph = _same_graph(inputs, "group")
    deps = [graph._control_handle(x) for x in inputs]
    return _operation_in(graph, _c.group(graph._c, deps, name or "group_deps"))


# --- elementwise -------------------------------------------------------------------------------------

identity = _unary(_c.identity, "Identity")
negative = _unary(_c.neg, "Neg")
square = _unary(_c.square, "Square")
sqrt = _unary(_c.sqrt, "Sqrt")
exp = _unary(_c.exp, "Exp")
log = _unary(_c.log, "Log")
tanh = _unary(_c.tanh, "Tanh")
sigmoid = _unary(_c.sigmoid, "Sigmoid")
logical_not = _unary(_c.logical_not, "LogicalNot")
sign = _unary(_c.sign, "Sign")
floor = _unary(_c.floor, "Floor")
ceil = _unary(_c.ceil, "Ceil")
neg = negative
abs = _unary(_c.abs, "Abs")  # noqa: A001 - TF's name
_round = _unary(_c.round, "Round")
sin = _unary(_c.sin, "Sin")
cos = _unary(_c.cos, "Cos")
log1p = _unary(_c.log1p, "Log1p")
expm1 = _unary(_c.expm1, "Expm1")
is_nan = _unary(_c.is_nan, "IsNan")
is_inf = _unary(_c.is_inf, "IsInf")
is_finite = _unary(_c.is_finite, "IsFinite")
stop_gradient = _unary(_c.stop_gradient, "StopGradient")


def round(x, name=None):  # noqa: A001 - TF's name
    """Half to even, as TF's (and numpy's) round; an integer tensor is returned as it is."""
    x = convert_to_tensor(x)
    return x if x.dtype.is_integer else _round(x, name)

add = _binary(_c.add, "Add", "Add")
subtract = _binary(_c.sub, "Sub", "Sub")
multiply = _binary(_c.mul, "Mul", "Mul")
equal = _binary(_c.equal, "Equal", "Equal")
less = _binary(_c.less, "Less", "Less")
less_equal = _binary(_c.less_equal, "LessEqual", "LessEqual")
greater = _binary(_c.greater, "Greater", "Greater")
greater_equal = _binary(_c.greater_equal, "GreaterEqual", "GreaterEqual")
logical_and = _binary(_c.logical_and, "LogicalAnd", "LogicalAnd")
logical_or = _binary(_c.logical_or, "LogicalOr", "LogicalOr")
not_equal = _binary(_c.not_equal, "NotEqual", "NotEqual")
maximum = _binary(_c.maximum, "Maximum", "Maximum")
minimum = _binary(_c.minimum, "Minimum", "Minimum")
pow = _binary(_c.pow, "Pow", "Pow")  # noqa: A001 - TF's name
squared_difference = _binary(_c.squared_difference, "SquaredDifference", "SquaredDifference")
floordiv = _binary(_c.floor_div, "FloorDiv", "FloorDiv")
floormod = _binary(_c.floor_mod, "FloorMod", "FloorMod")
floor_div = floordiv
mod = floormod
sub = subtract
mul = multiply


def truediv(x, y, name=None):
    """x / y; integers are divided as float64, as TF1's truediv does for int32 and int64."""
    graph, x, y = _operands(x, y, "RealDiv")
    if x.dtype.is_integer:
        x, y = cast(x, dtypes.float64), cast(y, dtypes.float64)
    return _tensor_in(graph, _c.div(x._output, y._output, name or "truediv"))


divide = truediv


def div(x, y, name=None):
    """TF1's div (Python 2's /): truediv for floating tensors, floor division for integers."""
    graph, x, y = _operands(x, y, "Div")
    if not x.dtype.is_floating:
        return _tensor_in(graph, _c.floor_div(x._output, y._output, name or "div"))
    return _tensor_in(graph, _c.div(x._output, y._output, name or "div"))


def realdiv(x, y, name=None):
    graph, x, y = _operands(x, y, "RealDiv")
    if not x.dtype.is_floating:
        raise TypeError("realdiv of %s: RealDiv takes floating tensors (floordiv divides "
                        "integers)" % x.dtype.name)
    return _tensor_in(graph, _c.div(x._output, y._output, name or "RealDiv"))


def add_n(inputs, name=None):
    if not inputs:
        raise ValueError("inputs must be a non-empty list of tensors.")
    graph = _same_graph(inputs, "AddN")
    tensors = [convert_to_tensor(x, graph=graph) for x in inputs]
    if len(tensors) == 1:
        return identity(tensors[0], name=name)
    return _tensor_in(graph, _c.make_op(graph._c, "AddN", name or "AddN",
                                        [t._output for t in tensors]))


def cast(x, dtype, name=None):
    x = convert_to_tensor(x)
    dtype = dtypes.as_dtype(dtype)
    if x.dtype == dtype:
        return x
    return _tensor_in(x.graph, _c.cast(x._output, dtype.name, name or "Cast"))


to_float = lambda x, name="ToFloat": cast(x, dtypes.float32, name)  # noqa: E731 - TF1's alias
to_int32 = lambda x, name="ToInt32": cast(x, dtypes.int32, name)    # noqa: E731
to_int64 = lambda x, name="ToInt64": cast(x, dtypes.int64, name)    # noqa: E731


def gather(params, indices, validate_indices=None, name=None, axis=0):
    params = convert_to_tensor(params)
    if not _is_tensor_like(indices):
        indices = convert_to_tensor(indices, dtype=dtypes.int32, graph=params.graph)
    _same_graph((params, indices), "Gather")
    return _tensor_in(params.graph, _c.gather(params._output, convert_to_tensor(indices)._output,
                                              int(axis), name or "Gather"))


def _gather_along(x, indices, axis):
    """gather(x, indices, axis=axis) for the ops composed of Gathers (indexing by a tensor,
    tile, pad), differentiable along every axis: Gather's gradient is along axis 0 only
    (graph/sparse_ops.cpp), so another axis is moved to the front and back by Transposes, as
    TF's gradient of Gather does it."""
    rank = x.shape.ndims
    index_rank = indices.shape.ndims if _is_tensor_like(indices) else np.ndim(indices)
    if axis == 0 or rank is None or index_rank is None:
        return gather(x, indices, axis=axis)
    front = [axis] + [a for a in builtins.range(rank) if a != axis]
    moved = gather(transpose(x, front), indices)
    back = list(builtins.range(index_rank, index_rank + axis)) + \
        list(builtins.range(index_rank)) + \
        list(builtins.range(index_rank + axis, rank - 1 + index_rank))
    if back == list(builtins.range(len(back))):
        return moved
    return transpose(moved, back)


# --- linear algebra, reductions, shapes ----------------------------------------------------------


def matmul(a, b, transpose_a=False, transpose_b=False, adjoint_a=False, adjoint_b=False,
           a_is_sparse=False, b_is_sparse=False, name=None):
    graph, a, b = _operands(a, b, "MatMul")
    # Adjoint is the transpose for the real dtypes actorflow has.
    return _tensor_in(graph, _c.matmul(a._output, b._output, bool(transpose_a or adjoint_a),
                                       bool(transpose_b or adjoint_b), name or "MatMul"))


def _axes(axis, reduction_indices):
    if axis is None:
        axis = reduction_indices
    return [] if axis is None else _int_list(axis, "axis")


def _reduction(native, default_name):
    def op(input_tensor, axis=None, keepdims=None, name=None, reduction_indices=None,
           keep_dims=None):
        x = convert_to_tensor(input_tensor)
        keep = bool(keepdims if keepdims is not None else keep_dims)
        return _tensor_in(x.graph, native(x._output, _axes(axis, reduction_indices), keep,
                                          name or default_name))
    op.__name__ = default_name
    return op


reduce_sum = _reduction(_c.reduce_sum, "Sum")
reduce_mean = _reduction(_c.reduce_mean, "Mean")
reduce_max = _reduction(_c.reduce_max, "Max")
reduce_min = _reduction(_c.reduce_min, "Min")
reduce_prod = _reduction(_c.reduce_prod, "Prod")


def _arg_extremum(native, default_name):
    def op(input, axis=None, name=None, dimension=None, output_type=dtypes.int64):  # noqa: A002
        x = convert_to_tensor(input)
        axis = axis if axis is not None else (dimension if dimension is not None else 0)
        result = _tensor_in(x.graph, native(x._output, int(axis), name or default_name))
        return cast(result, output_type)
    op.__name__ = default_name
    return op


def cumsum(x, axis=0, exclusive=False, reverse=False, name=None):
    """Running sums along `axis` (a Python int: actorflow's Cumsum keeps it as an attribute)."""
    x = convert_to_tensor(x)
    if isinstance(axis, (Tensor, Variable)):
        raise TypeError("tf.cumsum's axis must be a Python int: actorflow's Cumsum keeps it as "
                        "an attribute")
    return _tensor_in(x.graph, _c.cumsum(x._output, int(axis), bool(exclusive), bool(reverse),
                                         name or "Cumsum"))


argmax = _arg_extremum(_c.argmax, "ArgMax")
argmin = _arg_extremum(_c.argmin, "ArgMin")
arg_max = argmax
arg_min = argmin


def reshape(tensor, shape, name=None):
    x = convert_to_tensor(tensor)
    return _tensor_in(x.graph, _c.reshape(x._output, _int_list(shape, "reshape's shape"),
                                          name or "Reshape"))


def transpose(a, perm=None, name="transpose", conjugate=False):
    """a with its axes permuted: output axis i is input axis perm[i]; without perm the axes
    are reversed (for any rank, known or not). perm is a list of Python ints here (actorflow's
    Transpose takes it as an attribute); the dtypes are real, so conjugate changes nothing."""
    x = convert_to_tensor(a)
    axes = [] if perm is None else _int_list(perm, "transpose's perm")
    return _tensor_in(x.graph, _c.transpose(x._output, axes, name or "transpose"))


def _index_type(out_type, op_name):
    out_type = dtypes.as_dtype(out_type)
    if out_type not in (dtypes.int32, dtypes.int64):
        raise TypeError("%s: out_type must be int32 or int64, not %s" % (op_name, out_type.name))
    return out_type.name


def shape(input, name=None, out_type=dtypes.int32):  # noqa: A002 - TF's name
    """input's dimensions when the step runs, a 1-D int32 (or int64) tensor."""
    x = convert_to_tensor(input)
    return _tensor_in(x.graph, _c.shape(x._output, _index_type(out_type, "shape"), name or "Shape"))


def size(input, name=None, out_type=dtypes.int32):  # noqa: A002 - TF's name
    """input's number of elements when the step runs, an int32 (or int64) scalar."""
    x = convert_to_tensor(input)
    return _tensor_in(x.graph, _c.size(x._output, _index_type(out_type, "size"), name or "Size"))


def rank(input, name=None):  # noqa: A002 - TF's name
    """input's number of dimensions when the step runs, an int32 scalar."""
    x = convert_to_tensor(input)
    return _tensor_in(x.graph, _c.rank(x._output, name or "Rank"))


def concat(values, axis, name="concat"):
    if not values:
        raise ValueError("concat needs at least one value")
    graph = _same_graph(values, "ConcatV2")
    tensors = [convert_to_tensor(v, graph=graph) for v in values]
    return _tensor_in(graph, _c.concat([t._output for t in tensors], int(axis), name or "concat"))


# --- indexing ------------------------------------------------------------------------------------------


def strided_slice(input_, begin, end, strides=None, begin_mask=0, end_mask=0, ellipsis_mask=0,
                  new_axis_mask=0, shrink_axis_mask=0, var=None, name=None):
    """tf.strided_slice: one StridedSlice node (graph/strided_slice.hpp). begin, end and strides
    are Python ints here: actorflow keeps them as attributes, so shapes are known when the
    graph is built."""
    x = convert_to_tensor(input_)
    begin = _int_list(begin, "strided_slice's begin")
    end = _int_list(end, "strided_slice's end")
    strides = [1] * len(begin) if strides is None else _int_list(strides, "strided_slice's strides")
    return _tensor_in(x.graph, _c.strided_slice(
        x._output, begin, end, strides, int(begin_mask), int(end_mask), int(ellipsis_mask),
        int(new_axis_mask), int(shrink_axis_mask), name or "strided_slice"))


def _slice_bound(value, what, key):
    if value is None or isinstance(value, (int, np.integer)):
        return value
    raise TypeError("slice %s must be a Python int or None here (actorflow's StridedSlice takes "
                    "its bounds as attributes), got %r in %r" % (what, value, key))


def _slice(tensor, key):
    """tensor[key], TF's way: ints, slices, `...` and tf.newaxis make one StridedSlice; an
    integer tensor in the key is a Gather along its axis of that slice."""
    keys = key if isinstance(key, tuple) else (key,)
    begin, end, strides = [], [], []
    masks = {"begin": 0, "end": 0, "ellipsis": 0, "new_axis": 0, "shrink": 0}
    gathers = []  # (output axis of the slice, integer tensor)
    out_axis = 0  # None once an ellipsis of unknown extent precedes
    rank = tensor.shape.ndims
    indexing = sum(1 for k in keys if k is not None and k is not Ellipsis)
    for i, k in enumerate(keys):
        bit = 1 << i
        start, stop, step = 0, 0, 1
        if k is Ellipsis:
            if masks["ellipsis"]:
                raise IndexError("an index can only have a single ellipsis ('...'), got %r"
                                 % (key,))
            masks["ellipsis"] |= bit
            out_axis = None if rank is None or out_axis is None else \
                out_axis + builtins.max(0, rank - indexing)
        elif k is None:
            masks["new_axis"] |= bit
            out_axis = None if out_axis is None else out_axis + 1
        elif isinstance(k, (bool, np.bool_)):
            raise TypeError("a bool is not a valid index, got %r in %r" % (k, key))
        elif isinstance(k, (int, np.integer)):
            masks["shrink"] |= bit
            start, stop = int(k), int(k) + 1
        elif isinstance(k, builtins.slice):
            start = _slice_bound(k.start, "start", key)
            stop = _slice_bound(k.stop, "stop", key)
            step = _slice_bound(k.step, "step", key)
            if step == 0:
                raise ValueError("slice step cannot be zero, in %r" % (key,))
            if start is None:
                masks["begin"] |= bit
                start = 0
            if stop is None:
                masks["end"] |= bit
                stop = 0
            step = 1 if step is None else int(step)
            out_axis = None if out_axis is None else out_axis + 1
        elif isinstance(k, (Tensor, Variable)) and convert_to_tensor(k).dtype.is_integer:
            if out_axis is None:
                raise ValueError("indexing %r with a tensor after ... needs its rank to be known"
                                 % (tensor,))
            masks["begin"] |= bit
            masks["end"] |= bit
            gathers.append((out_axis, convert_to_tensor(k)))
            out_axis += 1
        else:
            raise TypeError("Only integers, slices (`:`), ellipsis (`...`), tf.newaxis (`None`) "
                            "and integer tensors are valid indices, got %r" % (k,))
        begin.append(int(start))
        end.append(int(stop))
        strides.append(step)
    result = strided_slice(tensor, begin, end, strides, masks["begin"], masks["end"],
                           masks["ellipsis"], masks["new_axis"], masks["shrink"])
    for axis, index in reversed(gathers):
        result = _gather_along(result, index, axis)
    return result


def _coordinates(condition, name):
    """Where: the int64 [count, rank] coordinates of condition's true elements."""
    condition = convert_to_tensor(condition)
    if condition.dtype != dtypes.bool:
        raise TypeError("tf.where's condition must be bool, got %s" % condition.dtype.name)
    return _tensor_in(condition.graph, _c.where(condition._output, name or "Where"))


def where(condition, x=None, y=None, name=None):
    """TF1's where: x where condition is true, else y. A rank-1 condition over tensors of higher
    rank picks whole rows, as TF1's Select does; otherwise the shapes broadcast (SelectV2). With
    the condition alone, the coordinates of its true elements (int64 [count, rank])."""
    if x is None and y is None:
        return _coordinates(condition, name)
    if x is None or y is None:
        raise ValueError("tf.where needs both x and y, or neither")
    graph, x, y = _operands(x, y, "Select")
    condition = convert_to_tensor(condition, graph=graph)
    if condition.dtype != dtypes.bool:
        raise TypeError("tf.where's condition must be bool, got %s" % condition.dtype.name)
    rank = x.shape.ndims
    if condition.shape.ndims == 1 and rank is not None and rank > 1:
        with _scoped("Select", name):
            rows = reshape(condition, [-1] + [1] * (rank - 1))
            return _tensor_in(graph, _c.select(rows._output, x._output, y._output, "Select"))
    return _tensor_in(graph, _c.select(condition._output, x._output, y._output,
                                       name or "Select"))


def where_v2(condition, x=None, y=None, name=None):
    """TF2's where: condition, x and y broadcast together."""
    if x is None and y is None:
        return _coordinates(condition, name)
    if x is None or y is None:
        raise ValueError("tf.where_v2 needs both x and y, or neither")
    graph, x, y = _operands(x, y, "SelectV2")
    condition = convert_to_tensor(condition, graph=graph)
    if condition.dtype != dtypes.bool:
        raise TypeError("tf.where_v2's condition must be bool, got %s" % condition.dtype.name)
    return _tensor_in(graph, _c.select(condition._output, x._output, y._output,
                                       name or "SelectV2"))


# --- differentiation -------------------------------------------------------------------------------


def gradients(ys, xs, grad_ys=None, name="gradients", colocate_gradients_with_ops=False,
              gate_gradients=False, aggregation_method=None, stop_gradients=None):
    """d(sum of ys)/dx for each x of xs; None where ys do not depend on x."""
    if name != "gradients":
        raise ValueError("gradients(name=%r): actorflow's gradients always go under the scope "
                         "'gradients'" % name)
    if aggregation_method is not None or stop_gradients is not None:
        raise ValueError("gradients: aggregation_method and stop_gradients are not supported yet")
    ys = list(ys) if isinstance(ys, (list, tuple)) else [ys]
    xs = list(xs) if isinstance(xs, (list, tuple)) else [xs]
    grad_ys = [] if grad_ys is None else (list(grad_ys) if isinstance(grad_ys, (list, tuple))
                                          else [grad_ys])
    graph = _same_graph(ys + xs + grad_ys, "gradients")
    y_outputs = [convert_to_tensor(y)._output for y in ys]
    x_outputs = [x._handle.ref if isinstance(x, Variable) else convert_to_tensor(x)._output
                 for x in xs]
    seed_outputs = [convert_to_tensor(g, dtype=y.dtype if not _is_tensor_like(g) else None,
                                      graph=graph)._output
                    for g, y in zip(grad_ys, [convert_to_tensor(y) for y in ys])]
    grads = _c.gradients(y_outputs, x_outputs, seed_outputs, bool(colocate_gradients_with_ops))
    graph._built(None)
    # A gather's or embedding_lookup's table gets an IndexedSlices (its rows), as in TF.
    return [IndexedSlices._of(graph._tensor(g)) for g in grads]


# --- composed of the ops above (actorflow has no kernel of their own) ------------------------------
# Each is a few existing ops under a name scope of the TF op's name; gradients follow from theirs.
# abs, pow, round and range are TF's names and shadow the builtins in this module: code here
# that wants the builtins spells them builtins.abs, ....


def _scoped(default_name, name):
    return name_scope(name or default_name)


def reciprocal(x, name=None):
    with _scoped("Reciprocal", name):
        x = convert_to_tensor(x)
        return truediv(constant(1, dtype=x.dtype), x)


def rsqrt(x, name=None):
    with _scoped("Rsqrt", name):
        return reciprocal(sqrt(x))


def logical_xor(x, y, name=None):
    with _scoped("LogicalXor", name):
        return logical_and(logical_or(x, y), logical_not(logical_and(x, y)))


def clip_by_value(t, clip_value_min, clip_value_max, name=None):
    with _scoped("clip_by_value", name):
        return minimum(maximum(t, clip_value_min), clip_value_max)


def reduce_logsumexp(input_tensor, axis=None, keepdims=None, name=None, reduction_indices=None,
                     keep_dims=None):
    """log(sum(exp(x))) over `axis`, shifted by the maximum so large inputs do not overflow (the
    shift's gradient stopped; a non-finite maximum shifts by 0, as TF does)."""
    keep = bool(keepdims if keepdims is not None else keep_dims)
    with _scoped("ReduceLogSumExp", name):
        x = convert_to_tensor(input_tensor)
        top = stop_gradient(reduce_max(x, axis, keepdims=True, reduction_indices=reduction_indices))
        top = where_v2(is_finite(top), top, zeros_like(top))
        summed = log(reduce_sum(exp(x - top), axis, keepdims=True,
                                reduction_indices=reduction_indices)) + top
        if keep:
            return summed
        return reduce_sum(summed, axis, reduction_indices=reduction_indices)


def boolean_mask(tensor, mask, name="boolean_mask", axis=None):
    """The elements (or slices) of `tensor` where `mask` is true: tensor's leading mask.ndims
    dimensions (from `axis`, default 0) flattened and gathered at Where's positions, as TF's."""
    with _scoped("boolean_mask", name):
        x = convert_to_tensor(tensor)
        mask = convert_to_tensor(mask, graph=x.graph)
        if mask.dtype != dtypes.bool:
            raise TypeError("boolean_mask's mask must be bool, got %s" % mask.dtype.name)
        k = mask.shape.ndims
        dims = x.shape.as_list() if x.shape.ndims is not None else None
        if k is None or k == 0 or dims is None:
            raise ValueError("boolean_mask needs the ranks of tensor and mask known and a mask "
                             "of rank 1 or more, got %s and %s" % (x.shape, mask.shape))
        axis = 0 if axis is None else int(axis) % len(dims)
        if axis + k > len(dims) or not mask.shape.is_compatible_with(
                dtypes.TensorShape(dims[axis:axis + k])):
            raise ValueError("boolean_mask: a mask of shape %s does not fit dimensions %d.. of "
                             "shape %s" % (mask.shape, axis, x.shape))
        outer, inner = dims[:axis], dims[axis + k:]
        if None in outer or None in inner:
            raise ValueError("boolean_mask needs tensor's dimensions outside the mask known (a "
                             "Reshape takes its shape as an attribute), got %s" % x.shape)
        flat = reshape(x, outer + [-1] + inner)
        positions = reshape(_coordinates(reshape(mask, [-1]), None), [-1])
        return gather(flat, positions, axis=axis)


def _values_of(t):
    return t.values if isinstance(t, IndexedSlices) else convert_to_tensor(t)


def global_norm(t_list, name=None):
    """sqrt(sum of every element squared) over the tensors of t_list (None skipped; one dtype)."""
    with _scoped("global_norm", name):
        squares = [reduce_sum(square(_values_of(t))) for t in t_list if t is not None]
        if not squares:
            raise ValueError("global_norm: t_list holds no tensor")
        return sqrt(add_n(squares))


def _scaled(t, scale):
    if isinstance(t, IndexedSlices):  # its rows scaled, still sparse for the optimizers
        return IndexedSlices(t.values * cast(scale, t.values.dtype), t.indices, t._dense_shape_list)
    t = convert_to_tensor(t)
    return identity(t * cast(scale, t.dtype))


def clip_by_global_norm(t_list, clip_norm, use_norm=None, name=None):
    """(t_list scaled by clip_norm / max(global_norm, clip_norm), the global norm), as TF: an
    infinite or NaN norm gives NaN tensors. None entries stay None; IndexedSlices stay sparse."""
    if isinstance(t_list, (Tensor, Variable, IndexedSlices)) or not hasattr(t_list, "__iter__"):
        raise TypeError("clip_by_global_norm: t_list must be a sequence of tensors")
    t_list = list(t_list)
    with _scoped("clip_by_global_norm", name):
        norm = global_norm(t_list) if use_norm is None else convert_to_tensor(use_norm)
        clip = cast(convert_to_tensor(clip_norm), norm.dtype)
        scale = clip * minimum(reciprocal(norm), reciprocal(clip))
        # A non-finite norm makes every tensor NaN, as TF does, instead of silently 0 or inf.
        scale = where_v2(is_finite(norm), scale, constant(float("nan"), dtype=norm.dtype))
        return [None if t is None else _scaled(t, scale) for t in t_list], norm


def clip_by_norm(t, clip_norm, axes=None, name=None):
    """t scaled so its L2 norm over `axes` (every axis by default) is at most clip_norm."""
    with _scoped("clip_by_norm", name):
        values = _values_of(t)
        squared = reduce_sum(square(values), axes, keepdims=True)
        clip = cast(convert_to_tensor(clip_norm), values.dtype)
        # Divide by max(norm, clip) where the norm is positive; an all-zero t stays as it is.
        positive = squared > 0
        norm = sqrt(where_v2(positive, squared, ones_like(squared)))
        scaled = values * clip / maximum(where_v2(positive, norm, clip), clip)
        if isinstance(t, IndexedSlices):
            return IndexedSlices(scaled, t.indices, t._dense_shape_list)
        return identity(scaled)


def _static_dims(x, what):
    """x's dimensions, with at most one unknown (reshape takes one -1)."""
    dims = x.shape.as_list() if x.shape.ndims is not None else None
    if dims is None or sum(d is None for d in dims) > 1:
        raise ValueError("%s of %r needs its shape known but for one dimension (actorflow's "
                         "Reshape takes its shape as an attribute), got %s"
                         % (what, x.name, x.shape))
    return [-1 if d is None else d for d in dims]


def expand_dims(input, axis=None, name=None, dim=None):  # noqa: A002
    """`input` with a dimension of 1 inserted at `axis`, as a reshape."""
    x = convert_to_tensor(input)
    axis = axis if axis is not None else dim
    if axis is None:
        raise ValueError("expand_dims needs axis")
    dims = _static_dims(x, "expand_dims")
    axis = int(axis)
    if not -len(dims) - 1 <= axis <= len(dims):
        raise ValueError("expand_dims: axis %d is out of range for rank %d" % (axis, len(dims)))
    if axis < 0:
        axis += len(dims) + 1
    return reshape(x, dims[:axis] + [1] + dims[axis:], name=name or "ExpandDims")


def squeeze(input, axis=None, name=None, squeeze_dims=None):  # noqa: A002
    """`input` without its dimensions of 1 (those of `axis`), as a reshape."""
    x = convert_to_tensor(input)
    axis = axis if axis is not None else squeeze_dims
    dims = _static_dims(x, "squeeze")
    if axis is None:
        if -1 in dims:
            raise ValueError("squeeze of %r without axis needs a fully known shape, got %s"
                             % (x.name, x.shape))
        keep = [d for d in dims if d != 1]
    else:
        axes = {int(a) % len(dims) for a in (axis if isinstance(axis, (list, tuple)) else [axis])}
        for a in axes:
            if dims[a] != 1:
                raise ValueError("squeeze: dimension %d of %r is %s, not 1"
                                 % (a, x.name, x.shape.as_list()[a]))
        keep = [d for i, d in enumerate(dims) if i not in axes]
    return reshape(x, keep, name=name or "Squeeze")


def stack(values, axis=0, name="stack"):
    """The values (of one shape) stacked along a new dimension `axis`."""
    if not values:
        raise ValueError("stack needs at least one value")
    with _scoped("stack", name):
        graph = _same_graph(values, "stack")
        tensors = [convert_to_tensor(v, graph=graph) for v in values]
        return concat([expand_dims(t, axis) for t in tensors], axis)


def _axis_of(x, axis, what):
    """`axis` (negative counts from the end) of x, whose rank must be known."""
    rank = x.shape.ndims
    if rank is None:
        raise ValueError("%s of %r needs its rank to be known" % (what, x.name))
    axis = int(axis)
    if not -rank <= axis < rank:
        raise ValueError("%s: axis %d is out of range for %r of rank %d" % (what, axis, x.name, rank))
    return axis % rank


def _known_dim(x, axis, what):
    size = x.shape[axis]
    if size is None:
        raise ValueError("%s needs dimension %d of %r to be known, got shape %s (its pieces "
                         "are fixed when the graph is built)" % (what, axis, x.name, x.shape))
    return size


def _take_along(x, axis, start, stop, shrink=False):
    """x[..., start:stop, ...] on axis `axis` (0 <= axis < rank), one StridedSlice; with shrink,
    x at index `start` of that axis, which goes away."""
    whole = (1 << axis) - 1
    return strided_slice(x, [0] * axis + [start], [0] * axis + [stop], [1] * (axis + 1),
                         begin_mask=whole, end_mask=whole,
                         shrink_axis_mask=(1 << axis) if shrink else 0)


def _positions(x, indices, axis):
    """x's slices at the given positions along axis (one Gather), or x itself when they are
    all of the axis in order."""
    indices = np.asarray(indices, dtype=np.int32)
    if x.shape[axis] == len(indices) and np.array_equal(indices, np.arange(len(indices))):
        return x
    return _gather_along(x, indices, axis)


def unstack(value, num=None, axis=0, name="unstack"):
    """The num slices of value along axis, each without that axis (StridedSlices)."""
    x = convert_to_tensor(value)
    axis = _axis_of(x, axis, "unstack")
    count = x.shape[axis] if num is None else int(num)
    if count is None:
        raise ValueError("Cannot infer num from shape %s" % x.shape)
    if x.shape[axis] is not None and count != x.shape[axis]:
        raise ValueError("unstack: num %d differs from dimension %d of %r, %d"
                         % (count, axis, x.name, x.shape[axis]))
    with _scoped("unstack", name):
        return [_take_along(x, axis, i, i + 1, shrink=True) for i in builtins.range(count)]


def split(value, num_or_size_splits, axis=0, num=None, name="split"):
    """value cut along axis into num_or_size_splits equal pieces, or pieces of the listed sizes
    (one may be -1: the rest); each piece is a StridedSlice."""
    x = convert_to_tensor(value)
    axis = _axis_of(x, axis, "split")
    if isinstance(num_or_size_splits, (Tensor, Variable)):
        raise TypeError("split takes Python ints for num_or_size_splits here, not the tensor %r"
                        % (num_or_size_splits,))
    total = x.shape[axis]
    if isinstance(num_or_size_splits, (int, np.integer)):
        count = int(num_or_size_splits)
        total = _known_dim(x, axis, "split")
        if count <= 0 or total % count != 0:
            raise ValueError("split: dimension %d of %r (%d) does not divide into %d pieces"
                             % (axis, x.name, total, count))
        sizes = [total // count] * count
    else:
        sizes = _int_list(num_or_size_splits, "split's size_splits")
        if sizes.count(-1) > 1 or any(s < -1 for s in sizes):
            raise ValueError("split: sizes %r may hold one -1 and no other negative size" % sizes)
        if -1 in sizes or total is not None:
            total = _known_dim(x, axis, "split")
            known = sum(s for s in sizes if s >= 0)
            if -1 in sizes:
                sizes[sizes.index(-1)] = total - known
            if sum(sizes) != total or min(sizes) < 0:
                raise ValueError("split: sizes %r do not add up to dimension %d of %r, %d"
                                 % (sizes, axis, x.name, total))
    with _scoped("split", name):
        pieces, start = [], 0
        for size in sizes:
            pieces.append(_take_along(x, axis, start, start + size))
            start += size
        return pieces


def slice(input_, begin, size, name=None):  # noqa: A001 - TF's name
    """input_[begin[i] : begin[i] + size[i]] on every axis (size -1: to the end), one
    StridedSlice."""
    x = convert_to_tensor(input_)
    begin = _int_list(begin, "slice's begin")
    size = _int_list(size, "slice's size")
    rank = x.shape.ndims
    if len(begin) != len(size) or (rank is not None and len(begin) != rank):
        raise ValueError("slice of %r (shape %s) needs begin and size of its rank, got %r and %r"
                         % (x.name, x.shape, begin, size))
    to_end = 0
    for axis, (start, extent) in enumerate(zip(begin, size)):
        dim = x.shape[axis] if rank is not None else None
        if extent == -1:
            to_end |= 1 << axis
        if start < 0 or extent < -1 or (dim is not None and start + builtins.max(extent, 0) > dim):
            raise ValueError("slice: begin %d and size %d are out of range for dimension %d "
                             "of %r (shape %s)" % (start, extent, axis, x.name, x.shape))
    return strided_slice(x, begin, [b + builtins.max(e, 0) for b, e in zip(begin, size)],
                         end_mask=to_end, name=name or "Slice")


def tile(input, multiples, name=None):  # noqa: A002 - TF's name
    """input repeated multiples[i] times along each axis i: a Gather of the repeated positions
    per axis with a multiple other than 1 (those axes must have a known size)."""
    x = convert_to_tensor(input)
    multiples = _int_list(multiples, "tile's multiples")
    if x.shape.ndims is None or len(multiples) != x.shape.ndims:
        raise ValueError("tile of %r (shape %s): multiples %r must have its rank"
                         % (x.name, x.shape, multiples))
    if any(m < 0 for m in multiples):
        raise ValueError("tile: multiples %r must be non-negative" % (multiples,))
    with _scoped("Tile", name):
        result = x
        for axis, times in enumerate(multiples):
            if times == 1:
                continue
            dim = _known_dim(x, axis, "tile")
            result = _gather_along(result, np.tile(np.arange(dim, dtype=np.int32), times), axis)
        return identity(result) if result is x else result


def pad(tensor, paddings, mode="CONSTANT", name=None, constant_values=0):
    """tensor with paddings[i] = [before, after] elements added on each side of axis i. CONSTANT
    concatenates filled blocks (the shape must be known); REFLECT and SYMMETRIC gather mirrored
    positions (the padded axes' sizes must be known)."""
    x = convert_to_tensor(tensor)
    paddings = np.asarray(paddings)
    rank = x.shape.ndims
    if rank is None or paddings.shape != (rank, 2):
        raise ValueError("pad of %r (shape %s): paddings must be [rank, 2], got %r"
                         % (x.name, x.shape, paddings.tolist()))
    paddings = [(int(a), int(b)) for a, b in paddings]
    if any(a < 0 or b < 0 for a, b in paddings):
        raise ValueError("pad: paddings %r must be non-negative" % (paddings,))
    mode = mode.upper()
    if mode not in ("CONSTANT", "REFLECT", "SYMMETRIC"):
        raise ValueError("pad: mode %r is none of CONSTANT, REFLECT, SYMMETRIC" % (mode,))
    with _scoped("Pad", name):
        result = x
        for axis, (before, after) in enumerate(paddings):
            if before == 0 and after == 0:
                continue
            if mode == "CONSTANT":
                dims = result.shape.as_list() if result.shape.ndims is not None else None
                if dims is None or None in dims:
                    raise ValueError("pad(mode='CONSTANT') of %r needs its shape known, got %s"
                                     % (x.name, x.shape))
                parts = []
                for count in (before, after):
                    block = list(dims)
                    block[axis] = count
                    parts.append(fill(block, convert_to_tensor(constant_values, dtype=x.dtype))
                                 if count else None)
                result = concat([p for p in (parts[0], result, parts[1]) if p is not None], axis)
                continue
            dim = _known_dim(x, axis, "pad(mode=%r)" % mode)
            edge = 1 if mode == "REFLECT" else 0
            if before > dim - edge or after > dim - edge:
                raise ValueError("pad: paddings %r are too large for dimension %d of %r (%d) in "
                                 "mode %s" % ((before, after), axis, x.name, dim, mode))
            positions = list(builtins.range(before - 1 + edge, edge - 1, -1)) + \
                list(builtins.range(dim)) + \
                list(builtins.range(dim - 1 - edge, dim - 1 - edge - after, -1))
            result = _positions(result, positions, axis)
        return identity(result) if result is x else result


# --- sparse values (graph/sparse_ops.hpp) --------------------------------------------------------------


def _int_ids(x, graph, what):
    if not _is_tensor_like(x):
        x = convert_to_tensor(x, dtype=dtypes.int32, graph=graph)
    x = convert_to_tensor(x)
    if x.dtype not in (dtypes.int32, dtypes.int64):
        raise TypeError("%s must be int32 or int64, not %s" % (what, x.dtype.name))
    return x


def unique(x, out_idx=dtypes.int32, name=None):
    """(y, idx): the distinct values of vector x in order of first appearance, and each
    element's position among them (x == y[idx])."""
    if dtypes.as_dtype(out_idx) != dtypes.int32:
        raise TypeError("unique: actorflow's idx is int32, not %s" % dtypes.as_dtype(out_idx).name)
    x = convert_to_tensor(x)
    y, idx = x.graph._built(_c.unique(x._output, name or "Unique"))
    return _Unique(x.graph._tensor(y), x.graph._tensor(idx))


import collections as _collections  # noqa: E402 - beside its one use
_Unique = _collections.namedtuple("Unique", ["y", "idx"])


def unsorted_segment_sum(data, segment_ids, num_segments, name=None):
    """out[k] = the sum of data[i] over the i with segment_ids[i] == k, k < num_segments."""
    data = convert_to_tensor(data)
    graph = data.graph
    ids = _int_ids(segment_ids, graph, "unsorted_segment_sum's segment_ids")
    count = _int_ids(num_segments, graph, "unsorted_segment_sum's num_segments")
    _same_graph((data, ids, count), "UnsortedSegmentSum")
    return _tensor_in(graph, _c.unsorted_segment_sum(data._output, ids._output, count._output,
                                                     name or "UnsortedSegmentSum"))


def _scatter(native, default_name):
    def op(ref, indices, updates, use_locking=False, name=None):
        if not isinstance(ref, Variable):
            raise TypeError("%s updates a tf.Variable, not %r" % (default_name, ref))
        graph = ref.graph
        ids = _int_ids(indices, graph, "%s's indices" % default_name)
        values = updates if _is_tensor_like(updates) else \
            convert_to_tensor(updates, dtype=ref.dtype, graph=graph)
        values = convert_to_tensor(values)
        _same_graph((ref, ids, values), default_name)
        return _tensor_in(graph, native(ref._handle, ids._output, values._output,
                                        name or default_name))
    op.__name__ = default_name
    return op


scatter_add = _scatter(_c.scatter_add, "ScatterAdd")
scatter_sub = _scatter(_c.scatter_sub, "ScatterSub")
scatter_update = _scatter(_c.scatter_update, "ScatterUpdate")


def embedding_lookup(params, ids, partition_strategy="mod", name=None, validate_indices=True,
                     max_norm=None):
    """The rows of `params` at `ids` ([ids..., dim]). For one Variable the ids are made unique
    on the worker and only those rows come from the table's device; its gradient is an
    IndexedSlices of those rows. A plain Tensor is gathered."""
    if partition_strategy not in ("mod", "div"):
        raise ValueError("embedding_lookup: partition_strategy is 'mod' or 'div', not %r"
                         % (partition_strategy,))
    table_name = getattr(params, "name", None)
    if hasattr(params, "_get_variable_list"):
        params = params._get_variable_list()
    elif isinstance(params, (list, tuple)):
        table_name = None
    if isinstance(params, (list, tuple)):
        if len(params) == 1:
            params = params[0]
        elif all(isinstance(p, Variable) for p in params):
            return _partitioned_lookup(list(params), table_name, ids, partition_strategy,
                                       max_norm, name or "embedding_lookup")
        else:
            raise NotImplementedError("embedding_lookup of a list of %d tensors: actorflow "
                                      "takes a list of Variables (a partitioned table) or one "
                                      "tensor" % len(params))
    if isinstance(params, Variable):
        ids = _int_ids(ids, params.graph, "embedding_lookup's ids")
        _same_graph((params, ids), "embedding_lookup")
        if max_norm is not None:
            return _tensor_in(params.graph, _c.embedding_lookup_clipped(
                params._handle, ids._output, float(max_norm), name or "embedding_lookup"))
        return _tensor_in(params.graph, _c.embedding_lookup(params._handle, ids._output,
                                                            name or "embedding_lookup"))
    if max_norm is not None:
        raise ValueError("embedding_lookup(max_norm=...) of a tensor: actorflow clips the rows "
                         "of a Variable only")
    return gather(params, ids, name=name or "embedding_lookup")


def _partitioned_lookup(shards, table_name, ids, partition_strategy, max_norm, name):
    """The rows at `ids` of a table stored as `shards` along axis 0 (each the same dtype and
    row shape)."""
    graph = _same_graph(shards, "embedding_lookup")
    row_shape = shards[0].shape.as_list()[1:]
    for shard in shards:
        dims = shard.shape.as_list()
        if shard.dtype != shards[0].dtype or dims[1:] != row_shape:
            raise ValueError("embedding_lookup: shard %s is %s %s, unlike %s's %s %s: a "
                             "partitioned table's shards differ only in rows"
                             % (shard.name, shard.dtype.name, dims, shards[0].name,
                                shards[0].dtype.name, shards[0].shape.as_list()))
    offsets, rows = [], 0
    for shard in shards:
        offsets.append(rows)
        rows += shard.shape.as_list()[0]
    if table_name is None:
        table_name = shards[0].op.name.rpartition("/")[0] or shards[0].op.name
    ids = _int_ids(ids, graph, "embedding_lookup's ids")
    return _tensor_in(graph, _c.embedding_lookup_partitioned(
        table_name, [rows] + row_shape, shards[0].dtype.name, [s._handle for s in shards],
        offsets, ids._output, partition_strategy, 0.0 if max_norm is None else float(max_norm),
        name))


# --- more composed ops --------------------------------------------------------------------------------


def one_hot(indices, depth, on_value=None, off_value=None, axis=None, dtype=None, name=None):
    """Rows of a depth x depth identity (scaled to on/off values) gathered at `indices`: the
    last axis is the class."""
    if axis not in (None, -1):
        raise ValueError("one_hot(axis=%r): actorflow puts the classes on the last axis only"
                         % (axis,))
    dtype = dtypes.as_dtype(dtype or dtypes.float32)
    on = 1 if on_value is None else on_value
    off = 0 if off_value is None else off_value
    if not isinstance(depth, int) or depth < 1:
        raise ValueError("one_hot needs a Python int depth >= 1, got %r" % (depth,))
    table = np.full([depth, depth], off, dtype=dtype.as_numpy_dtype)
    np.fill_diagonal(table, on)
    with _scoped("one_hot", name):
        return gather(constant(table, name="table"), indices)


def range(start, limit=None, delta=1, dtype=None, name="range"):  # noqa: A001 - TF's name
    """A constant np.arange of Python numbers (actorflow has no Range op: tensor bounds are
    refused)."""
    for value in (start, limit, delta):
        if _is_tensor_like(value):
            raise TypeError("actorflow's range takes Python numbers (no Range op yet), not %r"
                            % (value,))
    if limit is None:
        start, limit = 0, start
    values = np.arange(start, limit, delta)
    if dtype is None:
        dtype = dtypes.int32 if values.dtype.kind == "i" else dtypes.float32
    return constant(values.astype(dtypes.as_dtype(dtype).as_numpy_dtype), name=name)


def reduce_any(input_tensor, axis=None, keepdims=None, name=None, reduction_indices=None,
               keep_dims=None):
    """Whether any element is true: the max of the values as floats."""
    with _scoped("Any", name):
        as_float = cast(input_tensor, dtypes.float32)
        return greater(reduce_max(as_float, axis, keepdims, None, reduction_indices, keep_dims),
                       constant(0.0))


def reduce_all(input_tensor, axis=None, keepdims=None, name=None, reduction_indices=None,
               keep_dims=None):
    """Whether every element is true: no element is false."""
    with _scoped("All", name):
        return logical_not(reduce_any(logical_not(input_tensor), axis, keepdims, None,
                                      reduction_indices, keep_dims))
