"""tf.train: optimizers (graph/optimizers.hpp), cluster specs (actors/cluster_spec.hpp),
servers (actors/server.hpp) and replica_device_setter (graph/replica_device_setter.hpp); the
training loops come from monitored.py (MonitoredTrainingSession, Saver, hooks) and supervisor.py
(Supervisor, SessionManager, Coordinator).

    cluster = tf.train.ClusterSpec({"ps": ["127.0.0.1:2222"], "worker": ["127.0.0.1:2223"]})
    server = tf.train.Server(cluster, job_name="worker", task_index=0)   # prints its target
    with tf.device(tf.train.replica_device_setter(cluster=cluster)):
        w = tf.Variable(tf.zeros([3]))                                     # on /job:ps/task:0
    train_op = tf.train.GradientDescentOptimizer(0.5).minimize(loss)
"""

import sys
import threading

import numpy as np

from actorflow import _actorflow as _c
from actorflow import errors
from actorflow import ops as _ops
from actorflow.framework import (IndexedSlices, Tensor, Variable, _same_graph,
                                 convert_to_tensor, flat_variables, get_default_graph)
from actorflow.monitored import (CheckpointSaverHook, LoggingTensorHook,  # noqa: F401
                                 MonitoredSession, MonitoredTrainingSession, NanLossDuringTrainingError,
                                 NanTensorHook, Saver,
                                 SessionRunArgs, SessionRunContext, SessionRunHook,
                                 SessionRunValues, StopAtStepHook, _register_server,
                                 _SyncReplicasHook, latest_checkpoint)
from actorflow.learning_rate_decay import (exponential_decay, inverse_time_decay,  # noqa: F401
                                           natural_exp_decay, piecewise_constant,
                                           polynomial_decay)
from actorflow.supervisor import Coordinator, SessionManager, Supervisor  # noqa: F401

# --- optimizers ------------------------------------------------------------------------------------


class Optimizer:
    """An optimizer over one of graph/optimizers.hpp's (made by the subclasses)."""

    GATE_NONE, GATE_OP, GATE_GRAPH = 0, 1, 2

    def __init__(self, native, use_locking=False, name=None, learning_rate=None):
        self._native = native
        self._name = name
        if _is_rate_tensor(learning_rate):
            rate = convert_to_tensor(learning_rate)
            if not rate.dtype.is_floating:
                raise TypeError("%s's learning_rate must be a float tensor, got %r"
                                % (name, rate))
            native.set_learning_rate(rate._output)

    def get_name(self):
        return self._name

    def compute_gradients(self, loss, var_list=None, gate_gradients=GATE_OP,
                          aggregation_method=None, colocate_gradients_with_ops=False,
                          grad_loss=None):
        """(gradient, variable) pairs for the variables `loss` depends on."""
        if aggregation_method is not None or grad_loss is not None:
            raise ValueError("compute_gradients: aggregation_method and grad_loss are not "
                             "supported yet")
        if var_list is not None:
            var_list = flat_variables(var_list)
        _same_graph([loss] + list(var_list or []), "compute_gradients")
        loss = convert_to_tensor(loss)
        handles = self._handles(var_list)
        pairs = self._native.compute_gradients(loss._output, handles,
                                               bool(colocate_gradients_with_ops))
        graph = loss.graph
        graph._built(None)
        return [(IndexedSlices._of(graph._tensor(g)), graph._variable(v)) for g, v in pairs]

    def apply_gradients(self, grads_and_vars, global_step=None, name=None):
        """One Operation applying every pair (and adding one to `global_step` after, when given)."""
        pairs = [(g, v) for g, v in grads_and_vars if g is not None]
        if not pairs:
            raise ValueError("No gradients provided for any variable: %s"
                             % ([v.name for _, v in grads_and_vars],))
        graph = _same_graph([v for _, v in pairs] + [g for g, _ in pairs], "apply_gradients")
        native_pairs = [(convert_to_tensor(g)._output, v._handle) for g, v in pairs]
        update = graph._operation(graph._built(
            self._native.apply_gradients(native_pairs, name or "")).node_id)
        update = _apply_constraints(graph, update, [v for _, v in pairs]) or update
        if global_step is None:
            return update
        with graph.control_dependencies([update]):
            return _ops.assign_add(global_step, 1, name=name or "update_global_step").op

    def minimize(self, loss, global_step=None, var_list=None, gate_gradients=GATE_OP,
                 aggregation_method=None, colocate_gradients_with_ops=False, name=None,
                 grad_loss=None):
        pairs = self.compute_gradients(loss, var_list, gate_gradients, aggregation_method,
                                       colocate_gradients_with_ops, grad_loss)
        if not pairs:
            raise ValueError("No gradients provided for any variable, check your graph for ops "
                             "that do not support gradients, between variables %s and loss %r."
                             % ([v.name for v in self._variables(var_list)], loss))
        return self.apply_gradients(pairs, global_step, name)

    @staticmethod
    def _variables(var_list):
        return flat_variables(var_list) if var_list is not None else _ops.trainable_variables()

    def _handles(self, var_list):
        if var_list is None:
            return []
        for v in var_list:
            if not isinstance(v, Variable):
                raise TypeError("var_list holds Variables, not %r" % (v,))
        return [v._handle for v in var_list]


def _apply_constraints(graph, update, variables):
    """TF's var.assign(constraint(var)) for each variable with a constraint, after `update`
    (the constraint sees the updated value); one op running them all, or None when no variable
    has one. The constraint is given a read of the variable made after the update: the
    variable's own read (var.value()) may run before it in the same step."""
    constrained = [v for v in variables if v.constraint is not None]
    if not constrained:
        return None
    assigns = []
    with graph.control_dependencies([update]):
        for v in constrained:
            with graph.colocate_with(v.op), \
                    graph.name_scope(v.op.name.replace("/", "_") + "_constraint"):
                updated = _ops.identity(v._ref(), name="updated")
                assigns.append(_ops.assign(v, v.constraint(updated)))
    return _ops.group(update, *assigns, name="apply_constraints")


def _refuse_constraints(variables, what):
    for v in variables:
        if v.constraint is not None:
            raise ValueError("%s: variable %r has a constraint, which actorflow applies only "
                             "in the plain optimizers' apply_gradients" % (what, v.name))


def _number(value, what):
    if not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError("%s is a Python number here (a tensor is taken for the learning rate "
                        "only), not %r" % (what, value))
    return float(value)


def _is_rate_tensor(value):
    return isinstance(value, (Tensor, Variable))


def _rate(value):
    """The learning rate's number for the C++ optimizer: a tensor one is set on it afterwards
    (Optimizer.__init__), and this number stands unused."""
    return 0.0 if _is_rate_tensor(value) else _number(value, "learning_rate")


class GradientDescentOptimizer(Optimizer):
    def __init__(self, learning_rate, use_locking=False, name="GradientDescent"):
        super().__init__(_c.GradientDescentOptimizer(_rate(learning_rate)), use_locking, name,
                         learning_rate)


class MomentumOptimizer(Optimizer):
    def __init__(self, learning_rate, momentum, use_locking=False, name="Momentum",
                 use_nesterov=False):
        super().__init__(_c.MomentumOptimizer(_rate(learning_rate), _number(momentum, "momentum"),
                                              bool(use_nesterov)),
                         use_locking, name, learning_rate)


class AdagradOptimizer(Optimizer):
    def __init__(self, learning_rate, initial_accumulator_value=0.1, use_locking=False,
                 name="Adagrad"):
        if _number(initial_accumulator_value, "initial_accumulator_value") <= 0:
            raise ValueError("initial_accumulator_value must be positive: %s"
                             % initial_accumulator_value)
        super().__init__(_c.AdagradOptimizer(_rate(learning_rate),
                                             float(initial_accumulator_value)),
                         use_locking, name, learning_rate)


class AdamOptimizer(Optimizer):
    def __init__(self, learning_rate=0.001, beta1=0.9, beta2=0.999, epsilon=1e-08,
                 use_locking=False, name="Adam"):
        super().__init__(_c.AdamOptimizer(_rate(learning_rate), _number(beta1, "beta1"),
                                          _number(beta2, "beta2"), _number(epsilon, "epsilon")),
                         use_locking, name, learning_rate)


class FtrlOptimizer(Optimizer):
    """TF1's FtrlOptimizer; its hyperparameters are checked when its update is built (an error
    naming the one at fault), as the C++ optimizer does."""

    def __init__(self, learning_rate, learning_rate_power=-0.5, initial_accumulator_value=0.1,
                 l1_regularization_strength=0.0, l2_regularization_strength=0.0,
                 use_locking=False, name="Ftrl", accum_name=None, linear_name=None,
                 l2_shrinkage_regularization_strength=0.0):
        if accum_name is not None or linear_name is not None:
            raise ValueError("FtrlOptimizer: accum_name and linear_name are not supported (its "
                             "slots are '<var>/Ftrl' and '<var>/Ftrl_1')")
        super().__init__(_c.FtrlOptimizer(
            _rate(learning_rate), _number(learning_rate_power, "learning_rate_power"),
            _number(initial_accumulator_value, "initial_accumulator_value"),
            _number(l1_regularization_strength, "l1_regularization_strength"),
            _number(l2_regularization_strength, "l2_regularization_strength"),
            _number(l2_shrinkage_regularization_strength, "l2_shrinkage_regularization_strength")),
            use_locking, name, learning_rate)


# --- synchronous replicas ---------------------------------------------------------------------


class SyncReplicasOptimizer(Optimizer):
    """Synchronous rounds between graphs (train::sync_replicas_optimizer): the shards
    average replicas_to_aggregate workers' gradients a round; gradient descent they apply
    themselves, any other optimizer the chief applies to each round's mean while the others
    wait for it; the global step counts the rounds. Give make_session_run_hook(is_chief)'s
    hook to MonitoredTrainingSession (it goes first)."""

    def __init__(self, opt, replicas_to_aggregate, total_num_replicas=None,
                 variable_averages=None, variables_to_average=None, use_locking=False,
                 name="sync_replicas"):
        if not isinstance(opt, Optimizer) or getattr(opt, "_native", None) is None:
            raise ValueError("SyncReplicasOptimizer wraps a tf.train optimizer, not %r" % (opt,))
        if variable_averages is not None or variables_to_average is not None:
            raise ValueError("SyncReplicasOptimizer: variable_averages are not supported")
        super().__init__(opt._native, use_locking, name)
        self._opt = opt
        self._replicas_to_aggregate = int(replicas_to_aggregate)
        self._total_num_replicas = int(total_num_replicas if total_num_replicas is not None
                                       else replicas_to_aggregate)
        self._sync = None
        self._loss = None

    def compute_gradients(self, loss, *args, **kwargs):
        self._loss = loss if isinstance(loss, Tensor) else None
        return self._opt.compute_gradients(loss, *args, **kwargs)

    def apply_gradients(self, grads_and_vars, global_step=None, name=None):
        if global_step is None:
            raise ValueError("Global step is required to check staleness")
        if self._sync is not None:
            raise ValueError("SyncReplicasOptimizer.apply_gradients can be called only once")
        pairs = [(g, v) for g, v in grads_and_vars if g is not None]
        if not pairs:
            raise ValueError("No gradients provided for any variable.")
        # The shards (or the chief) apply each round natively: no place for the assigns.
        _refuse_constraints([v for _, v in pairs], "SyncReplicasOptimizer.apply_gradients")
        graph = global_step.graph
        self._sync = _c.SyncReplicasOptimizer(self._opt._native, global_step._handle,
                                              self._replicas_to_aggregate,
                                              self._total_num_replicas)
        from actorflow.framework import convert_to_tensor
        native_pairs = [(convert_to_tensor(g)._output, v._handle) for g, v in pairs]
        return graph._operation(graph._built(
            self._sync.apply_gradients(native_pairs, name or "")).node_id)

    def make_session_run_hook(self, is_chief, num_tokens=-1):
        return _SyncReplicasHook(self, is_chief)


# --- cluster specs ---------------------------------------------------------------------------------


class ClusterSpec:
    """Jobs and their tasks' addresses: {"ps": ["h:1", ...], ...}, or TF's sparse form
    {"worker": {1: "h:2"}}, which names only some tasks (servers need every task of a job)."""

    def __init__(self, cluster):
        if isinstance(cluster, ClusterSpec):
            self._tasks = {job: dict(tasks) for job, tasks in cluster._tasks.items()}
        elif isinstance(cluster, dict):
            self._tasks = {}
            for job, tasks in cluster.items():
                if not isinstance(job, str):
                    raise TypeError("Key of cluster must be a string, got %r" % (job,))
                if isinstance(tasks, (list, tuple)):
                    self._tasks[job] = dict(enumerate(tasks))
                elif isinstance(tasks, dict):
                    for index in tasks:
                        if not isinstance(index, int) or index < 0:
                            raise TypeError("Task index of job %r must be a non-negative "
                                            "integer, got %r" % (job, index))
                    self._tasks[job] = dict(tasks)
                else:
                    raise TypeError("The tasks of job %r must be a list or a dict of "
                                    "{index: address}, got %r" % (job, tasks))
                for index, address in self._tasks[job].items():
                    if not isinstance(address, str):
                        raise TypeError("The address of task %d of job %r must be a string, "
                                        "got %r" % (index, job, address))
        else:
            raise TypeError("`cluster` must be a dictionary mapping one or more job names to "
                            "lists of network addresses, or a ClusterSpec, not %r" % (cluster,))
        self._native_spec = None
        # A ValueError now for an address actorflow cannot use; an empty spec (TF's, for no
        # cluster: TFConfigClusterResolver without TF_CONFIG) is refused only by a server.
        if self._tasks and self._is_dense():
            self._native()

    def _is_dense(self):
        return all(sorted(t) == list(range(len(t))) for t in self._tasks.values())

    def _native(self):
        """The C++ cluster_spec; a ValueError names what it cannot hold (a gap, a bad address)."""
        if self._native_spec is None:
            for job, tasks in self._tasks.items():
                missing = sorted(set(range(max(tasks) + 1 if tasks else 1)) - set(tasks))
                if missing:
                    raise ValueError("ClusterSpec: job %r has no task %d; actorflow's servers "
                                     "need every task of a job (sparse specs with gaps are not "
                                     "supported by servers yet)" % (job, missing[0]))
            jobs = {job: [tasks[i] for i in range(len(tasks))] for job, tasks in self._tasks.items()}
            try:
                self._native_spec = _c.ClusterSpec(jobs)
            except errors.InvalidArgumentError as error:
                raise ValueError(error.message) from None
        return self._native_spec

    @property
    def jobs(self):
        return sorted(self._tasks)

    def as_dict(self):
        result = {}
        for job, tasks in self._tasks.items():
            dense = sorted(tasks) == list(range(len(tasks)))
            result[job] = [tasks[i] for i in range(len(tasks))] if dense else dict(tasks)
        return result

    def _job(self, job_name):
        if job_name not in self._tasks:
            raise ValueError("No such job in cluster: %r" % (job_name,))
        return self._tasks[job_name]

    def num_tasks(self, job_name):
        return len(self._job(job_name))

    def task_indices(self, job_name):
        return sorted(self._job(job_name))

    def task_address(self, job_name, task_index):
        tasks = self._job(job_name)
        if task_index not in tasks:
            raise ValueError("No task with index %r in job %r" % (task_index, job_name))
        return tasks[task_index]

    def job_tasks(self, job_name):
        """The addresses of the job's tasks by index, None where a sparse spec names none."""
        tasks = self._job(job_name)
        return [tasks.get(i) for i in range(max(tasks) + 1)] if tasks else []

    def __bool__(self):
        return bool(self._tasks)

    def __eq__(self, other):
        return isinstance(other, ClusterSpec) and self._tasks == other._tasks

    def __ne__(self, other):
        return not self == other

    def __repr__(self):
        return "ClusterSpec(%r)" % (self.as_dict(),)


# --- servers -----------------------------------------------------------------------------------------


class Server:
    """A server for one task of a cluster (tf.train.Server), started when made; it prints
    "Started server with target: caf://host:port" to standard error and serves until join()
    returns (the process is stopped, or stop())."""

    def __init__(self, server_or_cluster_def, job_name=None, task_index=None, protocol=None,
                 config=None, start=True):
        if protocol not in (None, "grpc", "caf"):
            raise ValueError("Server protocol %r: actorflow speaks CAF (and takes 'grpc' for it)"
                             % protocol)
        if not start:
            raise ValueError("Server(start=False) is not supported yet: an actorflow server "
                             "starts when it is made")
        cluster = ClusterSpec(server_or_cluster_def)
        if job_name is None:
            if len(cluster.jobs) != 1:
                raise ValueError("Must specify an explicit `job_name`.")
            job_name = cluster.jobs[0]
        if task_index is None:
            if cluster.num_tasks(job_name) != 1:
                raise ValueError("Must specify an explicit `task_index`.")
            task_index = cluster.task_indices(job_name)[0]
        threads, timeout = _server_settings(config)
        filters = list(config.device_filters) if config is not None else []
        self._c = _c.Server.start(cluster._native(), job_name, int(task_index), threads, timeout,
                                  filters)
        # A MonitoredTrainingSession on this target finds the cluster and the task here.
        _register_server(self.target, cluster._native(), job_name, int(task_index))
        self._announce()

    @classmethod
    def create_local_server(cls, config=None, start=True):
        """A one-task server (job "localhost") on a free loopback port."""
        if not start:
            raise ValueError("create_local_server(start=False) is not supported yet")
        server = cls.__new__(cls)
        threads, timeout = _server_settings(config)
        server._c = _c.Server.create_local_server(0, threads, timeout)
        server._announce()
        return server

    def _announce(self):
        # What TF logs (to standard error, so a program's own output stays as under TF) as the
        # server starts; scripts and tests read the target from it.
        print("Started server with target: %s" % self.target, file=sys.stderr, flush=True)

    @property
    def target(self):
        """"caf://host:port", for tf.Session(server.target)."""
        return self._c.target

    def start(self):
        """Nothing to do: the server started when it was made."""

    def join(self):
        """Blocks until the server stops. Ctrl-C stops it and raises KeyboardInterrupt: the C++
        join waits on another thread, so that this one still takes signals."""
        stopped = threading.Event()

        def wait():
            try:
                self._c.join()
            finally:
                stopped.set()

        threading.Thread(target=wait, name="actorflow-server-join", daemon=True).start()
        try:
            while not stopped.wait(1.0):
                pass
        except KeyboardInterrupt:
            self._c.stop()
            raise

    def stop(self):
        """Stops the server (not in TF's API; join() returns)."""
        self._c.stop()


def _server_settings(config):
    if config is None:
        return 0, 10.0
    threads = max(config.inter_op_parallelism_threads, config.intra_op_parallelism_threads)
    timeout = config.operation_timeout_in_ms / 1000.0 if config.operation_timeout_in_ms else 10.0
    return int(threads), float(timeout)


# --- device setters ------------------------------------------------------------------------------------


class _ReplicaDeviceSetter:
    """The device function replica_device_setter returns; tf.device hands it to C++ as it is.
    Called with an Operation, it says where that op would go."""

    def __init__(self, native):
        self._native_device_function = native

    def __call__(self, op):
        return self._native_device_function(op.graph._c, op._node_id)


def replica_device_setter(ps_tasks=0, ps_device="/job:ps", worker_device="/job:worker",
                          merge_devices=True, cluster=None, ps_ops=None, ps_strategy=None):
    """Variables round-robin over the ps tasks (counted from `cluster` when given), every other
    op on `worker_device`; device blocks inside override the fields they name."""
    if ps_strategy is not None:
        raise ValueError("replica_device_setter(ps_strategy=...) is not supported yet: the tasks "
                         "are chosen round-robin")
    native_cluster = None
    if cluster is not None:
        native_cluster = ClusterSpec(cluster)._native()
    ops = list(ps_ops) if ps_ops is not None else ["Variable", "VariableV2"]
    return _ReplicaDeviceSetter(_c.replica_device_setter(int(ps_tasks), ps_device or "",
                                                         worker_device or "", bool(merge_devices),
                                                         ops, native_cluster))


def get_global_step(graph=None):
    graph = graph or get_default_graph()
    steps = graph.get_collection("global_step")
    return steps[0] if steps else None


def create_global_step(graph=None):
    graph = graph or get_default_graph()
    if get_global_step(graph) is not None:
        raise ValueError('"global_step" already exists.')
    with graph.as_default():
        step = Variable(_ops.constant(0, dtype="int64"), trainable=False, name="global_step")
    graph.add_to_collection("global_step", step)
    return step


def get_or_create_global_step(graph=None):
    # Not `get_global_step(graph) or ...`: a Variable has no truth value (as a tf.Tensor).
    step = get_global_step(graph)
    return step if step is not None else create_global_step(graph)
