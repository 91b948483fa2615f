"""tf.distribute.cluster_resolver: where a task finds its cluster and its own place in it.

    # TF_CONFIG='{"cluster": {"ps": ["127.0.0.1:2222"], "worker": ["127.0.0.1:2223"]},
    #             "task": {"type": "worker", "index": 0}}'
    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    server = tf.train.Server(resolver.cluster_spec(), job_name=resolver.task_type,
                             task_index=resolver.task_id)

TF_CONFIG is read on every call, as TF does, so a launcher may set it after the resolver is
made. A malformed TF_CONFIG is a ValueError quoting what is wrong in it.
"""

import json
import os

from actorflow.train import ClusterSpec


def _tf_config():
    text = os.environ.get("TF_CONFIG", "")
    if not text.strip():
        return {}
    try:
        config = json.loads(text)
    except ValueError as error:
        raise ValueError("TF_CONFIG is not JSON: %s (TF_CONFIG=%r)" % (error, text)) from None
    if not isinstance(config, dict):
        raise ValueError("TF_CONFIG must be a JSON object, not %r" % (text,))
    return config


def format_master_url(master, rpc_layer=None):
    return "%s://%s" % (rpc_layer, master) if rpc_layer else master


class ClusterResolver:
    """The base of the resolvers: cluster_spec(), master(), task_type, task_id, rpc_layer."""

    def cluster_spec(self):
        raise NotImplementedError()

    def master(self, task_type=None, task_id=None, rpc_layer=None):
        raise NotImplementedError()


class SimpleClusterResolver(ClusterResolver):
    """A resolver over a ClusterSpec given in code."""

    def __init__(self, cluster_spec, master="", task_type=None, task_id=None, environment="",
                 rpc_layer=None):
        self._cluster_spec = ClusterSpec(cluster_spec)
        self._master = master
        self.task_type = task_type
        self.task_id = task_id
        self.environment = environment
        self.rpc_layer = rpc_layer

    def cluster_spec(self):
        return self._cluster_spec

    def master(self, task_type=None, task_id=None, rpc_layer=None):
        if task_type is not None and task_id is not None:
            return format_master_url(self._cluster_spec.task_address(task_type, task_id),
                                     rpc_layer or self.rpc_layer)
        return self._master


class TFConfigClusterResolver(ClusterResolver):
    """The cluster, this task's type and index, and the RPC layer from the TF_CONFIG environment
    variable ({"cluster": {...}, "task": {"type": ..., "index": ...}, "rpc_layer": ...,
    "environment": ...}); arguments given here win over TF_CONFIG's."""

    def __init__(self, task_type=None, task_id=None, rpc_layer=None, environment=None):
        self._task_type = task_type
        self._task_id = task_id
        self._rpc_layer = rpc_layer
        self._environment = environment

    @property
    def task_type(self):
        if self._task_type is not None:
            return self._task_type
        task = _tf_config().get("task", {})
        return str(task["type"]) if "type" in task else None

    @task_type.setter
    def task_type(self, task_type):
        self._task_type = task_type

    @property
    def task_id(self):
        if self._task_id is not None:
            return self._task_id
        task = _tf_config().get("task", {})
        if "index" not in task:
            return None
        try:
            return int(task["index"])
        except (TypeError, ValueError):
            raise ValueError("TF_CONFIG's task index must be an integer, not %r"
                             % (task["index"],)) from None

    @task_id.setter
    def task_id(self, task_id):
        self._task_id = task_id

    @property
    def rpc_layer(self):
        return self._rpc_layer if self._rpc_layer is not None else _tf_config().get("rpc_layer")

    @rpc_layer.setter
    def rpc_layer(self, rpc_layer):
        self._rpc_layer = rpc_layer

    @property
    def environment(self):
        if self._environment is not None:
            return self._environment
        return _tf_config().get("environment", "")

    def cluster_spec(self):
        """The ClusterSpec of TF_CONFIG's "cluster" (empty when TF_CONFIG is unset)."""
        return ClusterSpec(_tf_config().get("cluster", {}))

    def master(self, task_type=None, task_id=None, rpc_layer=None):
        """The address of the task `task_type`:`task_id` (this task by default) with the RPC
        layer in front ("grpc://host:port"); "" when TF_CONFIG names no task."""
        if task_type is None or task_id is None:
            task_type, task_id = self.task_type, self.task_id
        if task_type is None or task_id is None:
            return ""
        return format_master_url(self.cluster_spec().task_address(task_type, task_id),
                                 rpc_layer or self.rpc_layer)
