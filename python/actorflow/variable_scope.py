"""tf.variable_scope and tf.get_variable: variables shared by name, and per-scope defaults.

    with tf.variable_scope("layer1", initializer=tf.zeros_initializer()):
        w = tf.get_variable("w", [784, 256])          # layer1/w
    with tf.variable_scope("layer1", reuse=True):
        same = tf.get_variable("w")                   # the same Variable object
    with tf.variable_scope("emb", partitioner=tf.fixed_size_partitioner(4)):
        table = tf.get_variable("table", [10000, 64])  # emb/table/part_0 .. part_3

Each graph has one store of the variables get_variable made, by full name ("layer1/w"), and
the stack of variable scopes in force. A variable's name comes from the variable scopes only,
never from a name_scope opened inside them (TF's rule); its initializer's ops go under
"<name>/Initializer/". Reuse: True requires the variable to exist, tf.AUTO_REUSE makes it on
first use, None (and False, which TF1 reads as None) inherits the enclosing scope's and at the
top makes a new one, refusing a name already taken. A partitioned variable is a
PartitionedVariable of ordinary Variables "<name>/part_<i>", made one after the other under the
device scopes in force, so replica_device_setter spreads them over the ps tasks.
"""

import contextlib

import numpy as np

from actorflow import dtypes
from actorflow import init_ops
from actorflow.framework import Tensor, Variable, get_default_graph


class _ReuseMode:
    """tf.AUTO_REUSE: get_variable makes the variable on first use and returns it afterwards."""

    def __repr__(self):
        return "tf.AUTO_REUSE"


AUTO_REUSE = _ReuseMode()


class VariableScope:
    """One variable scope: its full name, the name scope it opened first, and the defaults its
    get_variable calls use (TF's VariableScope)."""

    def __init__(self, reuse, name="", initializer=None, regularizer=None, caching_device=None,
                 partitioner=None, custom_getter=None, name_scope="", dtype=dtypes.float32,
                 use_resource=None, constraint=None):
        self._name = name
        self._reuse = reuse
        self._initializer = initializer
        self._regularizer = regularizer
        self._caching_device = caching_device
        self._partitioner = partitioner
        self._custom_getter = custom_getter
        self._name_scope = name_scope
        self._dtype = dtypes.as_dtype(dtype)
        self._use_resource = use_resource
        self._constraint = constraint

    name = property(lambda self: self._name)
    original_name_scope = property(lambda self: self._name_scope)
    reuse = property(lambda self: self._reuse)
    initializer = property(lambda self: self._initializer)
    regularizer = property(lambda self: self._regularizer)
    caching_device = property(lambda self: self._caching_device)
    partitioner = property(lambda self: self._partitioner)
    custom_getter = property(lambda self: self._custom_getter)
    dtype = property(lambda self: self._dtype)
    use_resource = property(lambda self: self._use_resource)
    constraint = property(lambda self: self._constraint)

    def reuse_variables(self):
        """Every later get_variable in this scope reuses."""
        self._reuse = True

    def set_initializer(self, initializer):
        self._initializer = initializer

    def set_regularizer(self, regularizer):
        self._regularizer = regularizer

    def set_partitioner(self, partitioner):
        self._partitioner = partitioner

    def set_custom_getter(self, custom_getter):
        self._custom_getter = custom_getter

    def set_dtype(self, dtype):
        self._dtype = dtypes.as_dtype(dtype)

    def set_caching_device(self, caching_device):
        self._caching_device = caching_device

    def global_variables(self):
        from actorflow import ops
        return ops.global_variables(self._prefix())

    def trainable_variables(self):
        from actorflow import ops
        return ops.trainable_variables(self._prefix())

    def _prefix(self):
        return self._name + "/" if self._name else None

    def get_variable(self, var_store, name, shape=None, dtype=None, initializer=None,
                     regularizer=None, reuse=None, trainable=None, collections=None,
                     caching_device=None, partitioner=None, validate_shape=True,
                     use_resource=None, custom_getter=None, constraint=None):
        full_name = self._name + "/" + name if self._name else name
        if reuse is None or reuse is False:
            reuse = self._reuse
        getter_args = dict(
            name=full_name, shape=shape,
            dtype=dtypes.as_dtype(dtype) if dtype is not None else self._dtype,
            initializer=initializer if initializer is not None else self._initializer,
            regularizer=regularizer if regularizer is not None else self._regularizer,
            reuse=reuse, trainable=trainable, collections=collections,
            caching_device=caching_device or self._caching_device,
            partitioner=partitioner if partitioner is not None else self._partitioner,
            validate_shape=validate_shape, constraint=constraint or self._constraint)
        getter = var_store.get_variable
        # The scope's getter wraps the call's, as TF composes them.
        for custom in (custom_getter, self._custom_getter):
            if custom is not None:
                getter = _wrapped_getter(custom, getter)
        return getter(**getter_args)


def _wrapped_getter(custom, inner):
    def getter(**kwargs):
        return custom(inner, **kwargs)
    return getter


class PartitionedVariable:
    """A variable stored as Variables "<name>/part_<i>" along one axis (TF's PartitionedVariable).
    Iterating gives the shards; anywhere a Tensor is expected it is their values concatenated
    (as_tensor); tf.nn.embedding_lookup reads only the rows a batch needs from each shard."""

    def __init__(self, name, shape, dtype, variable_list, partitions):
        self._name = name
        self._shape = dtypes.TensorShape(shape)
        self._dtype = dtypes.as_dtype(dtype)
        self._variables = list(variable_list)
        self._partitions = list(partitions)
        self._axis = next((i for i, p in enumerate(self._partitions) if p > 1), 0)

    def __iter__(self):
        return iter(self._variables)

    def __len__(self):
        return len(self._variables)

    def _get_variable_list(self):
        return list(self._variables)

    def _get_partitions(self):
        return list(self._partitions)

    @property
    def name(self):
        return self._name

    @property
    def dtype(self):
        return self._dtype

    @property
    def shape(self):
        return self._shape

    def get_shape(self):
        return self._shape

    @property
    def graph(self):
        return self._variables[0].graph

    @property
    def axis(self):
        """The axis the shards split."""
        return self._axis

    def offsets(self):
        """Where each shard starts along the split axis."""
        starts, at = [], 0
        for v in self._variables:
            starts.append(at)
            at += v.shape.as_list()[self._axis]
        return starts

    def as_tensor(self):
        """The whole value: the shards' reads concatenated along the split axis, in the current
        name and device scopes (so each consumer gets the copy it needs where it runs)."""
        from actorflow import ops
        if len(self._variables) == 1:
            return self._variables[0].value()
        with self.graph.name_scope(self._name.rpartition("/")[2] + "/ConcatPartitions"):
            return ops.concat([v.value() for v in self._variables], self._axis, name="concat")

    _as_tensor = as_tensor

    def assign(self, value, use_locking=None, name=None, read_value=True):
        """Assigns each shard its slice of `value` (a fully known array or tensor)."""
        from actorflow import ops
        value = np.asarray(value) if not isinstance(value, (Tensor, Variable)) else value
        assigns = []
        for v, start in zip(self._variables, self.offsets()):
            size = v.shape.as_list()[self._axis]
            if isinstance(value, np.ndarray):
                index = [slice(None)] * value.ndim
                index[self._axis] = slice(start, start + size)
                part = value[tuple(index)]
            else:
                part = ops.slice(value, [start if i == self._axis else 0
                                         for i in range(self._shape.ndims)],
                                 [size if i == self._axis else -1
                                  for i in range(self._shape.ndims)])
            assigns.append(ops.assign(v, part))
        return ops.group(*assigns, name=name)

    def __repr__(self):
        return "<tf.PartitionedVariable '%s' shape=%s dtype=%s parts=%d>" % (
            self._name, self._shape, self._dtype.name, len(self._variables))


def _shard_shapes(shape, partitions):
    """Each shard's shape and offset: TF's rule, the first (size mod parts) shards one row
    longer."""
    axis = next((i for i, p in enumerate(partitions) if p > 1), 0)
    parts = partitions[axis] if partitions else 1
    size = shape[axis] if shape else 1
    base, extra = divmod(size, parts)
    shapes, offsets, at = [], [], 0
    for i in range(parts):
        rows = base + (1 if i < extra else 0)
        part_shape = list(shape)
        if part_shape:
            part_shape[axis] = rows
        offset = [0] * len(shape)
        if offset:
            offset[axis] = at
        shapes.append(part_shape)
        offsets.append(offset)
        at += rows
    return shapes, offsets


class _VariableStore:
    """One graph's variables made by get_variable, by full name."""

    def __init__(self, graph):
        self._graph = graph
        self._vars = {}
        self._partitioned = {}

    def get_variable(self, name, shape=None, dtype=dtypes.float32, initializer=None,
                     regularizer=None, reuse=None, trainable=None, collections=None,
                     caching_device=None, partitioner=None, validate_shape=True,
                     constraint=None, **unused):
        dtype = dtypes.as_dtype(dtype)
        if trainable is None:
            trainable = True
        if constraint is not None and not callable(constraint):
            raise ValueError("get_variable %r: constraint must be callable (a function of the "
                             "variable), not %r" % (name, constraint))
        collections = _collection_names(name, collections)
        # An initializer that is a value (a Tensor, a numpy array, a list) gives the shape.
        initial_tensor = None
        if initializer is not None and not callable(initializer):
            if isinstance(initializer, (Tensor, Variable)):
                initial_tensor = initializer
                if shape is None:
                    shape = initial_tensor.shape
            else:
                value = np.asarray(initializer)
                if shape is None:
                    shape = list(value.shape)
                initializer = init_ops.constant_initializer(value, dtype=dtype)
            if validate_shape and initial_tensor is not None and shape is not None and \
                    not dtypes.TensorShape(shape).is_compatible_with(initial_tensor.shape):
                raise ValueError("get_variable %r: the initializer's shape %s is not shape %s"
                                 % (name, initial_tensor.shape, dtypes.TensorShape(shape)))
        existing = self._partitioned.get(name) or self._vars.get(name)
        if existing is not None:
            if reuse is None:
                raise ValueError("Variable %s already exists, disallowed. Did you mean to set "
                                 "reuse=True or reuse=tf.AUTO_REUSE in VarScope?" % name)
            if shape is not None and not dtypes.TensorShape(shape).is_compatible_with(existing.shape):
                raise ValueError("Trying to share variable %s, but specified shape %s and found "
                                 "shape %s." % (name, dtypes.TensorShape(shape), existing.shape))
            if dtype != existing.dtype:
                raise ValueError("Trying to share variable %s, but specified dtype %s and found "
                                 "dtype %s." % (name, dtype.name, existing.dtype.name))
            return existing
        if reuse is True:
            raise ValueError("Variable %s does not exist, or was not created with "
                             "tf.get_variable(). Did you mean to set reuse=tf.AUTO_REUSE in "
                             "VarScope?" % name)
        if shape is None:
            raise ValueError("Shape of a new variable (%s) must be fully defined, but instead "
                             "was None." % name)
        shape = dtypes.TensorShape(shape)
        if not shape.is_fully_defined():
            raise ValueError("Shape of a new variable (%s) must be fully defined, but instead "
                             "was %s." % (name, shape))
        if initializer is None and initial_tensor is None:
            initializer = _default_initializer(name, dtype)
        if partitioner is not None and initial_tensor is None:
            return self._make_partitioned(name, shape.as_list(), dtype, initializer, partitioner,
                                          regularizer, trainable, collections, constraint)
        self._check_name_is_free(name)
        variable = self._make(name, shape.as_list(), dtype, initializer, initial_tensor,
                              trainable, collections, None, constraint)
        # Stored before the regularizer runs, as TF does: a failing regularizer leaves the
        # variable made, and a second get_variable must find it rather than make "<name>_1".
        self._vars[name] = variable
        self._regularize(name, variable, regularizer)
        return variable

    def _check_name_is_free(self, name):
        """A ValueError before anything is made: the C++ graph would give the variable another
        name ("<name>_1"), and a node once made stays in the graph (nodes are never removed)."""
        if self._graph._c.find(name) >= 0:
            raise ValueError("get_variable %r: the graph already has a node of that name (made "
                             "by something other than get_variable, e.g. tf.Variable)" % name)

    def _make(self, name, shape, dtype, initializer, initial_tensor, trainable, collections,
              partition_info, constraint):
        graph = self._graph
        scope, _, base = name.rpartition("/")
        # The variable's name is its variable scope's, whatever name scope is open here.
        with graph._absolute_name_scope(scope):
            if initial_tensor is None:
                with graph.name_scope(base + "/Initializer"):
                    initial_tensor = initializer(shape, dtype=dtype, partition_info=partition_info)
            variable = Variable(initial_tensor, trainable=trainable, name=base, dtype=dtype,
                                constraint=constraint)
        if variable.name != name + ":0":
            raise ValueError("get_variable %r: the name is taken in the graph (by a name scope "
                             "of that name), so %s was made instead" % (name, variable.name))
        for key in collections:
            graph.add_to_collection(key, variable)
        return variable

    def _make_partitioned(self, name, shape, dtype, initializer, partitioner, regularizer,
                          trainable, collections, constraint):
        partitions = [int(p) for p in partitioner(shape=dtypes.TensorShape(shape), dtype=dtype)]
        if len(partitions) != len(shape) or any(p < 1 for p in partitions) or \
                sum(1 for p in partitions if p > 1) > 1 or \
                any(p > d for p, d in zip(partitions, shape) if p > 1):
            raise ValueError("get_variable %r: the partitioner gave %r for shape %s: one entry "
                             "per dimension, each at least 1, at most one above 1, none above "
                             "its dimension" % (name, partitions, shape))
        if name in self._vars:
            raise ValueError("Variable %s already exists as an unpartitioned variable" % name)
        shapes, offsets = _shard_shapes(shape, partitions)
        for i in range(len(shapes)):
            self._check_name_is_free("%s/part_%d" % (name, i))
        shards = []
        for i, (part_shape, offset) in enumerate(zip(shapes, offsets)):
            info = init_ops._PartitionInfo(shape, offset, i)
            shard = self._make("%s/part_%d" % (name, i), part_shape, dtype, initializer, None,
                               trainable, collections, info, constraint)
            shards.append(shard)
            self._regularize("%s/part_%d" % (name, i), shard, regularizer)
        variable = PartitionedVariable(name, shape, dtype, shards, partitions)
        self._partitioned[name] = variable
        return variable

    def _regularize(self, name, variable, regularizer):
        if regularizer is None:
            return
        with self._graph.name_scope(name.rpartition("/")[2] + "/Regularizer"):
            loss = regularizer(variable)
        if loss is not None:
            self._graph.add_to_collection(GraphKeys.REGULARIZATION_LOSSES, loss)


def _collection_names(name, collections):
    """`collections` as a list of names, checked before the variable is made (a bad one found
    after would leave the variable in the graph)."""
    if collections is None:
        return []
    if isinstance(collections, str) or not isinstance(collections, (list, tuple, set)):
        raise ValueError("get_variable %r: collections is a list of collection names, not %r"
                         % (name, collections))
    for key in collections:
        if not isinstance(key, str):
            raise ValueError("get_variable %r: collection names are strings, not %r"
                             % (name, key))
    return list(collections)


def _default_initializer(name, dtype):
    if dtype.is_floating:
        return init_ops.glorot_uniform_initializer()
    if dtype.is_integer or dtype.is_bool:
        return init_ops.zeros_initializer()
    raise ValueError("An initializer for variable %s of %s is required" % (name, dtype.name))


class GraphKeys:
    """TF's collection names, for the collections actorflow's Python side keeps."""
    GLOBAL_VARIABLES = "variables"
    TRAINABLE_VARIABLES = "trainable_variables"
    REGULARIZATION_LOSSES = "regularization_losses"
    GLOBAL_STEP = "global_step"
    LOSSES = "losses"
    UPDATE_OPS = "update_ops"
    SUMMARIES = "summaries"
    # What tf.train.Supervisor finds (or makes and keeps) in its graph.
    INIT_OP = "init_op"
    LOCAL_INIT_OP = "local_init_op"
    READY_OP = "ready_op"
    READY_FOR_LOCAL_INIT_OP = "ready_for_local_init_op"
    SAVERS = "savers"
    SUMMARY_OP = "summary_op"


def _state(graph):
    """The graph's variable store, scope stack and default-name counts, made on first use."""
    state = getattr(graph, "_variable_scope_state", None)
    if state is None:
        state = graph._variable_scope_state = {
            "store": _VariableStore(graph),
            "stack": [VariableScope(None)],
            "counts": {},
        }
    return state


def get_variable_scope():
    """The innermost variable scope of the default graph."""
    return _state(get_default_graph())["stack"][-1]


def get_variable(name, shape=None, dtype=None, initializer=None, regularizer=None,
                 trainable=None, collections=None, caching_device=None, partitioner=None,
                 validate_shape=True, use_resource=None, custom_getter=None, constraint=None,
                 synchronization=None, aggregation=None):
    """The variable `name` of the current variable scope, made or reused by its reuse rule."""
    state = _state(get_default_graph())
    return state["stack"][-1].get_variable(
        state["store"], name, shape=shape, dtype=dtype, initializer=initializer,
        regularizer=regularizer, trainable=trainable, collections=collections,
        caching_device=caching_device, partitioner=partitioner, validate_shape=validate_shape,
        use_resource=use_resource, custom_getter=custom_getter, constraint=constraint)


@contextlib.contextmanager
def variable_scope(name_or_scope, default_name=None, values=None, initializer=None,
                   regularizer=None, caching_device=None, partitioner=None, custom_getter=None,
                   reuse=None, dtype=None, use_resource=None, constraint=None,
                   auxiliary_name_scope=True):
    """A variable scope (and, unless auxiliary_name_scope=False, a name scope of the same name).
    `name_or_scope` a string nests under the current scope; a VariableScope re-enters that scope
    (its full name and defaults, and its first name scope); None takes `default_name`, made
    unique ("dense", "dense_1", ...)."""
    if name_or_scope is None and default_name is None:
        raise TypeError("If default_name is None then name_or_scope is required")
    if reuse is False:
        reuse = None  # TF1: False means inherit
    if not (reuse is None or reuse is True or reuse is AUTO_REUSE):
        raise ValueError("variable_scope's reuse is True, None or tf.AUTO_REUSE, not %r" % (reuse,))
    graph = get_default_graph()
    state = _state(graph)
    parent = state["stack"][-1]
    if isinstance(name_or_scope, VariableScope):
        base = name_or_scope
        full_name = base.name
        name_scope_name = None  # re-entered below by its full name
    else:
        base = parent
        if name_or_scope is not None:
            if not isinstance(name_or_scope, str):
                raise TypeError("VariableScope: name_or_scope must be a string or VariableScope, "
                                "not %r" % (name_or_scope,))
            short = name_or_scope
        else:
            counted = (parent.name + "/" if parent.name else "") + default_name
            uses = state["counts"].get(counted, 0)
            state["counts"][counted] = uses + 1
            short = default_name if uses == 0 else "%s_%d" % (default_name, uses)
        full_name = parent.name + "/" + short if parent.name else short
        name_scope_name = short
    # Reuse is inherited by sub-scopes (TF: reuse or the enclosing scope's).
    reuse = reuse or base.reuse
    with contextlib.ExitStack() as scopes:
        opened = ""
        if auxiliary_name_scope:
            if name_scope_name is None:
                # A scope object re-enters the name scope it opened first, by its full name.
                scopes.enter_context(graph._absolute_name_scope(
                    base.original_name_scope.rstrip("/")))
                opened = base.original_name_scope
            else:
                opened = scopes.enter_context(graph.name_scope(name_scope_name))
        scope = VariableScope(
            reuse, name=full_name,
            initializer=initializer if initializer is not None else base.initializer,
            regularizer=regularizer if regularizer is not None else base.regularizer,
            caching_device=caching_device or base.caching_device,
            partitioner=partitioner if partitioner is not None else base.partitioner,
            custom_getter=custom_getter if custom_getter is not None else base.custom_getter,
            name_scope=opened if auxiliary_name_scope else base.original_name_scope,
            dtype=dtype if dtype is not None else base.dtype,
            use_resource=use_resource, constraint=constraint or base.constraint)
        state["stack"].append(scope)
        try:
            yield scope
        finally:
            state["stack"].pop()


def variable_op_scope(values, name_or_scope, default_name=None, **kwargs):
    """TF's older spelling of variable_scope(name_or_scope, default_name, values)."""
    return variable_scope(name_or_scope, default_name=default_name, values=values, **kwargs)


def get_collection(key, scope=None):
    """The default graph's collection `key` (GraphKeys) whose names start with `scope`."""
    from actorflow import ops
    if key == GraphKeys.GLOBAL_VARIABLES:
        return ops.global_variables(scope)
    if key == GraphKeys.TRAINABLE_VARIABLES:
        return ops.trainable_variables(scope)
    return get_default_graph().get_collection(key, scope)


def add_to_collection(name, value):
    get_default_graph().add_to_collection(name, value)


def get_regularization_loss(scope=None, name="total_regularization_loss"):
    """The sum of the regularization losses get_variable collected (0 when there are none)."""
    from actorflow import ops
    losses = get_collection(GraphKeys.REGULARIZATION_LOSSES, scope)
    if not losses:
        return ops.constant(0.0, name=name)
    return ops.add_n(losses, name=name)
