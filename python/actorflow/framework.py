"""Graphs, operations and tensors (TF1's tf.Graph, tf.Operation, tf.Tensor) over the C++ graph.

    g = tf.Graph()
    with g.as_default(), tf.name_scope("layer"), tf.device("/cpu:0"):
        x = tf.constant(3.0)          # node "layer/Const", requested device "/device:CPU:0"
    x.op.name, x.dtype, x.shape       # "layer/Const", tf.float32, TensorShape([])

A Graph owns its C++ graph (actorflow._actorflow.Graph); Operations and Tensors are views of
its nodes and hold the Graph, so the C++ graph lives as long as any of them. A graph is built
from one thread, as in C++.
"""

import contextlib
import threading

import numpy as np

from actorflow import _actorflow as _c
from actorflow import dtypes

# --- graphs ----------------------------------------------------------------------------------


class Graph:
    """A dataflow graph; ops made while it is the default graph (as_default) go into it."""

    def __init__(self):
        self._c = _c.Graph()
        self._operations = {}      # node id -> Operation, so that each node has one view
        self._variables = {}       # variable node id -> Variable
        self._reported_error = None
        self._pending_device_errors = []
        self._collections = {}
        self._finalized = False

    # Building: every op goes through _built, which raises what went wrong making it.
    def _built(self, output):
        """Raises the device function's exception or the graph's new error for the op just made,
        or RuntimeError when the graph is finalized."""
        pending = self._pending_device_errors[:1]
        self._pending_device_errors.clear()
        # Checked after the op is made (the C++ graph has no finalized state and never removes a
        # node): the op stays in the graph but cannot be used from Python, as nothing holds it.
        self._check_not_finalized()
        if pending:
            raise pending[0]
        self._check_error()
        return output

    def _check_error(self):
        error = self._c.error()
        if error is not None and error != self._reported_error:
            # The op that failed leaves the graph, as in TF; where the C++ graph cannot undo it
            # (a failure inside a while loop, say), it keeps the error and refuses to run.
            if not self._c.discard_failed_nodes():
                self._reported_error = error
            raise ValueError(error[1])

    def finalize(self):
        """Makes the graph read-only (tf.Graph.finalize): making an op or adding to a collection
        raises RuntimeError afterwards. tf.train.Supervisor finalizes its graph, so that a
        training loop cannot grow it by accident."""
        self._finalized = True

    @property
    def finalized(self):
        return self._finalized

    def _unsafe_unfinalize(self):
        self._finalized = False

    def _check_not_finalized(self):
        if self._finalized:
            raise RuntimeError("Graph is finalized and cannot be modified.")

    @contextlib.contextmanager
    def as_default(self):
        stack = _default_graph_stack()
        stack.append(self)
        try:
            yield self
        finally:
            stack.pop()

    # Views of nodes.
    def _operation(self, node_id):
        op = self._operations.get(node_id)
        if op is None:
            op = Operation(self, node_id)
            self._operations[node_id] = op
        return op

    def _tensor(self, output):
        if output is None:
            return None
        return self._operation(output.node_id).outputs[output.index]

    def get_operations(self):
        return [self._operation(i) for i in range(self._c.size())]

    def get_operation_by_name(self, name):
        node_id = self._c.find(name)
        if node_id < 0:
            raise KeyError("The name %r refers to an Operation not in the graph." % name)
        return self._operation(node_id)

    def get_tensor_by_name(self, name):
        if ":" not in name:
            raise ValueError("The name %r looks like an Operation name, not a Tensor name "
                             "(Tensor names look like '<op_name>:<output_index>')" % name)
        output = self._c.find_output(name)
        if output is None:
            raise KeyError("The name %r refers to a Tensor which does not exist." % name)
        return self._tensor(output)

    def as_graph_element(self, obj):
        """The Tensor or Operation that a fetch or feed key names."""
        if isinstance(obj, (Tensor, Operation)):
            if obj.graph is not self:
                raise ValueError("%s is not an element of this graph." % (obj,))
            return obj
        if isinstance(obj, Variable):
            return self.as_graph_element(obj.value())
        if isinstance(obj, str):
            return self.get_tensor_by_name(obj) if ":" in obj else self.get_operation_by_name(obj)
        raise TypeError("Can not convert a %s into a Tensor or Operation." % type(obj).__name__)

    # Scopes: each is a C++ scope opened when the `with` block begins (not when the context
    # manager is made: C++ scopes must end in the reverse order they began) and closed when it
    # ends.
    @contextlib.contextmanager
    def _scope(self, open_native_scope):
        native_scope = open_native_scope()
        try:
            self._check_error()
            yield
        finally:
            native_scope.close()

    @contextlib.contextmanager
    def name_scope(self, name):
        if name is None or name == "":
            yield ""
            return
        if name.endswith("/"):
            # TF's rule: a name ending in "/" is a scope's full name, re-entered as it is.
            with self._absolute_name_scope(name[:-1]):
                yield name
            return
        with self._scope(lambda: self._c.name_scope(name)):
            yield self._c.current_scope() + "/"

    def _absolute_name_scope(self, full_name):
        """Names made inside get the prefix "full_name/" (none for ""), whatever scopes enclose
        it."""
        return self._scope(lambda: self._c.absolute_name_scope(full_name))

    def device(self, device_name_or_function):
        spec = device_name_or_function
        if spec is None:
            raise ValueError("device(None), which clears the enclosing device scopes, is not "
                             "supported yet")
        native = getattr(spec, "_native_device_function", None)
        if native is not None:
            return self._scope(lambda: self._c.device_native(native))
        if isinstance(spec, DeviceSpec):
            spec = spec.to_string()
        if isinstance(spec, str):
            return self._scope(lambda: self._c.device(spec))
        if callable(spec):
            choose = self._python_device_function(spec)
            return self._scope(lambda: self._c.device_function(choose))
        raise TypeError("device() takes a device name, a DeviceSpec or a function of the op, "
                        "not %r" % (spec,))

    def _python_device_function(self, function):
        def choose(op_type, name, requested_device):
            try:
                chosen = function(_NodeBeingMade(self, op_type, name, requested_device))
                if chosen is None:
                    return None
                return chosen.to_string() if isinstance(chosen, DeviceSpec) else str(chosen)
            except BaseException as error:  # raised by Graph._built once the op exists
                self._pending_device_errors.append(error)
                return None
        return choose

    def control_dependencies(self, control_inputs):
        if control_inputs is None:
            raise ValueError("control_dependencies(None), which clears the enclosing ones, is "
                             "not supported yet")
        handles = [self._control_handle(x) for x in control_inputs]
        return self._scope(lambda: self._c.control_dependencies(handles))

    def _control_handle(self, x):
        element = self.as_graph_element(x)
        if isinstance(element, Tensor):
            element = element.op
        return self._c.op_handle(element._node_id)

    def colocate_with(self, op, ignore_existing=False):
        if ignore_existing:
            raise ValueError("colocate_with(ignore_existing=True) is not supported yet")
        element = self.as_graph_element(op)
        handle = element._output if isinstance(element, Tensor) else self._c.op_handle(element._node_id)
        return self._scope(lambda: self._c.colocate_with(handle))

    @property
    def seed(self):
        return self._c.seed

    @seed.setter
    def seed(self, value):
        self._c.seed = None if value is None else int(value)

    def unique_name(self, name, mark_as_used=True):
        if not mark_as_used:
            raise ValueError("unique_name(mark_as_used=False) is not supported yet")
        return self._c.unique_name(name)

    def get_name_scope(self):
        return self._c.current_scope()

    # Variables made in C++ (optimizer slots) get their Python view on first sight.
    def _variable(self, handle):
        variable = self._variables.get(handle.ref.node_id)
        if variable is None:
            variable = Variable._from_handle(self, handle)
        return variable

    def add_to_collection(self, name, value):
        self._check_not_finalized()
        self._collections.setdefault(name, []).append(value)

    def get_collection(self, name, scope=None):
        values = list(self._collections.get(name, []))
        if scope is not None:
            values = [v for v in values if getattr(v, "name", "").startswith(scope)]
        return values


class _NodeBeingMade:
    """What a device function sees of the op being made: its type, name and requested device
    (TF passes the Operation; its node_def has the same three)."""

    def __init__(self, graph, op_type, name, device):
        self.graph = graph
        self.type = op_type
        self.name = name
        self.device = device

    @property
    def node_def(self):
        return self

    @property
    def op(self):
        return self.type


# The graph outside every as_default block is the process's; the blocks are per thread, as
# in TF.
_default_graph = Graph()
_graph_blocks = threading.local()


def _default_graph_stack():
    if not hasattr(_graph_blocks, "stack"):
        _graph_blocks.stack = []
    return _graph_blocks.stack


def get_default_graph():
    stack = _default_graph_stack()
    return stack[-1] if stack else _default_graph


def set_random_seed(seed):
    """The default graph's seed (tf.set_random_seed): its random ops without a seed of their
    own derive theirs from it, so a program draws the same numbers on every run."""
    get_default_graph().seed = seed


def reset_default_graph():
    global _default_graph
    if _default_graph_stack():
        raise AssertionError("Do not use tf.reset_default_graph() to clear nested graphs. If "
                             "you need a cleared graph, exit the nesting and create a new graph.")
    _default_graph = Graph()


def name_scope(name, default_name=None, values=None):
    graph = _graph_of_values(values)
    return graph.name_scope(name if name is not None else default_name)


def device(device_name_or_function):
    return get_default_graph().device(device_name_or_function)


def control_dependencies(control_inputs):
    return get_default_graph().control_dependencies(control_inputs)


def colocate_with(op, ignore_existing=False):
    return get_default_graph().colocate_with(op, ignore_existing)


def _graph_of_values(values):
    for v in values or ():
        if isinstance(v, (Tensor, Operation, Variable)):
            return v.graph
    return get_default_graph()


class DeviceSpec:
    """A device name by its parts (tf.DeviceSpec); str() and to_string() give the name."""

    def __init__(self, job=None, replica=None, task=None, device_type=None, device_index=None):
        self.job = job
        self.replica = replica
        self.task = task
        self.device_type = device_type
        self.device_index = device_index

    def to_string(self):
        parts = []
        if self.job is not None:
            parts.append("/job:%s" % self.job)
        if self.replica is not None:
            parts.append("/replica:%d" % self.replica)
        if self.task is not None:
            parts.append("/task:%d" % self.task)
        if self.device_type is not None:
            index = "*" if self.device_index is None else str(self.device_index)
            parts.append("/device:%s:%s" % (self.device_type, index))
        return "".join(parts)

    def __str__(self):
        return self.to_string()


# --- operations and tensors --------------------------------------------------------------------


class Operation:
    """A node of a graph."""

    def __init__(self, graph, node_id):
        self._graph = graph
        self._node_id = node_id
        self._outputs = None

    @property
    def graph(self):
        return self._graph

    @property
    def name(self):
        return self._graph._c.node_name(self._node_id)

    @property
    def type(self):
        return self._graph._c.node_op(self._node_id)

    @property
    def device(self):
        """The device requested for it (scopes and device functions applied); "" for none."""
        return self._graph._c.node_requested_device(self._node_id)

    @property
    def assigned_device(self):
        """Where the placer put it; "" until a session has run it."""
        return self._graph._c.node_assigned_device(self._node_id)

    @property
    def outputs(self):
        if self._outputs is None:
            count = self._graph._c.node_num_outputs(self._node_id)
            self._outputs = [Tensor(self, i) for i in range(count)]
        return list(self._outputs)

    @property
    def inputs(self):
        return [self._graph._operation(node_id).outputs[index]
                for node_id, index in self._graph._c.node_inputs(self._node_id)]

    @property
    def control_inputs(self):
        return [self._graph._operation(i) for i in self._graph._c.node_control_inputs(self._node_id)]

    def run(self, feed_dict=None, session=None):
        from actorflow import session as _session
        _session._session_for(self, session).run(self, feed_dict)

    def __repr__(self):
        return "<tf.Operation '%s' type=%s>" % (self.name, self.type)


class Tensor:
    """Output `value_index` of an Operation."""

    # numpy defers to the tensor's operators (array * tensor is tensor.__rmul__), as with TF.
    __array_priority__ = 100
    __array_ufunc__ = None

    def __init__(self, op, value_index):
        self._op = op
        self._value_index = value_index
        self._output = op.graph._c.output(op._node_id, value_index)

    @property
    def op(self):
        return self._op

    @property
    def graph(self):
        return self._op.graph

    @property
    def value_index(self):
        return self._value_index

    @property
    def name(self):
        return self._output.tensor_name

    @property
    def dtype(self):
        return dtypes.as_dtype(self._output.dtype)

    @property
    def shape(self):
        return dtypes.TensorShape(self._output.shape)

    def get_shape(self):
        return self.shape

    @property
    def device(self):
        return self._op.device

    def consumers(self):
        consumers = []
        for op in self.graph.get_operations():
            if any(t is self for t in op.inputs):
                consumers.append(op)
        return consumers

    def eval(self, feed_dict=None, session=None):
        from actorflow import session as _session
        return _session._session_for(self, session).run(self, feed_dict)

    def __repr__(self):
        return "<tf.Tensor '%s' shape=%s dtype=%s>" % (self.name, self.shape, self.dtype.name)

    def __bool__(self):
        raise TypeError("Using a `tf.Tensor` as a Python `bool` is not allowed. Use `if t is not "
                        "None:` instead of `if t:` to test if a tensor is defined, and use "
                        "TensorFlow ops such as tf.cond to execute subgraphs conditioned on the "
                        "value of a tensor.")

    def __iter__(self):
        raise TypeError("Tensor objects are only iterable when eager execution is enabled; "
                        "index them instead (t[0]).")

    # Identity, as TF1's: tensors are dictionary keys (feed_dict); tf.equal compares values.
    __hash__ = object.__hash__

    def __eq__(self, other):
        return self is other

    def __ne__(self, other):
        return self is not other

    def __getitem__(self, key):
        from actorflow import ops as _ops
        return _ops._slice(self, key)


def _operator(op_name, node_name, reflected=False):
    """An operator method calling ops.<op_name>; its nodes are named as TF names an operator's
    ("mul", where tf.multiply gives "Mul")."""
    def method(self, other):
        from actorflow import ops as _ops
        fn = getattr(_ops, op_name)
        return fn(other, self, name=node_name) if reflected else fn(self, other, name=node_name)
    method.__name__ = op_name
    return method


for _name, _fn, _node in (("add", "add", "add"), ("sub", "subtract", "sub"),
                          ("mul", "multiply", "mul"), ("truediv", "truediv", "truediv"),
                          ("matmul", "matmul", "MatMul"), ("and", "logical_and", "LogicalAnd")):
    setattr(Tensor, "__%s__" % _name, _operator(_fn, _node))
    setattr(Tensor, "__r%s__" % _name, _operator(_fn, _node, reflected=True))
for _name, _fn, _node in (("lt", "less", "Less"), ("le", "less_equal", "LessEqual"),
                          ("gt", "greater", "Greater"), ("ge", "greater_equal", "GreaterEqual")):
    setattr(Tensor, "__%s__" % _name, _operator(_fn, _node))


def _unary_operator(op_name):
    def method(self):
        from actorflow import ops as _ops
        return getattr(_ops, op_name)(self)
    method.__name__ = op_name
    return method


Tensor.__neg__ = _unary_operator("negative")
Tensor.__invert__ = _unary_operator("logical_not")
Tensor.__abs__ = _unary_operator("abs")
for _name, _fn, _node in (("pow", "pow", "pow"), ("or", "logical_or", "LogicalOr"),
                          ("xor", "logical_xor", "LogicalXor"), ("floordiv", "floordiv", "floordiv"),
                          ("mod", "floormod", "mod")):
    setattr(Tensor, "__%s__" % _name, _operator(_fn, _node))
    setattr(Tensor, "__r%s__" % _name, _operator(_fn, _node, reflected=True))


# --- variables ---------------------------------------------------------------------------------


class Variable:
    """A variable (tf.Variable): a VariableV2 node, its initializer (an Assign) and its read
    value, which arithmetic on the variable uses."""

    __array_priority__ = 100
    __array_ufunc__ = None

    def __init__(self, initial_value=None, trainable=True, name=None, dtype=None,
                 collections=None, validate_shape=True, caching_device=None,
                 expected_shape=None, use_resource=None, constraint=None):
        if initial_value is None:
            raise ValueError("initial_value must be specified.")
        if constraint is not None and not callable(constraint):
            raise ValueError("Variable %r: constraint must be callable (a function of the "
                             "variable), not %r" % (name or "Variable", constraint))
        if callable(initial_value):
            initial_value = initial_value()
        initial = convert_to_tensor(initial_value, dtype=dtype)
        graph = initial.graph
        handle = graph._built(_c.variable(graph._c, initial._output, name or "Variable",
                                          bool(trainable)))
        self._init(graph, handle)
        self._constraint = constraint

    @classmethod
    def _from_handle(cls, graph, handle):
        variable = cls.__new__(cls)
        variable._init(graph, handle)
        return variable

    def _init(self, graph, handle):
        self._graph = graph
        self._handle = handle
        graph._variables[handle.ref.node_id] = self

    # A variable made in C++ (an optimizer's slot) has none.
    _constraint = None

    @property
    def graph(self):
        return self._graph

    @property
    def constraint(self):
        """The function the optimizers apply after each update (var.assign(constraint(var))),
        or None."""
        return self._constraint

    @property
    def op(self):
        return self._graph._operation(self._handle.ref.node_id)

    @property
    def name(self):
        return self._handle.ref.tensor_name

    @property
    def dtype(self):
        return dtypes.as_dtype(self._handle.ref.dtype)

    @property
    def shape(self):
        return dtypes.TensorShape(self._handle.ref.shape)

    def get_shape(self):
        return self.shape

    @property
    def device(self):
        return self.op.device

    @property
    def initializer(self):
        return self._graph._operation(self._handle.initializer.node_id)

    @property
    def initial_value(self):
        return self._graph._tensor(self._handle.initializer).op.inputs[1]

    def value(self):
        return self._graph._tensor(self._handle.read)

    read_value = value

    def initialized_value(self):
        from actorflow import ops as _ops
        with self._graph.control_dependencies([self.initializer]):
            return _ops.identity(self.value())

    def _ref(self):
        return self._graph._tensor(self._handle.ref)

    def eval(self, session=None):
        return self.value().eval(session=session)

    def assign(self, value, use_locking=False, name=None, read_value=True):
        from actorflow import ops as _ops
        return _ops.assign(self, value, name=name)

    def assign_add(self, delta, use_locking=False, name=None, read_value=True):
        from actorflow import ops as _ops
        return _ops.assign_add(self, delta, name=name)

    def assign_sub(self, delta, use_locking=False, name=None, read_value=True):
        from actorflow import ops as _ops
        return _ops.assign_sub(self, delta, name=name)

    def __repr__(self):
        return "<tf.Variable '%s' shape=%s dtype=%s>" % (self.name, self.shape, self.dtype.name)

    __hash__ = object.__hash__

    def __eq__(self, other):
        return self is other

    def __ne__(self, other):
        return self is not other

    def __bool__(self):
        return Tensor.__bool__(self.value())

    def __iter__(self):
        raise TypeError("Variable objects are not iterable; index them instead (v[0]).")

    def __getitem__(self, key):
        return self.value()[key]


def _delegate_to_value(method_name):
    def method(self, *args):
        return getattr(self.value(), method_name)(*args)
    method.__name__ = method_name
    return method


for _method in [m for m in vars(Tensor) if m.startswith("__") and m.endswith("__")
                and m[2:-2] in ("add", "radd", "sub", "rsub", "mul", "rmul", "truediv", "rtruediv",
                                "matmul", "rmatmul", "lt", "le", "gt", "ge", "and", "rand", "neg",
                                "invert", "floordiv", "rfloordiv", "mod", "rmod", "pow", "rpow",
                                "abs", "or", "ror", "xor", "rxor")]:
    setattr(Variable, _method, _delegate_to_value(_method))


# --- conversion ----------------------------------------------------------------------------------


class IndexedSlices:
    """Rows `values` at `indices` of a tensor of shape `dense_shape` (tf.IndexedSlices): what
    tf.gradients returns for the table of an embedding_lookup or gather. In actorflow it is a
    node whose output is the dense tensor it stands for (graph/sparse_ops.hpp), so wherever a
    Tensor is expected (an op's input, Session.run's fetches, apply_gradients) it is that dense
    tensor; the optimizers take its rows only."""

    def __init__(self, values, indices, dense_shape=None):
        if dense_shape is None:
            raise ValueError("actorflow's IndexedSlices needs a fully defined dense_shape")
        values = convert_to_tensor(values)
        indices = convert_to_tensor(indices)
        graph = _same_graph((values, indices), "IndexedSlices")
        shape = [int(d) for d in (dense_shape.as_list() if hasattr(dense_shape, "as_list")
                                  else dense_shape)]
        dense = graph._tensor(graph._built(_c.indexed_slices(values._output, indices._output,
                                                             shape, "IndexedSlices")))
        self._init(dense, values, indices, shape)

    @classmethod
    def _of(cls, dense):
        """The IndexedSlices whose dense output is Tensor `dense`, or `dense` when it is none."""
        if dense is None:
            return None
        parts = _c.as_indexed_slices(dense._output)
        if parts is None:
            return dense
        slices = cls.__new__(cls)
        graph = dense.graph
        slices._init(dense, graph._tensor(parts[0]), graph._tensor(parts[1]), list(parts[2]))
        return slices

    def _init(self, dense, values, indices, dense_shape):
        self._dense = dense
        self._values = values
        self._indices = indices
        self._dense_shape_list = dense_shape
        self._dense_shape = None

    @property
    def values(self):
        return self._values

    @property
    def indices(self):
        return self._indices

    @property
    def dense_shape(self):
        """An int64 Tensor (made on first use), as TF's."""
        if self._dense_shape is None:
            from actorflow import ops as _ops
            with self.graph.as_default():
                self._dense_shape = _ops.constant(np.array(self._dense_shape_list, np.int64),
                                                  name="dense_shape")
        return self._dense_shape

    @property
    def graph(self):
        return self._dense.graph

    @property
    def dtype(self):
        return self._values.dtype

    @property
    def name(self):
        return self._dense.name

    @property
    def op(self):
        return self._dense.op

    @property
    def shape(self):
        return self._dense.shape

    def get_shape(self):
        return self.shape

    @property
    def device(self):
        return self._dense.device

    def __repr__(self):
        return "IndexedSlices(indices=%r, values=%r, dense_shape=%s)" % (
            self._indices, self._values, self._dense_shape_list)


# An IndexedSlices in arithmetic is its dense tensor (actorflow has it at hand; TF converts).
def _dense_operator(name):
    def method(self, *args):
        return getattr(self._dense, name)(*args)
    method.__name__ = name
    return method


for _name in ("add", "sub", "mul", "truediv", "matmul", "pow", "and", "or", "xor"):
    for _prefix in ("__", "__r"):
        setattr(IndexedSlices, "%s%s__" % (_prefix, _name), _dense_operator("%s%s__" % (_prefix, _name)))
for _name in ("__lt__", "__le__", "__gt__", "__ge__", "__neg__", "__abs__", "__invert__",
              "__getitem__"):
    setattr(IndexedSlices, _name, _dense_operator(_name))
IndexedSlices.__array_priority__ = 100
IndexedSlices.__array_ufunc__ = None


def convert_to_tensor(value, dtype=None, name=None, preferred_dtype=None, graph=None):
    """`value` as a Tensor: a Tensor or Variable as it is (its dtype checked against `dtype`),
    anything else (Python numbers, lists, numpy arrays) as a constant, in `graph` or the default
    graph. TF1's rules: a Python float is float32, an int int32, a numpy array keeps its dtype."""
    if isinstance(value, Variable):
        value = value.value()
    elif hasattr(value, "_get_variable_list"):  # a PartitionedVariable: its shards concatenated
        value = value.as_tensor()
    if isinstance(value, IndexedSlices):
        value = value._dense
    if isinstance(value, Tensor):
        if dtype is not None and dtypes.as_dtype(dtype) != value.dtype:
            raise ValueError("Tensor conversion requested dtype %s for Tensor with dtype %s: %r"
                             % (dtypes.as_dtype(dtype).name, value.dtype.name, value))
        return value
    if isinstance(value, Operation):
        raise TypeError("Can not convert an Operation (%r) into a Tensor" % value.name)
    from actorflow import ops as _ops
    if dtype is None and preferred_dtype is not None:
        try:
            return _ops.constant(value, dtype=preferred_dtype, name=name or "Const", graph=graph)
        except (TypeError, ValueError):
            pass
    return _ops.constant(value, dtype=dtype, name=name or "Const", graph=graph)


def flat_variables(var_list):
    """`var_list` with each PartitionedVariable replaced by its shards (TF accepts both wherever
    it takes a list of variables)."""
    flat = []
    for v in var_list:
        parts = getattr(v, "_get_variable_list", None)
        flat.extend(parts() if parts is not None else [v])
    return flat


def numpy_value(value, dtype=None):
    """`value` as a C-contiguous numpy array of one of actorflow's dtypes, by TF1's rules; a
    TypeError names the value and dtype that do not fit."""
    target = None if dtype is None else dtypes.as_dtype(dtype)
    if isinstance(value, (np.ndarray, np.generic)):
        array = np.asarray(value)
    else:
        try:
            array = np.asarray(value)
        except ValueError as error:
            raise ValueError("Can not convert %r to a tensor: %s" % (value, error)) from None
        if target is None:
            if array.dtype.kind == "f":
                array = array.astype(np.float32)
            elif array.dtype.kind in "iu":
                fits = array.size == 0 or (array.min() >= -2**31 and array.max() < 2**31)
                array = array.astype(np.int32 if fits else np.int64)
    if array.dtype.kind not in "fib":
        raise TypeError("Can not convert %r (numpy %s) to a tensor: actorflow has float32, "
                        "float64, int32, int64 and bool" % (value, array.dtype))
    if target is not None:
        kind = array.dtype.kind
        if target.is_integer and kind == "f" and not np.all(np.equal(np.mod(array, 1), 0)):
            raise TypeError("Expected %s, got %r of type '%s' instead." %
                            (target.name, value, type(value).__name__))
        if (target.is_bool) != (kind == "b"):
            raise TypeError("Expected %s, got %r of type '%s' instead." %
                            (target.name, value, type(value).__name__))
        array = array.astype(target.as_numpy_dtype)
    else:
        dtypes.as_dtype(array.dtype)  # a TypeError for float16, uint8, ...
    return np.require(array, requirements="C")  # ascontiguousarray makes 0-d arrays 1-d


def _same_graph(values, op_name):
    """The one graph of the tensors among `values`; a ValueError names the op otherwise."""
    graph = None
    for v in values:
        if isinstance(v, (Tensor, Variable, Operation, IndexedSlices)):
            if graph is None:
                graph = v.graph
            elif v.graph is not graph:
                raise ValueError("%s: %r must be from the same graph as the op's other inputs."
                                 % (op_name, v))
    return graph if graph is not None else get_default_graph()
