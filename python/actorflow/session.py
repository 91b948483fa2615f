"""Sessions (tf.Session) over actors/session.hpp.

    with tf.Session("grpc://127.0.0.1:2222") as sess:   # or "caf://...", or "" for in-process
        sess.run(init)
        w, (b, _) = sess.run([W, (b, train_op)], feed_dict={x: batch})

actorflow speaks CAF, not gRPC: a "grpc://host:port" target is taken to mean the actorflow
server at host:port ("caf://host:port"). A step runs with the GIL released, so other Python
threads go on while it runs.
"""

import threading

import numpy as np

from actorflow import _actorflow as _c
from actorflow import dtypes, errors
from actorflow.framework import IndexedSlices, Operation, Tensor, Variable, get_default_graph


class _Fields:
    """A message of TF's with the fields in _FIELDS (name: default) and no others: a field it
    lacks is an AttributeError naming the class and what it has."""

    _FIELDS = {}

    def __init__(self, **fields):
        for name, default in self._FIELDS.items():
            object.__setattr__(self, name, default)
        for name, value in fields.items():
            setattr(self, name, value)

    def __setattr__(self, name, value):
        if name not in self._FIELDS:
            raise AttributeError("actorflow's %s has no field %r (it has %s)"
                                 % (type(self).__name__, name, ", ".join(sorted(self._FIELDS))))
        object.__setattr__(self, name, value)


class GPUOptions(_Fields):
    """TF's GPUOptions: the share of each card's memory this process's sessions take, and
    whether they reserve it as tensors need it. visible_device_list must stay "": actorflow
    numbers the GPUs CUDA shows it (set CUDA_VISIBLE_DEVICES before the process starts)."""

    _FIELDS = {
        "per_process_gpu_memory_fraction": 0.0,
        "allow_growth": False,
        "visible_device_list": "",
    }

    def _check(self):
        if self.visible_device_list not in ("", None):
            raise ValueError("GPUOptions(visible_device_list=%r): actorflow uses the GPUs CUDA "
                             "shows the process; set CUDA_VISIBLE_DEVICES=%s before it starts"
                             % (self.visible_device_list, self.visible_device_list))
        fraction = float(self.per_process_gpu_memory_fraction)
        if not 0.0 <= fraction <= 1.0:
            raise ValueError("GPUOptions(per_process_gpu_memory_fraction=%r) must be in [0, 1]"
                             % (self.per_process_gpu_memory_fraction,))

    def __repr__(self):
        return "GPUOptions(%s)" % ", ".join("%s=%r" % (n, getattr(self, n)) for n in self._FIELDS)


class ConfigProto(_Fields):
    """The fields of TF's ConfigProto that actorflow's sessions have."""

    _FIELDS = {
        "log_device_placement": False,
        "allow_soft_placement": False,
        "inter_op_parallelism_threads": 0,
        "intra_op_parallelism_threads": 0,
        "use_per_session_threads": False,
        "operation_timeout_in_ms": 0,
        "gpu_options": None,
        # {"CPU": n, "GPU": k}: n CPU devices (/cpu:0 .. n-1, sharing the pools), at most k GPUs.
        "device_count": None,
        # The tasks a Server's master reaches (a between-graph worker: ["/job:ps",
        # "/job:worker/task:N"]); taken by tf.train.Server, not by sessions.
        "device_filters": (),
    }

    def __init__(self, **fields):
        super().__init__(**fields)
        if self.gpu_options is None:
            # Each config its own, so that config.gpu_options.allow_growth = True changes one.
            self.gpu_options = GPUOptions()
        if self.device_count is None:
            self.device_count = {}

    def _device_counts(self):
        """(CPU devices, GPU devices or -1 for all) from device_count; a ValueError names a key
        or count actorflow cannot use."""
        counts = dict(self.device_count)
        for key, value in counts.items():
            if key not in ("CPU", "GPU"):
                raise ValueError("ConfigProto(device_count=%r): actorflow has CPU and GPU devices, "
                                 "not %r" % (self.device_count, key))
            if not isinstance(value, int) or value < 0 or (key == "CPU" and value < 1):
                raise ValueError("ConfigProto(device_count=%r): %s needs a count of at least %d"
                                 % (self.device_count, key, 1 if key == "CPU" else 0))
        return counts.get("CPU", 1), counts.get("GPU", -1)


    def __repr__(self):
        return "ConfigProto(%s)" % ", ".join("%s=%r" % (n, getattr(self, n)) for n in self._FIELDS)


class RunOptions(_Fields):
    """TF's RunOptions for Session.run. trace_level is taken at every level (the step's times go
    to RunMetadata.step_stats whenever a RunMetadata is given); report_tensor_allocations_upon_oom
    adds nothing (an out-of-memory error already names the node, device and limit).
    timeout_in_ms bounds the step: past it the step is aborted on every device and run raises
    DeadlineExceededError, the session still usable. An inter_op_thread_pool or
    output_partition_graphs makes Session.run raise ValueError: actorflow has one inter-op pool
    per session and does not hand out the partitions' graphs."""

    NO_TRACE, SOFTWARE_TRACE, HARDWARE_TRACE, FULL_TRACE = 0, 1, 2, 3

    _FIELDS = {
        "trace_level": 0,
        "timeout_in_ms": 0,
        "inter_op_thread_pool": 0,
        "output_partition_graphs": False,
        "report_tensor_allocations_upon_oom": False,
    }
    # What each refused field would need, for the error.
    _REFUSED = {
        "inter_op_thread_pool": "a choice of inter-op pool, and a session has one",
        "output_partition_graphs": "the partitions' graphs, which actorflow's session does not "
                                   "hand out",
    }


    def _check(self):
        for name, why in self._REFUSED.items():
            if getattr(self, name) != self._FIELDS[name]:
                raise ValueError("Session.run: RunOptions(%s=%r) asks for %s"
                                 % (name, getattr(self, name), why))

    def __repr__(self):
        return "RunOptions(%s)" % ", ".join("%s=%r" % (n, getattr(self, n)) for n in self._FIELDS)


class StepStats:
    """RunMetadata.step_stats: where the time of the step went, as actorflow's session measures
    it (actors/session.hpp's step_stats): total_seconds, from the call to the return, and
    execution_seconds, the longest time a device spent executing its partition. TF's per-node
    dev_stats stay empty: actorflow does not record them."""

    def __init__(self):
        self.dev_stats = []
        self.total_seconds = 0.0
        self.execution_seconds = 0.0

    def __repr__(self):
        return "StepStats(total_seconds=%g, execution_seconds=%g)" % (self.total_seconds,
                                                                      self.execution_seconds)


class RunMetadata:
    """TF's RunMetadata, filled by Session.run(..., run_metadata=): step_stats (StepStats); no
    partition_graphs and no cost_graph (actorflow's session gives neither)."""

    def __init__(self):
        self.Clear()

    def Clear(self):  # noqa: N802 - the protobuf method's name
        self.step_stats = StepStats()
        self.partition_graphs = []
        self.cost_graph = None


def _native_target(target):
    """The C++ session's target: "" (in-process) or "caf://host:port"."""
    if target is None or target == "":
        return ""
    if not isinstance(target, str):
        raise TypeError("a session target is a string, not %r" % (target,))
    if target.startswith("grpc://"):
        target = "caf://" + target[len("grpc://"):]
    elif not target.startswith("caf://"):
        raise ValueError("Session target %r: actorflow takes '' (in-process), "
                         "'grpc://host:port' or 'caf://host:port' (it speaks CAF either way)"
                         % target)
    _c.parse_target(target)  # InvalidArgumentError quoting a malformed one
    return target


_default_sessions = threading.local()


def _session_stack():
    if not hasattr(_default_sessions, "stack"):
        _default_sessions.stack = []
    return _default_sessions.stack


def get_default_session():
    stack = _session_stack()
    return stack[-1] if stack else None


def _session_for(element, session):
    session = session or get_default_session()
    if session is None:
        raise ValueError("Cannot evaluate %r: No default session is registered. Use `with "
                         "sess.as_default()` or pass an explicit session to "
                         "`eval(session=sess)`" % (element,))
    if session.graph is not element.graph:
        raise ValueError("Cannot use the given session to evaluate %r: the tensor's graph is "
                         "different from the session's graph." % (element,))
    return session


class _DefaultSession:
    def __init__(self, session):
        self._session = session

    def __enter__(self):
        _session_stack().append(self._session)
        return self._session

    def __exit__(self, *exc):
        _session_stack().remove(self._session)


class Session:
    """A session on `target` running `graph` (the default graph when None)."""

    def __init__(self, target="", graph=None, config=None):
        self._graph = graph if graph is not None else get_default_graph()
        self._target = target or ""
        config = config if config is not None else ConfigProto()
        timeout = config.operation_timeout_in_ms / 1000.0 if config.operation_timeout_in_ms else 0.0
        gpu = config.gpu_options
        gpu._check()
        cpu_devices, gpu_devices = config._device_counts()
        self._c = _c.Session(self._graph._c, _native_target(target),
                             bool(config.log_device_placement), bool(config.allow_soft_placement),
                             int(config.inter_op_parallelism_threads),
                             int(config.intra_op_parallelism_threads), float(timeout), 60.0,
                             bool(config.use_per_session_threads),
                             float(gpu.per_process_gpu_memory_fraction), bool(gpu.allow_growth),
                             cpu_devices, gpu_devices)
        self._context = []
        self._used_feed_cache = {}

    @property
    def graph(self):
        return self._graph

    @property
    def sess_str(self):
        return self._target

    def as_default(self):
        return _DefaultSession(self)

    def __enter__(self):
        graph_context = self._graph.as_default()
        session_context = self.as_default()
        graph_context.__enter__()
        session_context.__enter__()
        self._context.append((graph_context, session_context))
        return self

    def __exit__(self, exc_type, exc_value, traceback):
        graph_context, session_context = self._context.pop()
        session_context.__exit__(exc_type, exc_value, traceback)
        graph_context.__exit__(exc_type, exc_value, traceback)
        self.close()

    def close(self):
        if not self._c.closed:
            self._c.close()

    def list_devices(self):
        return list(self._c.device_names())

    def run(self, fetches, feed_dict=None, options=None, run_metadata=None):
        """The values of `fetches` (a Tensor, Operation, Variable or tensor name, or lists,
        tuples, namedtuples and dicts of them) in the same structure: numpy values, None for an
        Operation."""
        if options is not None:
            if not isinstance(options, RunOptions):
                raise TypeError("Session.run: options must be a tf.RunOptions, not %r" % (options,))
            options._check()
        if run_metadata is not None and not isinstance(run_metadata, RunMetadata):
            raise TypeError("Session.run: run_metadata must be a tf.RunMetadata, not %r"
                            % (run_metadata,))
        if self._c.closed:
            raise RuntimeError("Attempted to use a closed Session.")
        step = _StepPlan(self, fetches, feed_dict)
        timeout_ms = max(0, int(options.timeout_in_ms)) if options is not None else 0
        if run_metadata is None:
            return step.values(self._c.run(step.fetch_outputs, step.feed_outputs,
                                           step.feed_values, step.targets, timeout_ms))
        arrays, total, execution = self._c.run_with_stats(step.fetch_outputs, step.feed_outputs,
                                                          step.feed_values, step.targets,
                                                          timeout_ms)
        run_metadata.step_stats.total_seconds = total
        run_metadata.step_stats.execution_seconds = execution
        return step.values(arrays)

    def _used_feeds(self, leaves, feed_outputs):
        """For each fed output, whether the step reaches it from its fetches and targets (walking
        data and control inputs, stopping at fed outputs). Cached per fetches, feeds and graph
        size, as a training loop runs the same step over and over."""
        fed = [(o.node_id, o.index) for o in feed_outputs]
        roots = tuple((leaf.op._node_id, leaf.value_index) if isinstance(leaf, Tensor)
                      else (leaf._node_id, None) for leaf in leaves)
        key = (roots, tuple(fed), self._graph._c.size())
        cached = self._used_feed_cache.get(key)
        if cached is not None:
            return cached
        graph = self._graph._c
        fed_set = set(fed)
        used = set()
        seen = set()
        stack = []
        for node_id, index in roots:
            if index is not None and (node_id, index) in fed_set:
                used.add((node_id, index))
            else:
                stack.append(node_id)
        while stack:
            node_id = stack.pop()
            if node_id in seen:
                continue
            seen.add(node_id)
            for source in graph.node_inputs(node_id):
                if source in fed_set:
                    used.add(source)
                else:
                    stack.append(source[0])
            stack.extend(graph.node_control_inputs(node_id))
        result = [f in used for f in fed]
        if len(self._used_feed_cache) > 64:
            self._used_feed_cache.clear()
        self._used_feed_cache[key] = result
        return result

    def _feeds(self, feed_dict):
        outputs, values = [], []
        for key, value in (feed_dict or {}).items():
            try:
                element = self._graph.as_graph_element(key)
            except (TypeError, KeyError, ValueError) as error:
                raise TypeError("Cannot interpret feed_dict key as Tensor: %s" % error) from None
            if not isinstance(element, Tensor):
                raise TypeError("Cannot interpret feed_dict key as Tensor: %r is an Operation"
                                % (key,))
            outputs.append(element._output)
            values.append(_feed_array(element, value))
        return outputs, values


class InteractiveSession(Session):
    """A Session that is the default session from its creation until it is closed."""

    def __init__(self, target="", graph=None, config=None):
        super().__init__(target, graph, config)
        self._default = self.as_default()
        self._default.__enter__()

    def close(self):
        if self._default is not None:
            self._default.__exit__(None, None, None)
            self._default = None
        super().close()


class _StepPlan:
    """One step's fetches and feeds for the C++ session: the outputs to fetch (each once), the
    targets, the feeds the step reaches, and how to put the values back in the fetches' shape.
    Session.run and the monitored session share it; `extra_roots` are tensors besides the
    fetches whose feeds count as used (a monitored session's hooks fetch them)."""

    def __init__(self, session, fetches, feed_dict, extra_roots=()):
        graph = session._graph
        if graph._c.size() == 0:
            raise RuntimeError("The Session graph is empty. Add operations to the graph before "
                               "calling run().")
        construction_error = graph._c.error()
        if construction_error is not None:
            raise errors.FailedPreconditionError(
                None, None, "the graph has an error from building it, so actorflow runs none of "
                "it (build a new graph): %s" % construction_error[1])
        leaves = []
        self._structure = _flatten_fetches(graph, fetches, leaves)
        self._leaves = leaves
        feed_outputs, feed_values = session._feeds(feed_dict)
        self._fetch_index = {}   # (node id, output) -> position among the fetched outputs
        self.fetch_outputs = []
        self.targets = []
        for leaf in leaves:
            if isinstance(leaf, Tensor):
                key = (leaf.op._node_id, leaf.value_index)
                if key not in self._fetch_index:
                    self._fetch_index[key] = len(self.fetch_outputs)
                    self.fetch_outputs.append(leaf._output)
            else:
                self.targets.append(graph._c.op_handle(leaf._node_id))
        # TF accepts feeds the step does not need; actorflow's master refuses a fed tensor that
        # pruning left out, so those are dropped here.
        used = session._used_feeds(leaves + list(extra_roots), feed_outputs)
        self.feed_outputs = [o for o, u in zip(feed_outputs, used) if u]
        self.feed_values = [v for v, u in zip(feed_values, used) if u]

    def values(self, arrays):
        """The fetched `arrays` (in fetch_outputs' order) in the fetches' structure."""
        values = []
        for leaf in self._leaves:
            if isinstance(leaf, Tensor):
                array = arrays[self._fetch_index[(leaf.op._node_id, leaf.value_index)]]
                values.append(array[()] if array.ndim == 0 else array)
            else:
                values.append(None)
        return _rebuild(self._structure, values)


def _planner(graph):
    """A Session that never runs, for its fetch and feed checks over `graph` (_StepPlan): the
    monitored session and its hooks check theirs as Session.run does."""
    planner = Session.__new__(Session)
    planner._graph = graph
    planner._target = ""
    planner._context = []
    planner._used_feed_cache = {}
    planner._c = None
    return planner


def _borrowed(graph, native_session):
    """A tf.Session over a C++ session a monitored session lends a hook for one call (it is
    closed when the call returns)."""
    session = _planner(graph)
    session._c = native_session
    return session


def _feed_array(tensor, value):
    """`value` as an array for placeholder (or tensor) `tensor`: its dtype and shape checked,
    an error naming the tensor when they do not fit."""
    target = tensor.dtype
    if isinstance(value, (Tensor, Variable, Operation)):
        raise TypeError("The value of a feed cannot be a tf.Tensor object (feeding %r). "
                        "Acceptable feed values include Python scalars, strings, lists, numpy "
                        "ndarrays." % tensor.name)
    try:
        array = np.asarray(value)
    except ValueError as error:
        raise ValueError("Cannot feed %r into '%s': %s" % (value, tensor.name, error)) from None
    kind = array.dtype.kind
    fits = kind in "fiub" and not (target.is_integer and kind == "f") and \
        target.is_bool == (kind == "b")
    if not fits:
        raise TypeError("Cannot feed a value of dtype %s into '%s', which has dtype %s"
                        % (array.dtype, tensor.name, target.name))
    array = np.require(array, dtype=target.as_numpy_dtype, requirements="C")
    if not tensor.shape.is_compatible_with(dtypes.TensorShape(list(array.shape))):
        raise ValueError("Cannot feed value of shape %s for Tensor '%s', which has shape '%s'"
                         % (array.shape, tensor.name, tensor.shape))
    return array


def _flatten_fetches(graph, fetch, leaves):
    """A template of `fetch`'s structure whose leaves index into `leaves` (Tensors, Operations)."""
    if fetch is None:
        raise TypeError("Fetch argument None has invalid type <class 'NoneType'>")
    if isinstance(fetch, dict):
        return ("dict", type(fetch), [(k, _flatten_fetches(graph, v, leaves)) for k, v in fetch.items()])
    if isinstance(fetch, tuple) and hasattr(fetch, "_fields"):
        return ("namedtuple", type(fetch), [_flatten_fetches(graph, v, leaves) for v in fetch])
    if isinstance(fetch, (list, tuple)):
        return (type(fetch).__name__, type(fetch), [_flatten_fetches(graph, v, leaves) for v in fetch])
    if isinstance(fetch, IndexedSlices):
        fetch = fetch._dense    # its dense value (TF would give an IndexedSlicesValue)
    from actorflow.summary import _SummaryOp
    if isinstance(fetch, _SummaryOp):  # its values' tensors, serialized once fetched
        return ("summary", fetch, [_flatten_fetches(graph, t, leaves) for _, _, t in fetch._entries])
    from actorflow.sparse import SparseTensor, SparseTensorValue
    if isinstance(fetch, SparseTensor):
        return ("namedtuple", SparseTensorValue,
                [_flatten_fetches(graph, t, leaves)
                 for t in (fetch.indices, fetch.values, fetch.dense_shape)])
    try:
        element = graph.as_graph_element(fetch)
    except TypeError:
        raise TypeError("Fetch argument %r has invalid type %s, must be a string or Tensor."
                        % (fetch, type(fetch))) from None
    except (KeyError, ValueError) as error:
        raise ValueError("Fetch argument %r cannot be interpreted as a Tensor. (%s)"
                         % (fetch, error)) from None
    if isinstance(element, Tensor) and element.op.type == "NoOp":
        element = element.op
    leaves.append(element)
    return ("leaf", None, len(leaves) - 1)


def _rebuild(structure, values):
    kind, cls, content = structure
    if kind == "leaf":
        return values[content]
    if kind == "dict":
        return cls((k, _rebuild(s, values)) for k, s in content)
    if kind == "namedtuple":
        return cls(*[_rebuild(s, values) for s in content])
    if kind == "summary":
        return cls._serialize([_rebuild(s, values) for s in content])
    return cls(_rebuild(s, values) for s in content)
