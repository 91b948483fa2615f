"""tf.train's training loop over actorflow's C++ training library (apps/train/, actors/saver.hpp):
Saver, MonitoredTrainingSession, its hooks and SyncReplicasOptimizer. The loop, the
checkpoints, the waits for the chief and for a lost ps are the C++ ones; Python only turns TF's
arguments into theirs. Hooks written in Python (SessionRunHook subclasses) run inside the C++
loop, which takes the GIL only while it calls them.

    global_step = tf.train.get_or_create_global_step()
    train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=global_step)
    hooks = [tf.train.StopAtStepHook(last_step=1000)]
    with tf.train.MonitoredTrainingSession(master=server.target, is_chief=task == 0,
                                           checkpoint_dir="/tmp/ckpt", hooks=hooks) as sess:
        while not sess.should_stop():
            sess.run(train_op, feed_dict={x: batch})
"""

import collections
import logging
import os

from actorflow import _actorflow as _c
from actorflow import errors
from actorflow import session as _session
from actorflow.framework import Tensor, Variable, flat_variables, get_default_graph

# --- Saver -------------------------------------------------------------------------------------------


class Saver:
    """Saves and restores variables (tf.train.Saver) through actors/saver.hpp. actorflow's
    checkpoints are one file per step, `<dir>/ckpt-<step>.afckpt`, with an index file beside them
    (serialization/checkpoint.hpp): save(sess, "/tmp/run/model.ckpt", global_step=7) writes
    /tmp/run/ckpt-7.afckpt (the prefix's directory is kept, its file name is not) and returns
    that path, which restore() and latest_checkpoint() take."""

    def __init__(self, var_list=None, reshape=False, sharded=False, max_to_keep=5,
                 keep_checkpoint_every_n_hours=10000.0, name=None, restore_sequentially=False,
                 saver_def=None, builder=None, defer_build=False, allow_empty=False,
                 write_version=None, pad_step_number=False, save_relative_paths=False,
                 filename=None):
        if reshape or saver_def is not None or builder is not None or defer_build:
            raise ValueError("Saver: reshape, saver_def, builder and defer_build are not "
                             "supported by actorflow")
        graph = get_default_graph()
        if var_list is None:
            from actorflow import ops as _ops
            var_list = _ops.global_variables()
        elif isinstance(var_list, dict):
            var_list = list(var_list.values())
        var_list = flat_variables(var_list)
        for v in var_list:
            if not isinstance(v, Variable):
                raise TypeError("Saver's var_list holds Variables, not %r" % (v,))
            if v.graph is not graph:
                raise ValueError("Saver: variable %r is not in the default graph" % v.name)
        if not var_list:
            if allow_empty:
                self._c = None
                return
            raise ValueError("No variables to save")
        self._graph = graph
        self._max_to_keep = int(max_to_keep or 0)
        self._c = _c.Saver(graph._c, [v._handle for v in var_list])
        graph._built(None)

    def save(self, sess, save_path, global_step=None, latest_filename=None,
             meta_graph_suffix="meta", write_meta_graph=True, write_state=True,
             strip_default_attrs=False, save_debug_info=False):
        """Writes the variables' values as the checkpoint of `global_step` (an int, or a
        Tensor or Variable that `sess` reads; 0 when None) in save_path's directory; returns
        the file's path."""
        if self._c is None:
            return None
        native = _native_session(sess, "Saver.save")
        if global_step is None:
            step = 0
        elif isinstance(global_step, (Tensor, Variable)):
            step = int(sess.run(global_step))
        else:
            step = int(global_step)
        if step < 0:
            raise ValueError("Saver.save: global_step is %d; checkpoints have steps >= 0" % step)
        directory = os.path.dirname(save_path) or "."
        return self._c.save(native, directory, self._max_to_keep, step)

    def restore(self, sess, save_path):
        """Assigns every variable its value in the checkpoint at `save_path` (a path that save()
        or latest_checkpoint() returned); nothing changes when any of them does not fit."""
        if save_path is None:
            raise ValueError("Can't load save_path when it is None.")
        if self._c is None:
            return
        self._c.restore(_native_session(sess, "Saver.restore"), save_path)

    @property
    def last_checkpoints(self):
        raise AttributeError("Saver.last_checkpoints: actorflow has none yet; use "
                             "tf.train.latest_checkpoint(dir)")


def _native_session(sess, what):
    if not isinstance(sess, _session.Session):
        raise TypeError("%s takes a tf.Session, not %r (a MonitoredTrainingSession saves its "
                        "own checkpoints: checkpoint_dir)" % (what, sess))
    if sess._c.closed:
        raise RuntimeError("Attempted to use a closed Session.")
    return sess._c


def latest_checkpoint(checkpoint_dir, latest_filename=None):
    """The newest checkpoint in `checkpoint_dir` that verifies, or None."""
    if latest_filename is not None:
        raise ValueError("latest_checkpoint: actorflow's checkpoint index has a fixed name; "
                         "latest_filename is not supported")
    if not checkpoint_dir or not os.path.isdir(checkpoint_dir):
        return None
    return _c.latest_checkpoint(checkpoint_dir)


# --- hooks ---------------------------------------------------------------------------------------------

SessionRunArgs = collections.namedtuple("SessionRunArgs", ["fetches", "feed_dict", "options"])
SessionRunArgs.__new__.__defaults__ = (None, None)
SessionRunValues = collections.namedtuple("SessionRunValues",
                                          ["results", "options", "run_metadata"])


class SessionRunContext:
    """What a hook's before_run and after_run see of the step."""

    def __init__(self, original_args, session):
        self._original_args = original_args
        self._session = session
        self._stop_requested = False

    @property
    def original_args(self):
        return self._original_args

    @property
    def session(self):
        """The session underneath, usable during the hook's call only."""
        return self._session

    @property
    def stop_requested(self):
        return self._stop_requested

    def request_stop(self):
        self._stop_requested = True


class SessionRunHook:
    """Subclass it and override what you need (tf.train.SessionRunHook); every method is called
    by the C++ monitored session, on the thread that runs the step."""

    def begin(self):
        pass

    def after_create_session(self, session, coord):
        pass

    def before_run(self, run_context):
        return None

    def after_run(self, run_context, run_values):
        pass

    def end(self, session):
        pass


class _NativeHook(SessionRunHook):
    """A hook of the C++ library: _make(global_step, place) makes it for one session."""

    def _make(self, global_step, place):
        raise NotImplementedError


class StopAtStepHook(_NativeHook):
    """Stops once the global step reaches last_step (train::stop_at_step_hook), or num_steps
    after the step the session started from (a Python hook: the C++ one needs the last step
    before the session restores it)."""

    def __init__(self, num_steps=None, last_step=None):
        if num_steps is None and last_step is None:
            raise ValueError("One of num_steps or last_step must be specified.")
        if num_steps is not None and last_step is not None:
            raise ValueError("Only one of num_steps or last_step can be specified.")
        self._num_steps = None if num_steps is None else int(num_steps)
        self._last_step = None if last_step is None else int(last_step)

    def _make(self, global_step, place):
        if self._last_step is not None:
            return _c.stop_at_step_hook(global_step._handle.read, self._last_step)
        return _c.python_hook(_HookAdapter(_StopAfterSteps(global_step, self._num_steps),
                                           place.owner))


class _StopAfterSteps(SessionRunHook):
    def __init__(self, global_step, num_steps):
        self._global_step = global_step
        self._num_steps = num_steps
        self._last_step = None

    def after_create_session(self, session, coord):
        if self._last_step is None:   # again after a lost ps: the same last step
            self._last_step = int(session.run(self._global_step)) + self._num_steps

    def before_run(self, run_context):
        return SessionRunArgs(self._global_step.value())

    def after_run(self, run_context, run_values):
        # The read may come before this step's own increment: count it.
        if run_values.results + 1 >= self._last_step:
            run_context.request_stop()


class NanTensorHook(_NativeHook):
    """Fails the step, naming it, when the loss is NaN or infinite (train::nan_loss_hook)."""

    def __init__(self, loss_tensor, fail_on_nan_loss=True):
        if not fail_on_nan_loss:
            raise ValueError("NanTensorHook(fail_on_nan_loss=False) is not supported yet: the "
                             "C++ hook fails the step")
        if not isinstance(loss_tensor, Tensor):
            raise TypeError("NanTensorHook takes the loss Tensor, not %r" % (loss_tensor,))
        # The C++ hook reads the loss's first element: a scalar it must be.
        if loss_tensor.shape.ndims != 0:
            raise ValueError("NanTensorHook takes a scalar loss; %r has shape %s"
                             % (loss_tensor.name, loss_tensor.shape))
        self._loss = loss_tensor

    def _make(self, global_step, place):
        return _c.nan_loss_hook(self._loss._output, global_step._handle.read)


class LoggingTensorHook(_NativeHook):
    """Logs tensors' values every every_n_iter steps (train::logging_hook), to the "actorflow"
    logger at INFO ("name = value, ..."), or through formatter(dict of name: value)."""

    def __init__(self, tensors, every_n_iter=None, every_n_secs=None, at_end=False,
                 formatter=None):
        if every_n_secs is not None or at_end:
            raise ValueError("LoggingTensorHook: every_n_secs and at_end are not supported yet "
                             "(the C++ hook logs every n steps)")
        if every_n_iter is None or int(every_n_iter) < 1:
            raise ValueError("LoggingTensorHook needs every_n_iter >= 1, got %r" % (every_n_iter,))
        if isinstance(tensors, dict):
            items = list(tensors.items())
        else:
            items = [(t if isinstance(t, str) else t.name, t) for t in tensors]
        self._items = items
        self._every_n = int(every_n_iter)
        self._formatter = formatter

    def _make(self, global_step, place):
        graph = place.graph
        names, outputs = [], []
        for name, t in self._items:
            element = graph.as_graph_element(t)
            if not isinstance(element, Tensor):
                raise TypeError("LoggingTensorHook logs Tensors, not the Operation %r" % (name,))
            names.append(name)
            outputs.append(element._output)
        formatter = self._formatter

        def log(step, arrays):
            values = {n: (a[()] if a.ndim == 0 else a) for n, a in zip(names, arrays)}
            if formatter is not None:
                line = formatter(values)
            else:
                line = ", ".join("%s = %s" % (n, values[n]) for n in names)
            logging.getLogger("actorflow").info("%s (step %d)", line, step)

        return _c.logging_hook(outputs, self._every_n, log)


class NanLossDuringTrainingError(RuntimeError):
    """Raised by run() when NanTensorHook found the loss NaN or infinite."""

    def __str__(self):
        return "NaN loss during training. " + RuntimeError.__str__(self)


class CheckpointSaverHook(SessionRunHook):
    """Saves checkpoints every save_steps steps; the monitored session does it (its
    checkpoint_dir and save_checkpoint_steps), so this hook only carries those options."""

    def __init__(self, checkpoint_dir, save_secs=None, save_steps=None, saver=None,
                 checkpoint_basename="model.ckpt", scaffold=None, listeners=None):
        if save_secs is not None or saver is not None or scaffold is not None or listeners:
            raise ValueError("CheckpointSaverHook: save_secs, saver, scaffold and listeners are "
                             "not supported yet (checkpoints are saved by steps)")
        if save_steps is None or int(save_steps) < 1:
            raise ValueError("CheckpointSaverHook needs save_steps >= 1, got %r" % (save_steps,))
        self.checkpoint_dir = checkpoint_dir
        self.save_steps = int(save_steps)


class _HookAdapter:
    """What the C++ python_hook calls: it runs the user's hook, converts its SessionRunArgs to
    outputs and arrays, and returns an exception's text after keeping the exception for
    MonitoredSession.run to raise (C++ code ends the step with an error; Python sees its
    own exception)."""

    def __init__(self, hook, owner):
        self._hook = hook
        self._owner = owner
        self._context = None
        self._structure = None

    def _failed(self, error):
        if self._owner._hook_error is None:
            self._owner._hook_error = error
        return "%s: %s" % (type(error).__name__, error)

    def begin(self):
        try:
            with self._owner.graph.as_default():
                self._hook.begin()
            return None
        except BaseException as error:  # noqa: B902 - handed to the caller of run, not lost
            return self._failed(error)

    def after_create_session(self, native_session):
        try:
            self._hook.after_create_session(self._owner._borrowed(native_session), None)
            return None
        except BaseException as error:  # noqa: B902
            return self._failed(error)

    def before_run(self, native_session):
        try:
            self._context = SessionRunContext(self._owner._current_args,
                                              self._owner._borrowed(native_session))
            args = self._hook.before_run(self._context)
            self._structure = None
            if args is None:
                return ([], [], [])
            if not isinstance(args, SessionRunArgs):
                raise TypeError("%s.before_run returns a tf.train.SessionRunArgs or None, not %r"
                                % (type(self._hook).__name__, args))
            outputs = []
            if args.fetches is not None:
                leaves = []
                self._structure = _session._flatten_fetches(self._owner.graph, args.fetches,
                                                            leaves)
                for leaf in leaves:
                    if not isinstance(leaf, Tensor):
                        raise TypeError("%s.before_run: actorflow's hooks fetch Tensors only, "
                                        "not the Operation %r" % (type(self._hook).__name__,
                                                                  leaf.name))
                    outputs.append(leaf._output)
            feed_outputs, feed_values = self._owner._planner._feeds(args.feed_dict)
            return (outputs, feed_outputs, feed_values)
        except BaseException as error:  # noqa: B902
            return self._failed(error)

    def after_run(self, arrays):
        try:
            results = None
            if self._structure is not None:
                results = _session._rebuild(
                    self._structure, [a[()] if a.ndim == 0 else a for a in arrays])
            self._hook.after_run(self._context, SessionRunValues(results, None, None))
            return bool(self._context.stop_requested)
        except BaseException as error:  # noqa: B902
            return self._failed(error)

    def end(self, native_session):
        try:
            self._hook.end(self._owner._borrowed(native_session))
            return None
        except BaseException as error:  # noqa: B902
            return self._failed(error)


# --- the monitored session ------------------------------------------------------------------------

_started_servers = []   # (target, native cluster, job, task) of this process's tf.train.Servers


def _register_server(target, native_cluster, job, task):
    _started_servers.append((target, native_cluster, job, task))


class _Place:
    """Where a monitored session runs: its graph, and the server of its master when it is one
    of this process's (the cluster a sync hook and the ps-loss probe need)."""

    def __init__(self, graph, master):
        self.graph = graph
        self.owner = None       # the MonitoredSession being made (for hooks written in Python)
        self.cluster = None
        self.job = None
        self.task = None
        target = _session._native_target(master)
        for server_target, cluster, job, task in _started_servers:
            if server_target == target:
                self.cluster, self.job, self.task = cluster, job, task


_USE_DEFAULT = object()


class MonitoredSession:
    """What MonitoredTrainingSession returns: run() steps with the hooks around them,
    should_stop(), close(); a context manager (closing, and ending quietly on OutOfRangeError
    as TF's does)."""

    def __init__(self, graph, native_args, hooks, place):
        self.graph = graph
        self._hook_error = None
        self._current_args = None
        self._planner = _session._planner(graph)
        global_step = native_args["global_step"]
        native_hooks = []
        self._adapters = []
        hook_roots = []
        place.owner = self
        for hook in hooks:
            if isinstance(hook, _NativeHook):
                native_hooks.append(hook._make(global_step, place))
                if isinstance(hook, NanTensorHook):
                    hook_roots.append(hook._loss)
            else:
                adapter = _HookAdapter(hook, self)
                self._adapters.append(adapter)
                native_hooks.append(_c.python_hook(adapter))
        self._hook_roots = hook_roots
        self._nan_losses = [h._loss.name for h in hooks if isinstance(h, NanTensorHook)]
        native_args = dict(native_args, global_step=global_step._handle, hooks=native_hooks)
        try:
            self._c = _c.MonitoredSession(graph._c, **native_args)
        except errors.OpError:
            self._raise_hook_error()
            raise
        self._raise_hook_error()

    def _borrowed(self, native_session):
        return _session._borrowed(self.graph, native_session)

    def _raise_hook_error(self):
        error, self._hook_error = self._hook_error, None
        if error is not None:
            raise error

    def run(self, fetches, feed_dict=None, options=None, run_metadata=None):
        if options is not None or run_metadata is not None:
            raise ValueError("MonitoredSession.run: options and run_metadata are not supported "
                             "yet")
        if self._c.closed:
            raise RuntimeError("Attempted to use a closed MonitoredSession.")
        step = _session._StepPlan(self._planner, fetches, feed_dict, self._hook_roots)
        self._current_args = SessionRunArgs(fetches, feed_dict)
        try:
            arrays = self._c.run(step.fetch_outputs, step.feed_outputs, step.feed_values,
                                 step.targets)
        except errors.OutOfRangeError as error:
            self._raise_hook_error()
            # train::nan_loss_hook's error ("the loss is nan at global step N"), out_of_range;
            # TF raises NanLossDuringTrainingError, which a `with` block does not swallow as it
            # does OutOfRangeError (the end of the input).
            if self._nan_losses and error.message.startswith("the loss is "):
                raise NanLossDuringTrainingError("%s (%s)" % (error.message,
                                                              ", ".join(self._nan_losses))) from None
            raise
        except errors.OpError:
            self._raise_hook_error()
            raise
        finally:
            self._current_args = None
        self._raise_hook_error()
        return step.values(arrays)

    def should_stop(self):
        return self._c.closed or self._c.should_stop()

    def global_step(self):
        """The global step as the C++ session knows it (not in TF's API); exact after close()."""
        return self._c.global_step()

    def close(self):
        """The hooks' end, the chief's last checkpoint."""
        try:
            self._c.close()
        finally:
            self._raise_hook_error()

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc_value, traceback):
        try:
            self.close()
        except Exception:  # noqa: BLE001 - the exception already leaving wins
            if exc_type is None:
                raise
        return exc_type is not None and issubclass(exc_type, errors.OutOfRangeError)


def _refuse_session_only_fields(config):
    """A ValueError for the ConfigProto fields only tf.Session takes (the monitored session's
    C++ options have no place for them): refused rather than ignored."""
    gpu = config.gpu_options
    taken = [name for name, is_set in (
        ("use_per_session_threads", bool(config.use_per_session_threads)),
        ("device_count", bool(config.device_count)),
        ("gpu_options.per_process_gpu_memory_fraction", bool(gpu.per_process_gpu_memory_fraction)),
        ("gpu_options.allow_growth", bool(gpu.allow_growth)),
        ("gpu_options.visible_device_list", bool(gpu.visible_device_list))) if is_set]
    if taken:
        raise ValueError("MonitoredTrainingSession(config=...): %s are taken by tf.Session only, "
                         "not by actorflow's monitored session yet" % ", ".join(taken))


def MonitoredTrainingSession(master="", is_chief=True, checkpoint_dir=None, scaffold=None,  # noqa: N802
                             hooks=None, chief_only_hooks=None,
                             save_checkpoint_secs=_USE_DEFAULT,
                             save_summaries_steps=_USE_DEFAULT, save_summaries_secs=_USE_DEFAULT,
                             config=None, stop_grace_period_secs=120, log_step_count_steps=100,
                             max_wait_secs=7200, save_checkpoint_steps=_USE_DEFAULT,
                             summary_dir=None):
    """A train::monitored_session on `master` over the default graph: the chief restores the
    latest checkpoint of checkpoint_dir or initialises the variables, the other workers wait for
    them; checkpoints every save_checkpoint_steps steps and at the end (the chief). actorflow
    saves by steps: save_checkpoint_secs and save_summaries_secs must be left out or None."""
    from actorflow import train as _train
    if scaffold is not None:
        raise ValueError("MonitoredTrainingSession(scaffold=...) is not supported yet")
    for name, value in (("save_checkpoint_secs", save_checkpoint_secs),
                        ("save_summaries_secs", save_summaries_secs)):
        if value is not _USE_DEFAULT and value is not None:
            raise ValueError("MonitoredTrainingSession(%s=%r): actorflow saves by steps; give "
                             "save_checkpoint_steps / save_summaries_steps" % (name, value))
    graph = get_default_graph()
    global_step = _train.get_or_create_global_step(graph)
    place = _Place(graph, master)
    hooks = list(hooks or []) + (list(chief_only_hooks or []) if is_chief else [])
    for hook in hooks:
        if not isinstance(hook, SessionRunHook):
            raise TypeError("hooks are tf.train.SessionRunHook objects, not %r" % (hook,))
    steps = 0 if save_checkpoint_steps in (_USE_DEFAULT, None) else int(save_checkpoint_steps)
    for hook in hooks:
        if isinstance(hook, CheckpointSaverHook):
            if checkpoint_dir and hook.checkpoint_dir != checkpoint_dir:
                raise ValueError("CheckpointSaverHook(%r) and checkpoint_dir=%r: actorflow's "
                                 "monitored session saves into one directory"
                                 % (hook.checkpoint_dir, checkpoint_dir))
            checkpoint_dir, steps = hook.checkpoint_dir, hook.save_steps
    hooks = [h for h in hooks if not isinstance(h, CheckpointSaverHook)]
    # The sync replicas hook counts the global step for the hooks after it and the checkpoints:
    # it must come first (apps/train/sync_replicas_optimizer.hpp).
    hooks.sort(key=lambda h: not isinstance(h, _SyncReplicasHook))
    if summary_dir is None:
        summary_dir = checkpoint_dir
    summaries = 100 if save_summaries_steps is _USE_DEFAULT else save_summaries_steps
    if not summaries:
        summary_dir, summaries = None, 100
    config = config if config is not None else _session.ConfigProto()
    _refuse_session_only_fields(config)
    timeout = config.operation_timeout_in_ms / 1000.0 if config.operation_timeout_in_ms else 0.0
    native_args = dict(
        target=_session._native_target(master),
        log_device_placement=bool(config.log_device_placement),
        allow_soft_placement=bool(config.allow_soft_placement),
        inter_op_parallelism_threads=int(config.inter_op_parallelism_threads),
        intra_op_parallelism_threads=int(config.intra_op_parallelism_threads),
        timeout_seconds=float(timeout),
        # max_wait_secs bounds every wait for the cluster: the master's connection too.
        connect_timeout_seconds=float(max(1, max_wait_secs)),
        global_step=global_step, is_chief=bool(is_chief),
        checkpoint_dir=checkpoint_dir or "", save_checkpoint_steps=steps, keep_checkpoints=5,
        summary_dir=(summary_dir or "") if is_chief else "", save_summaries_steps=int(summaries),
        init_timeout_seconds=int(max(1, min(max_wait_secs, 2 ** 31 - 1))),
        cluster=place.cluster)
    return MonitoredSession(graph, native_args, hooks, place)


# --- synchronous replicas ------------------------------------------------------------------------------


class _SyncReplicasHook(_NativeHook):
    def __init__(self, optimizer, is_chief):
        self._optimizer = optimizer
        self._is_chief = bool(is_chief)

    def _make(self, global_step, place):
        native = self._optimizer._sync
        if native is None:
            raise ValueError("SyncReplicasOptimizer: call minimize or apply_gradients before "
                             "making the session")
        if place.cluster is None:
            raise ValueError("SyncReplicasOptimizer's hook reaches the ps shards through the "
                             "cluster of this worker's tf.train.Server: give "
                             "MonitoredTrainingSession master=server.target of a Server made in "
                             "this process")
        loss = self._optimizer._loss
        return native.make_session_run_hook(self._is_chief, place.cluster, int(place.task), "ps",
                                            loss._output if loss is not None else None)
