"""tf.summary: TF 1.x's summaries for TensorBoard.

    tf.summary.scalar("loss", loss)                   # also histogram(name, values)
    merged = tf.summary.merge_all()
    writer = tf.summary.FileWriter("logs", sess.graph)
    summary, _ = sess.run([merged, train_op])         # bytes: a serialized Summary
    writer.add_summary(summary, step)                 # an event file TensorBoard reads

actorflow has no string tensors: a summary is a node of the graph (an Identity of its values,
named as TF names the summary op, which gives its tag) and a Python object that Session.run
fetches as the values of its nodes and returns serialized as TF's Summary protobuf
(serialization/event_file.hpp: TF's default histogram buckets). Names TF has here and
actorflow does not (image, audio, text, tensor_summary) raise AttributeError saying so.
"""

import numpy as np

from actorflow import _actorflow as _c
from actorflow._missing import missing_names
from actorflow.framework import convert_to_tensor, get_default_graph
from actorflow.variable_scope import GraphKeys

__getattr__ = missing_names(__name__)


class _SummaryOp:
    """What tf.summary.scalar/histogram/merge return (TF: a string Tensor). Session.run fetches
    it as the serialized Summary of its values."""

    def __init__(self, graph, entries, name):
        self.graph = graph
        self._entries = entries   # [(tag, histogram?, Tensor)]
        self.name = name

    def _serialize(self, values):
        return _c.serialize_summary([(tag, histogram, np.asarray(value))
                                     for (tag, histogram, _), value in zip(self._entries, values)])

    def __repr__(self):
        return "<tf.summary %r: %s>" % (self.name, ", ".join(tag for tag, _, _ in self._entries))


def _summary(name, values, histogram, collections):
    from actorflow.ops import cast, identity
    from actorflow import dtypes
    tensor = convert_to_tensor(values)
    if not histogram and tensor.shape.num_elements() not in (None, 1):
        raise ValueError("tf.summary.scalar(%r) needs a scalar, not a tensor of shape %s"
                         % (name, tensor.shape))
    if tensor.dtype.is_bool:
        tensor = cast(tensor, dtypes.float32)
    node = identity(tensor, name=name)
    tag = node.op.name
    summary = _SummaryOp(tensor.graph, [(tag, histogram, node)], tag)
    for key in (collections if collections is not None else [GraphKeys.SUMMARIES]):
        tensor.graph.add_to_collection(key, summary)
    return summary


def scalar(name, tensor, collections=None, family=None):
    """A scalar summary of `tensor` (TensorBoard's simple_value), its tag the op's name."""
    if family is not None:
        name = "%s/%s" % (family, name)
    return _summary(name, tensor, False, collections)


def histogram(name, values, collections=None, family=None):
    """A histogram of every element of `values` in TF's default buckets."""
    if family is not None:
        name = "%s/%s" % (family, name)
    return _summary(name, values, True, collections)


def merge(inputs, collections=None, name=None):
    """One summary holding the values of `inputs` (summaries of one graph)."""
    inputs = [s for s in inputs if s is not None]
    for s in inputs:
        if not isinstance(s, _SummaryOp):
            raise TypeError("tf.summary.merge takes summaries (tf.summary.scalar, histogram, "
                            "merge), not %r" % (s,))
    graphs = {id(s.graph) for s in inputs}
    if len(graphs) > 1:
        raise ValueError("tf.summary.merge: the summaries come from different graphs")
    graph = inputs[0].graph if inputs else get_default_graph()
    merged = _SummaryOp(graph, [e for s in inputs for e in s._entries], name or "Merge/MergeSummary")
    for key in collections or []:
        graph.add_to_collection(key, merged)
    return merged


def merge_all(key=GraphKeys.SUMMARIES, scope=None, name=None):
    """Every summary of the default graph's collection `key` merged; None when there is none."""
    summaries = get_default_graph().get_collection(key, scope)
    if not summaries:
        return None
    return merge(summaries, name=name)


class FileWriter:
    """Writes event files in `logdir` (tf.summary.FileWriter): summaries fetched by
    Session.run (or a tf.Summary's SerializeToString()) at their step, and the graph. Every
    record reaches the file when added, so flush() has nothing to do."""

    def __init__(self, logdir, graph=None, max_queue=10, flush_secs=120, graph_def=None,
                 filename_suffix=None, session=None):
        if filename_suffix is not None:
            raise ValueError("FileWriter(filename_suffix=...) is not supported: actorflow names "
                             "event files events.out.tfevents.<seconds>.<host>.<pid>")
        self._logdir = str(logdir)
        self._writer = _c.EventFileWriter(self._logdir)
        if graph is not None or graph_def is not None:
            self.add_graph(graph if graph is not None else graph_def)

    def get_logdir(self):
        return self._logdir

    def add_summary(self, summary, global_step=None):
        if hasattr(summary, "SerializeToString"):
            summary = summary.SerializeToString()
        if not isinstance(summary, (bytes, bytearray)):
            raise TypeError("FileWriter.add_summary takes what Session.run returned for a "
                            "summary (bytes) or a tf.Summary, not %r" % type(summary))
        self._writer.add_summary(int(global_step or 0), bytes(summary))

    def add_graph(self, graph, global_step=None, graph_def=None):
        graph = getattr(graph, "graph", graph)  # a Session's graph
        if not hasattr(graph, "_c"):
            raise TypeError("FileWriter.add_graph takes a tf.Graph, not %r" % type(graph))
        self._writer.add_graph(graph._c)

    def flush(self):
        pass

    def close(self):
        self._writer.close()

    def reopen(self):
        raise ValueError("FileWriter.reopen is not supported: make a new FileWriter")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class Summary:
    """tf.Summary, for values made by hand:
    Summary(value=[Summary.Value(tag="accuracy", simple_value=0.93)]).SerializeToString()."""

    class Value:
        def __init__(self, tag="", simple_value=None, histo=None):
            if histo is not None:
                raise ValueError("tf.Summary.Value(histo=...) is not supported: use "
                                 "tf.summary.histogram")
            self.tag = tag
            self.simple_value = simple_value

    def __init__(self, value=None):
        self.value = list(value or [])

    def SerializeToString(self):  # noqa: N802 - the protobuf method's name
        return _c.serialize_summary([(v.tag, False, np.asarray(float(v.simple_value or 0.0)))
                                     for v in self.value])

