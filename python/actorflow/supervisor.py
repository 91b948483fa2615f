"""tf.train.Supervisor, tf.train.SessionManager and tf.train.Coordinator (TF 1.15's), over
tf.Session and tf.train.Saver: the training loop of classic between-graph scripts.

    sv = tf.train.Supervisor(is_chief=task == 0, logdir="/tmp/train", global_step=global_step,
                             save_model_secs=600)
    with sv.managed_session(server.target) as sess:   # restored, initialised, or waited for
        while not sv.should_stop():
            sess.run(train_op)

The chief restores the latest checkpoint in logdir or runs init_op and init_fn; the other
workers wait until every variable can be read (a ps keeps what the chief initialised). The chief
saves a checkpoint every save_model_secs seconds and, with a summary_op (by default
tf.summary.merge_all()'s, when the graph has summaries), writes its summaries every
save_summaries_secs seconds to summary_writer (by default a tf.summary.FileWriter of logdir,
the graph first), both checked after each run() of the session it hands out (no thread of its
own shares the session), and one more checkpoint when the `with` block ends cleanly.
"""

import contextlib
import logging
import os
import sys
import threading
import time

import numpy as np

from actorflow import errors
from actorflow import session as _session
from actorflow.framework import Operation, Tensor, get_default_graph
from actorflow.monitored import Saver, latest_checkpoint
from actorflow.variable_scope import GraphKeys

_log = logging.getLogger("actorflow")

# --- the coordinator ---------------------------------------------------------------------------


class Coordinator:
    """Threads stopping together (tf.train.Coordinator): request_stop() from any of them,
    should_stop() in their loops, join() to wait for them and re-raise the first exception
    a stop was requested with. OutOfRangeError (the end of the input) stops cleanly."""

    def __init__(self, clean_stop_exception_types=None):
        if clean_stop_exception_types is None:
            clean_stop_exception_types = (errors.OutOfRangeError,)
        self._clean_stop_exception_types = tuple(clean_stop_exception_types)
        self._lock = threading.Lock()
        self._stop_event = threading.Event()
        self._exc_info_to_raise = None
        self._joined = False
        self._registered_threads = set()

    def request_stop(self, ex=None):
        """Asks every thread to stop; `ex` (an exception, or sys.exc_info()'s triple) is what
        join() raises, unless it is a clean stop (OutOfRangeError) or an earlier one was kept."""
        with self._lock:
            if ex is not None and self._exc_info_to_raise is None and \
                    not self._is_clean_stop(ex):
                self._exc_info_to_raise = ex if isinstance(ex, tuple) else \
                    (type(ex), ex, ex.__traceback__)
            self._stop_event.set()

    def _is_clean_stop(self, ex):
        error = ex[1] if isinstance(ex, tuple) else ex
        return isinstance(error, self._clean_stop_exception_types)

    def clear_stop(self):
        with self._lock:
            self._joined = False
            self._exc_info_to_raise = None
            self._stop_event.clear()

    def should_stop(self):
        return self._stop_event.is_set()

    @contextlib.contextmanager
    def stop_on_exception(self):
        """A block whose exception requests a stop (and is kept for join) instead of leaving."""
        try:
            yield
        except:  # noqa: E722 - TF's: every exception, kept for join()
            self.request_stop(ex=sys.exc_info())

    def wait_for_stop(self, timeout=None):
        """Whether a stop was requested within `timeout` seconds (None: waits for it)."""
        return self._stop_event.wait(timeout)

    def register_thread(self, thread):
        with self._lock:
            self._registered_threads.add(thread)

    def join(self, threads=None, stop_grace_period_secs=120, ignore_live_threads=False):
        """Waits for the registered threads and `threads` once a stop is requested; past the grace
        period, a RuntimeError names those still alive (unless ignore_live_threads). Then raises
        the exception a stop was requested with, if any."""
        threads = set(threads or ()) | self._registered_threads
        while any(t.is_alive() for t in threads) and not self.wait_for_stop(1.0):
            pass
        deadline = time.monotonic() + stop_grace_period_secs
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        alive = sorted(t.name for t in threads if t.is_alive())
        with self._lock:
            self._joined = True
            self._registered_threads = set()
            exc_info = self._exc_info_to_raise
        if exc_info is not None:
            raise exc_info[1].with_traceback(exc_info[2])
        if alive:
            if ignore_live_threads:
                _log.info("Coordinator stopped with threads still running: %s", " ".join(alive))
            else:
                raise RuntimeError("Coordinator stopped with threads still running: %s"
                                   % " ".join(alive))

    @property
    def joined(self):
        return self._joined

    def raise_requested_exception(self):
        with self._lock:
            exc_info = self._exc_info_to_raise
        if exc_info is not None:
            raise exc_info[1].with_traceback(exc_info[2])


# --- readiness -----------------------------------------------------------------------------------

# Errors of a readiness check that mean "not yet": an uninitialised variable, a task that is not
# up (or was lost) yet. Any other error is the check's own fault and is raised.
_NOT_READY_ERRORS = (errors.FailedPreconditionError, errors.UnavailableError,
                     errors.AbortedError, errors.DeadlineExceededError)


class _VariablesReadable:
    """actorflow's ready_op: ready once every one of `variables` can be read (TF's default runs
    report_uninitialized_variables, an op actorflow lacks; a read of an uninitialised variable
    fails naming it)."""

    def __init__(self, variables):
        self._reads = [v.value() for v in variables]

    def not_ready(self, sess):
        if not self._reads:
            return None
        try:
            sess.run(self._reads)
            return None
        except _NOT_READY_ERRORS as error:
            return error.message

    def __repr__(self):
        return "<every global variable can be read (%d)>" % len(self._reads)


def _not_ready(check, sess, options=None):
    """Why the model is not ready by `check` (None, a _VariablesReadable, or a ready tensor that
    lists what is not ready and is empty once all is), or None when it is."""
    if check is None:
        return None
    if isinstance(check, _VariablesReadable):
        return check.not_ready(sess)
    try:
        value = np.asarray(sess.run(check, options=options))
    except _NOT_READY_ERRORS as error:
        return error.message
    if value.size == 0:
        return None
    names = [v.decode() if isinstance(v, bytes) else str(v) for v in value.ravel()]
    return "Variables not initialized: " + ", ".join(names)


def _ready_check(ready_op, what):
    if ready_op is None or isinstance(ready_op, (_VariablesReadable, Tensor)):
        return ready_op
    raise TypeError("%s is a Tensor listing what is not ready (empty when all is) or None, not "
                    "%r" % (what, ready_op))


class _SupervisedSession(_session.Session):
    """The tf.Session a Supervisor hands out: after each run() the chief's supervisor saves a
    checkpoint when one is due (save_model_secs)."""

    _after_run = None

    def run(self, fetches, feed_dict=None, options=None, run_metadata=None):
        values = super().run(fetches, feed_dict, options, run_metadata)
        if self._after_run is not None:
            self._after_run(self)
        return values


# --- the session manager -----------------------------------------------------------------------


class SessionManager:
    """Makes sessions whose model is ready (tf.train.SessionManager): prepare_session for the
    chief (restore the latest checkpoint, else run init_op and init_fn), wait_for_session for the
    others (until ready_op says ready), recover_session (restore only). local_init_op runs in
    every session once ready_for_local_init_op says ready."""

    def __init__(self, local_init_op=None, ready_op=None, ready_for_local_init_op=None,
                 graph=None, recovery_wait_secs=30, local_init_run_options=None,
                 local_init_feed_dict=None):
        self._graph = graph if graph is not None else get_default_graph()
        self._local_init_op = local_init_op
        self._local_init_feed_dict = local_init_feed_dict
        self._local_init_run_options = local_init_run_options
        self._ready_op = _ready_check(ready_op, "SessionManager's ready_op")
        self._ready_for_local_init_op = _ready_check(
            ready_for_local_init_op, "SessionManager's ready_for_local_init_op")
        if local_init_op is not None and self._ready_for_local_init_op is None and \
                ready_for_local_init_op is not None:
            raise ValueError("SessionManager: ready_for_local_init_op must be a Tensor or None")
        self._recovery_wait_secs = float(recovery_wait_secs)
        if self._recovery_wait_secs < 0:
            raise ValueError("SessionManager(recovery_wait_secs=%r) must be >= 0"
                             % (recovery_wait_secs,))

    def _new_session(self, master, config):
        # A tf.Session until a Supervisor's services hook into its run().
        return _SupervisedSession(master, graph=self._graph, config=config)

    def _restore_checkpoint(self, master, saver, checkpoint_dir, checkpoint_filename_with_path,
                            wait_for_checkpoint, max_wait_secs, config):
        """A new session, and whether a checkpoint was restored into it."""
        if checkpoint_dir and checkpoint_filename_with_path:
            raise ValueError("Can not provide both checkpoint_dir and "
                             "checkpoint_filename_with_path.")
        sess = self._new_session(master, config)
        if saver is None or not (checkpoint_dir or checkpoint_filename_with_path):
            return sess, False
        path = checkpoint_filename_with_path
        if path is None:
            deadline = time.monotonic() + max_wait_secs
            path = latest_checkpoint(checkpoint_dir)
            while path is None and wait_for_checkpoint and time.monotonic() < deadline:
                _log.info("Waiting for a checkpoint in %s", checkpoint_dir)
                time.sleep(min(self._recovery_wait_secs, max(0.0, deadline - time.monotonic())))
                path = latest_checkpoint(checkpoint_dir)
            if path is None:
                return sess, False
        try:
            saver.restore(sess, path)
        except BaseException:
            sess.close()
            raise
        _log.info("Restored the model from %s", path)
        return sess, True

    def prepare_session(self, master, init_op=None, saver=None, checkpoint_dir=None,
                        checkpoint_filename_with_path=None, wait_for_checkpoint=False,
                        max_wait_secs=7200, config=None, init_feed_dict=None, init_fn=None):
        """A session on `master` with the model restored from checkpoint_dir's latest checkpoint
        (waiting for one up to max_wait_secs with wait_for_checkpoint) or initialised by init_op
        then init_fn(sess); a RuntimeError when that leaves it not ready."""
        sess, restored = self._restore_checkpoint(master, saver, checkpoint_dir,
                                                  checkpoint_filename_with_path,
                                                  wait_for_checkpoint, max_wait_secs, config)
        try:
            if not restored:
                if init_op is None and not init_fn and self._local_init_op is None:
                    raise RuntimeError("Model is not initialized and no init_op or init_fn or "
                                       "local_init_op was given")
                if init_op is not None:
                    sess.run(init_op, feed_dict=init_feed_dict)
                if init_fn:
                    init_fn(sess)
            not_ready = self._run_local_init_op(sess)
            if not_ready is not None:
                raise RuntimeError("Init operations did not make model ready for local_init. "
                                   "Init op: %s, init fn: %s, error: %s"
                                   % (_name(init_op), init_fn, not_ready))
            not_ready = _not_ready(self._ready_op, sess)
            if not_ready is not None:
                raise RuntimeError("Init operations did not make model ready. Init op: %s, init "
                                   "fn: %s, local_init_op: %s, error: %s"
                                   % (_name(init_op), init_fn, _name(self._local_init_op),
                                      not_ready))
        except BaseException:
            sess.close()
            raise
        return sess

    def recover_session(self, master, saver=None, checkpoint_dir=None,
                        checkpoint_filename_with_path=None, wait_for_checkpoint=False,
                        max_wait_secs=7200, config=None):
        """(a session, whether the model in it is restored and ready): restores only."""
        sess, restored = self._restore_checkpoint(master, saver, checkpoint_dir,
                                                  checkpoint_filename_with_path,
                                                  wait_for_checkpoint, max_wait_secs, config)
        not_ready = self._run_local_init_op(sess)
        if not restored or not_ready is not None:
            return sess, False
        not_ready = _not_ready(self._ready_op, sess)
        if not_ready is not None:
            _log.info("Restoring model from %s did not make model ready for local init: %s",
                      checkpoint_dir or checkpoint_filename_with_path, not_ready)
            return sess, False
        return sess, True

    def wait_for_session(self, master, config=None, max_wait_secs=float("inf")):
        """A session once the model is ready in it (another task initialises it), checked every
        recovery_wait_secs; DeadlineExceededError, saying what is not ready, after
        max_wait_secs."""
        if max_wait_secs is None:
            max_wait_secs = float("inf")
        deadline = time.monotonic() + max_wait_secs
        sess = None
        try:
            while True:
                if sess is None:
                    try:
                        sess = self._new_session(master, config)
                    except _NOT_READY_ERRORS as error:   # the master is not up yet
                        not_ready = error.message
                if sess is not None:
                    not_ready = self._run_local_init_op(sess)
                    if not_ready is None:
                        not_ready = _not_ready(self._ready_op, sess)
                        if not_ready is None:
                            return sess
                left = deadline - time.monotonic()
                if left <= 0:
                    raise errors.DeadlineExceededError(
                        None, None, "Session was not ready after waiting %s secs "
                        "(max_wait_secs); not ready: %s" % (_seconds(max_wait_secs), not_ready))
                _log.info("Waiting for model to be ready: %s", not_ready)
                time.sleep(min(self._recovery_wait_secs, left))
        except BaseException:
            if sess is not None:
                sess.close()
            raise

    def _run_local_init_op(self, sess):
        """Runs local_init_op once ready_for_local_init_op says ready: None, or why not."""
        if self._local_init_op is None:
            return None
        not_ready = _not_ready(self._ready_for_local_init_op, sess)
        if not_ready is not None:
            return not_ready
        sess.run(self._local_init_op, feed_dict=self._local_init_feed_dict,
                 options=self._local_init_run_options)
        return None


def _name(op):
    return getattr(op, "name", op)


def _seconds(value):
    return "%d" % value if float(value).is_integer() else "%g" % value


# --- the supervisor ------------------------------------------------------------------------------


def _check_arguments(graph, ready_op, ready_for_local_init_op, is_chief, init_op, local_init_op,
                     summary_op, saver, save_summaries_secs, save_model_secs, checkpoint_basename,
                     session_manager, summary_writer, init_fn, local_init_run_options,
                     **unchecked):
    """The Supervisor's ValueError for an argument actorflow cannot honour, or TypeError for one
    of the wrong kind."""
    default = Supervisor.USE_DEFAULT
    from actorflow.summary import FileWriter, _SummaryOp
    if summary_op is not default and summary_op is not None and not isinstance(summary_op, _SummaryOp):
        raise TypeError("Supervisor's summary_op is a summary (tf.summary.merge_all(), ...) or "
                        "None, not %r" % (summary_op,))
    if summary_writer is not default and summary_writer is not None and \
            not isinstance(summary_writer, FileWriter):
        raise TypeError("Supervisor's summary_writer is a tf.summary.FileWriter or None, not %r"
                        % (summary_writer,))
    if save_summaries_secs is not None and float(save_summaries_secs) < 0:
        raise ValueError("Supervisor(save_summaries_secs=%r) must be >= 0 (0: no summaries)"
                         % (save_summaries_secs,))
    if save_model_secs is not None and float(save_model_secs) < 0:
        raise ValueError("Supervisor(save_model_secs=%r) must be >= 0 (0: no timed checkpoints)"
                         % (save_model_secs,))
    if not checkpoint_basename or os.path.basename(checkpoint_basename) != checkpoint_basename:
        raise ValueError("Supervisor(checkpoint_basename=%r) is a file name: the checkpoints go "
                         "into logdir, where the chief restores from" % (checkpoint_basename,))
    if session_manager is not None and local_init_run_options is not None:
        raise ValueError("Supervisor: local_init_run_options goes to the SessionManager it "
                         "makes; with session_manager=..., give them to that one")
    if init_fn is not None and not callable(init_fn):
        raise TypeError("Supervisor's init_fn is a function of the session, not %r" % (init_fn,))
    for name, op in (("init_op", init_op), ("local_init_op", local_init_op)):
        if op is not default and op is not None and not isinstance(op, (Operation, Tensor)):
            raise TypeError("Supervisor's %s is an Operation or None, not %r" % (name, op))
    for name, op in (("ready_op", ready_op), ("ready_for_local_init_op", ready_for_local_init_op)):
        if op is not default:
            _ready_check(op, "Supervisor's " + name)
    if saver is not default and saver is not None and not isinstance(saver, Saver):
        raise TypeError("Supervisor's saver is a tf.train.Saver or None, not %r" % (saver,))
    if not is_chief:
        # TF's check: a worker that is not the chief waits for variables another task
        # initialises, which it can see only when they live on a shared (ps) task.
        for op in graph.get_operations():
            if op.type in ("Variable", "VariableV2") and not op.device:
                raise ValueError("When using replicas, all Variables must have their device "
                                 "set: %s" % op.name)


class Supervisor:
    """TF 1.15's tf.train.Supervisor over SessionManager and Saver (see the module's text).
    Arguments actorflow cannot honour raise ValueError naming them. The checkpoint files follow
    tf.train.Saver's names
    (`<logdir>/ckpt-<step>.afckpt`); checkpoint_basename names save_path only."""

    USE_DEFAULT = 0

    def __init__(self, graph=None, ready_op=USE_DEFAULT, ready_for_local_init_op=USE_DEFAULT,
                 is_chief=True, init_op=USE_DEFAULT, init_feed_dict=None,
                 local_init_op=USE_DEFAULT, logdir=None, summary_op=USE_DEFAULT,
                 saver=USE_DEFAULT, global_step=USE_DEFAULT, save_summaries_secs=120,
                 save_model_secs=600, recovery_wait_secs=30, stop_grace_secs=120,
                 checkpoint_basename="model.ckpt", session_manager=None,
                 summary_writer=USE_DEFAULT, init_fn=None, local_init_run_options=None):
        if graph is None:
            graph = get_default_graph()
        # Every argument is checked before anything is made in the graph (nodes are never
        # removed: a refused Supervisor must leave the graph as it was).
        _check_arguments(**{k: v for k, v in locals().items() if k != "self"})
        self._graph = graph
        self._is_chief = bool(is_chief)
        self._coord = Coordinator()
        self._logdir = logdir
        self._save_model_secs = save_model_secs
        self._recovery_wait_secs = recovery_wait_secs
        self._stop_grace_secs = stop_grace_secs
        self._checkpoint_basename = checkpoint_basename
        self._init_fn = init_fn
        self._save_summaries_secs = save_summaries_secs
        self._save_path = os.path.join(logdir, checkpoint_basename) if logdir else None
        with graph.as_default():
            self._init_ready_op(ready_op, ready_for_local_init_op)
            self._init_init_op(init_op, init_feed_dict)
            self._init_local_init_op(local_init_op)
            self._init_saver(saver)
            self._init_global_step(global_step)
            self._init_summaries(summary_op, summary_writer)
        if session_manager is None:
            session_manager = SessionManager(
                local_init_op=self._local_init_op, ready_op=self._ready_op,
                ready_for_local_init_op=self._ready_for_local_init_op, graph=graph,
                recovery_wait_secs=recovery_wait_secs,
                local_init_run_options=local_init_run_options)
        self._session_manager = session_manager
        self._saving_session = None      # the chief's session its checkpoints read, or None
        self._last_save = None
        self._last_summary = None
        graph.finalize()

    # Construction, following TF's: a default is taken from the graph's collection, else made
    # and kept there (so a second Supervisor on the same, finalized, graph finds it).
    def _first_in_collection(self, key):
        values = self._graph.get_collection(key)
        if len(values) > 1:
            raise RuntimeError("More than one item in the %s collection" % key)
        return values[0] if values else None

    def _init_ready_op(self, ready_op, ready_for_local_init_op):
        from actorflow import ops
        if ready_op is Supervisor.USE_DEFAULT:
            ready_op = self._first_in_collection(GraphKeys.READY_OP)
            if ready_op is None:
                ready_op = _VariablesReadable(ops.global_variables())
                self._graph.add_to_collection(GraphKeys.READY_OP, ready_op)
        if ready_for_local_init_op is Supervisor.USE_DEFAULT:
            ready_for_local_init_op = self._first_in_collection(GraphKeys.READY_FOR_LOCAL_INIT_OP)
            if ready_for_local_init_op is None:
                ready_for_local_init_op = _VariablesReadable(ops.global_variables())
                self._graph.add_to_collection(GraphKeys.READY_FOR_LOCAL_INIT_OP,
                                              ready_for_local_init_op)
        self._ready_op = _ready_check(ready_op, "Supervisor's ready_op")
        self._ready_for_local_init_op = _ready_check(ready_for_local_init_op,
                                                     "Supervisor's ready_for_local_init_op")

    def _init_init_op(self, init_op, init_feed_dict):
        from actorflow import ops
        if init_op is Supervisor.USE_DEFAULT:
            init_op = self._first_in_collection(GraphKeys.INIT_OP)
            if init_op is None:
                init_op = ops.global_variables_initializer()
                self._graph.add_to_collection(GraphKeys.INIT_OP, init_op)
        self._init_op = init_op
        self._init_feed_dict = init_feed_dict

    def _init_local_init_op(self, local_init_op):
        # actorflow has no local variables and no tables: by default there is nothing local to
        # initialise, unless the graph's local_init_op collection names an op.
        if local_init_op is Supervisor.USE_DEFAULT:
            local_init_op = self._first_in_collection(GraphKeys.LOCAL_INIT_OP)
        self._local_init_op = local_init_op

    def _init_saver(self, saver):
        from actorflow import ops
        if saver is Supervisor.USE_DEFAULT:
            saver = self._first_in_collection(GraphKeys.SAVERS)
            if saver is None and ops.global_variables():
                saver = Saver()
                self._graph.add_to_collection(GraphKeys.SAVERS, saver)
        self._saver = saver

    def _init_summaries(self, summary_op, summary_writer):
        from actorflow import summary
        if summary_op is Supervisor.USE_DEFAULT:
            summary_op = self._first_in_collection(GraphKeys.SUMMARY_OP)
            if summary_op is None:
                summary_op = summary.merge_all()
                if summary_op is not None:
                    self._graph.add_to_collection(GraphKeys.SUMMARY_OP, summary_op)
        self._summary_op = summary_op
        # The chief writes events (TF's): into logdir unless given a writer of its own.
        if summary_writer is Supervisor.USE_DEFAULT:
            summary_writer = summary.FileWriter(self._logdir) if self._is_chief and self._logdir else None
        self._summary_writer = summary_writer

    def _init_global_step(self, global_step):
        from actorflow import train
        if global_step is Supervisor.USE_DEFAULT:
            global_step = train.get_global_step(self._graph)
        self._global_step = global_step

    # Sessions.
    def prepare_or_wait_for_session(self, master="", config=None, wait_for_checkpoint=False,
                                    max_wait_secs=7200, start_standard_services=True):
        """The chief: a session with the model restored from logdir or initialised, and the
        timed checkpoints started (start_standard_services). The others: a session once the
        model is ready, within max_wait_secs."""
        self._coord.clear_stop()
        manager = self._session_manager
        if self._is_chief:
            sess = manager.prepare_session(
                master, init_op=self._init_op, saver=self._saver, checkpoint_dir=self._logdir,
                wait_for_checkpoint=wait_for_checkpoint, max_wait_secs=max_wait_secs,
                config=config, init_feed_dict=self._init_feed_dict, init_fn=self._init_fn)
            if start_standard_services:
                self.start_standard_services(sess)
        else:
            sess = manager.wait_for_session(master, config=config, max_wait_secs=max_wait_secs)
        return sess

    @contextlib.contextmanager
    def managed_session(self, master="", config=None, start_standard_services=True,
                        close_summary_writer=True):
        """A context manager over prepare_or_wait_for_session's session: when the block ends
        the supervisor stops (the chief saving a last checkpoint after a clean end) and the
        session closes; an exception from the block is raised after that, except
        OutOfRangeError, which ends it quietly (TF's)."""
        sess = None
        try:
            sess = self.prepare_or_wait_for_session(
                master=master, config=config, start_standard_services=start_standard_services)
            yield sess
        except BaseException as error:  # noqa: B902 - kept by the coordinator, raised by stop
            self.request_stop(error)
        finally:
            try:
                self.stop(close_summary_writer=close_summary_writer)
            finally:
                if sess is not None:
                    sess.close()

    def start_standard_services(self, sess):
        """The chief's services: the graph to the summary writer; with a logdir and a saver, a
        checkpoint now and every save_model_secs seconds after (none when 0 or None); with a
        summary_op and a writer, its summaries now and every save_summaries_secs seconds after
        (none when 0 or None). Each is done after a run() of `sess` once due, and the last
        checkpoint when the supervisor stops cleanly. No threads: the list of those started is
        empty."""
        if not self._is_chief:
            raise RuntimeError("Only chief supervisor can start standard services. Because only "
                               "chief supervisors can write events.")
        if self._summary_writer is not None:
            self._summary_writer.add_graph(self._graph)
        checkpoints = bool(self._logdir and self._saver and self._save_model_secs)
        summaries = bool(self._summary_op is not None and self._summary_writer is not None
                         and self._save_summaries_secs)
        # A saver and a logdir also mean the last checkpoint at stop, timed ones or not.
        if not (summaries or (self._logdir and self._saver)):
            return []
        if not isinstance(sess, _SupervisedSession):
            raise TypeError("start_standard_services: actorflow's checkpoints and summaries need "
                            "the session prepare_or_wait_for_session made, not %r" % (sess,))
        self._saving_session = sess
        self._checkpoints_due = checkpoints
        self._summaries_due = summaries
        if checkpoints or summaries:
            sess._after_run = self._services_if_due
        if checkpoints:
            self._save_checkpoint(sess)
        if summaries:
            self._write_summaries(sess)
        return []

    def start_queue_runners(self, sess, queue_runners=None):
        """Nothing to start: actorflow has no queue runners."""
        if queue_runners:
            raise ValueError("Supervisor.start_queue_runners: actorflow has no queue runners")
        return []

    def _services_if_due(self, sess):
        if sess is not self._saving_session or self._coord.should_stop():
            return
        now = time.monotonic()
        if self._checkpoints_due and now - self._last_save >= float(self._save_model_secs):
            self._save_checkpoint(sess)
        if self._summaries_due and now - self._last_summary >= float(self._save_summaries_secs):
            self._write_summaries(sess)

    def _write_summaries(self, sess):
        # Stamped first: the run below comes back to _services_if_due.
        self._last_summary = time.monotonic()
        if self._global_step is not None:
            summary, step = sess.run([self._summary_op, self._global_step])
        else:
            summary, step = sess.run(self._summary_op), None
        self._summary_writer.add_summary(summary, step)

    def summary_computed(self, sess, summary, global_step=None):
        """Writes `summary` (what Session.run gave for a summary) at `global_step`, by default
        the global step's value now."""
        if self._summary_writer is None:
            raise RuntimeError("Writing a summary requires a summary writer.")
        if global_step is None and self._global_step is not None:
            global_step = sess.run(self._global_step)
        self._summary_writer.add_summary(summary, global_step)

    def _save_checkpoint(self, sess):
        # Stamped first: the saver reads the global step with sess.run, which comes back here.
        self._last_save = time.monotonic()
        os.makedirs(self._logdir, exist_ok=True)
        return self._saver.save(sess, self._save_path, global_step=self._global_step)

    # Stopping.
    def should_stop(self):
        return self._coord.should_stop()

    def request_stop(self, ex=None):
        self._coord.request_stop(ex=ex)

    def stop_on_exception(self):
        return self._coord.stop_on_exception()

    def wait_for_stop(self):
        self._coord.wait_for_stop()

    def stop(self, threads=None, close_summary_writer=True, ignore_live_threads=False):
        """Requests a stop, joins `threads` (stop_grace_secs) and raises the exception a stop was
        requested with; after a clean stop the chief saves a last checkpoint. The session stays
        open (managed_session closes its own)."""
        self._coord.request_stop()
        sess, self._saving_session = self._saving_session, None
        if sess is not None:
            sess._after_run = None
        self._coord.join(threads, stop_grace_period_secs=self._stop_grace_secs,
                         ignore_live_threads=ignore_live_threads)
        if sess is not None and not sess._c.closed and self._logdir and self._saver:
            self._save_checkpoint(sess)
        if close_summary_writer and self._summary_writer is not None:
            self._summary_writer.close()

    # What it holds (TF's properties).
    @property
    def is_chief(self):
        return self._is_chief

    @property
    def session_manager(self):
        return self._session_manager

    @property
    def coord(self):
        return self._coord

    @property
    def init_op(self):
        return self._init_op

    @property
    def init_feed_dict(self):
        return self._init_feed_dict

    @property
    def ready_op(self):
        return self._ready_op

    @property
    def ready_for_local_init_op(self):
        return self._ready_for_local_init_op

    @property
    def summary_writer(self):
        return self._summary_writer

    @property
    def summary_op(self):
        return self._summary_op

    @property
    def save_summaries_secs(self):
        return self._save_summaries_secs

    @property
    def global_step(self):
        return self._global_step

    @property
    def saver(self):
        return self._saver

    @property
    def save_model_secs(self):
        return self._save_model_secs

    @property
    def save_path(self):
        return self._save_path

    @property
    def logdir(self):
        return self._logdir
